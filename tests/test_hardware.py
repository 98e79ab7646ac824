"""GPU catalog, workload profiles and the power-cap model.

Calibration and generalisation read the Zeus power sweeps in ../shared/data/zeus-nsdi23
(skipped without them) and check the parameters the catalog ships
(sim/data/power_model.toml); docs/power-model.md describes the model.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.models import hardware as hw
from sim.models import training
from sim.models.hardware import GPU_CATALOG, PROFILES, REFERENCE_GPU, estimate, speed
from sim.models.training import TRAINING_WORKLOADS
from tests.conftest import REPO, SHARED_DATA, make_scenario, site

GPU_IDS = [
    "P100", "V100", "T4", "RTX6000", "A40", "A100-40GB", "A100-80GB",
    "L4", "L40S", "H100-SXM", "H100-PCIe", "H200", "B200",
]  # fmt: skip
PROFILE_IDS = [
    "shufflenetv2", "resnet50", "deepspeech2", "ncf", "bert-squad", "bert-sentiment140",
    "compute-bound", "memory-bound", "mixed", "inference",
]  # fmt: skip
ZEUS_WORKLOADS = PROFILE_IDS[:6]
MEASURED = ["P100", "V100", "RTX6000", "A40"]
ZEUS = SHARED_DATA / "zeus-nsdi23"
STEP_W = 25.0


def _calibration_script():
    path = REPO / "scripts" / "calibrate_power.py"
    spec = importlib.util.spec_from_file_location("calibrate_power", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("calibrate_power", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def zeus():
    """Every Zeus power-sweep point (the calibration script's reading of the files)."""
    if not ZEUS.is_dir():
        pytest.skip(f"Zeus power sweeps not found at {ZEUS} (checkout without ../shared)")
    cp = _calibration_script()
    return cp, cp.load_zeus(ZEUS)


@pytest.fixture(scope="module")
def shipped(zeus):
    """Every point with the shipped model's throughput and power for that run's P0."""
    _, z = zeus
    z = z.copy()
    r, p = np.empty(len(z)), np.empty(len(z))
    for (gid, wid), g in z.groupby(["gpu", "workload"]):
        cc = hw.POWER_MODEL.pairs[gid, wid]
        rows = z.index.get_indexer(g.index)
        r[rows], p[rows] = hw.cap_response(
            g["cap_w"].to_numpy(),
            g["uncapped_w"].to_numpy(),
            GPU_CATALOG[gid].max_cap_w,
            hw.floor_w(gid),
            cc.n,
            cc.a,
            cc.b,
        )
    z["tau_model"], z["power_model_w"] = 1.0 / r, p
    return z


# --- catalog and profiles ----------------------------------------------------------------------


def test_catalog_and_profile_ids_are_exactly_the_documented_ones():
    assert sorted(GPU_CATALOG) == sorted(GPU_IDS)
    batch_profiles = [
        f"{w}@{b}" for w in TRAINING_WORKLOADS for b in training.measured_batch_sizes(w)
    ]
    assert sorted(PROFILES) == sorted([*PROFILE_IDS, *batch_profiles])
    assert REFERENCE_GPU == "A100-80GB"
    assert all(spec.id == gid for gid, spec in GPU_CATALOG.items())


def test_every_catalog_number_names_its_source():
    groups = {
        "tdp_w", "min_cap_w", "max_cap_w", "idle_w", "memory", "memory_devices",
        "throughput", "die", "release_year", "embodied", "architecture", "formats",
    }  # fmt: skip
    raw = tomllib.loads((REPO / "sim" / "data" / "gpus.toml").read_text("utf-8"))
    header = (REPO / "sim" / "data" / "gpus.toml").read_text("utf-8").split("\n[")[0]
    for gid in GPU_IDS:
        sources = hw.GPU_SOURCES[gid]
        assert set(sources) == groups, gid
        for what, ref in sources.items():
            key = ref.split(":")[0].split(" ")[0]
            assert key in ("rule", "none") or f"[{key}]" in header, (gid, what, ref)
        assert raw[gid]["sources"] == dict(sources)


def test_catalog_numbers_are_physically_consistent():
    for spec in GPU_CATALOG.values():
        assert 0 < spec.min_cap_w < spec.max_cap_w or not spec.min_cap_sourced, spec.id
        assert spec.max_cap_w >= spec.tdp_w, spec.id
        assert 0 < spec.idle_w < spec.min_cap_w, spec.id
        # low-precision tensor rates: FP8 and INT8 at twice FP16, FP4 at twice FP8 (dense)
        for rate in (spec.int8_tops, spec.fp8_tflops):
            assert rate is None or 1.9 < rate / spec.fp16_tflops < 2.1, spec.id
        assert spec.fp4_tflops is None or spec.fp4_tflops == 2 * spec.fp8_tflops, spec.id
        assert spec.architecture in hw.ARCHITECTURES, spec.id
        assert spec.fp16_tflops > spec.fp32_tflops > 0, spec.id
        assert spec.memory_gb > 0 and spec.mem_bw_gbps > 0 and spec.memory_devices > 0
        assert 2016 <= spec.release_year <= 2024
        assert spec.service_life_years > 0 and spec.host_embodied_kg > 0


def test_measured_gpus_have_the_power_limit_ranges_zeus_swept():
    limits = {gid: (GPU_CATALOG[gid].min_cap_w, GPU_CATALOG[gid].max_cap_w) for gid in MEASURED}
    assert limits == {
        "P100": (125, 250),
        "V100": (100, 250),
        "RTX6000": (100, 260),
        "A40": (100, 300),
    }


def test_embodied_carbon_is_the_bloom_anchor_or_the_documented_rule():
    a100 = GPU_CATALOG["A100-80GB"]
    assert a100.embodied_kg == 150.0 and a100.host_embodied_kg == 2500 / 8
    # The rule reproduces the anchor it was built on (to the rounding of its constant).
    assert hw.embodied_kg_rule(400, 826, 7, 80) == pytest.approx(150.0, abs=0.1)
    for spec in GPU_CATALOG.values():
        if spec.id != "A100-80GB":
            rule = hw.embodied_kg_rule(spec.tdp_w, spec.die_mm2, spec.process_nm, spec.memory_gb)
            assert spec.embodied_kg == rule
        per_h = (spec.embodied_kg + spec.host_embodied_kg) / (spec.service_life_years * 8760)
        assert spec.embodied_kg_per_gpu_h == per_h
    # Bigger, newer parts embody more.
    kg = {g: GPU_CATALOG[g].embodied_kg for g in GPU_IDS}
    assert kg["T4"] < kg["V100"] < kg["A100-80GB"] < kg["H100-SXM"] < kg["H200"]


def test_zeus_profiles_stand_for_the_zeus_default_batch_sizes():
    batch = {p: PROFILES[p].zeus_batch_size for p in ZEUS_WORKLOADS}
    assert batch == {
        "shufflenetv2": 1024, "resnet50": 256, "deepspeech2": 192, "ncf": 1024,
        "bert-squad": 32, "bert-sentiment140": 128,
    }  # fmt: skip
    for p in PROFILE_IDS:
        assert 0 < PROFILES[p].power_frac <= 1 and 0 < PROFILES[p].compute_frac < 1


# --- calibration on the Zeus sweeps ------------------------------------------------------------


def test_at_most_three_fitted_parameters_per_gpu_and_workload():
    raw = tomllib.loads((REPO / "sim" / "data" / "power_model.toml").read_text("utf-8"))
    pairs = {(g, w) for g, per in raw["pairs"].items() for w in per}
    assert pairs == {(g, w) for g in MEASURED for w in ZEUS_WORKLOADS}
    for g, per in raw["pairs"].items():
        for w, params in per.items():
            # n, a, b are fitted; uncapped_w is the measured draw at the profile's batch
            # size, an input of the model.
            assert set(params) == {"n", "a", "b", "uncapped_w"}, (g, w)
    assert [f for f in hw.CapCurve.__dataclass_fields__ if f != "source"] == ["n", "a", "b"]
    # The same three numbers serve every batch size: nothing else is keyed by batch size.
    assert all(isinstance(v, float) for v in raw["pairs"]["V100"]["resnet50"].values())


def test_shipped_parameters_are_the_ones_sim_hardware_reads():
    raw = tomllib.loads((REPO / "sim" / "data" / "power_model.toml").read_text("utf-8"))
    for (g, w), cc in hw.POWER_MODEL.pairs.items():
        p = raw["pairs"][g][w]
        assert (cc.n, cc.a, cc.b) == (p["n"], p["a"], p["b"])
        assert estimate(g, w).power_w == p["uncapped_w"]
    assert hw.POWER_MODEL.floor_scale == raw["floor_scale"]


def test_calibration_time_and_power_mape_over_every_measured_point(shipped):
    z = shipped
    assert len(z) == 1609
    time_mape = np.mean(np.abs(z["tau_model"] / z["tau"] - 1.0))
    power_mape = np.mean(np.abs(z["power_model_w"] / z["power_w"] - 1.0))
    assert time_mape <= 0.05, f"time-per-epoch MAPE {time_mape:.2%}"
    assert power_mape <= 0.08, f"average-power MAPE {power_mape:.2%}"


def test_calibration_energy_optimal_cap_within_one_step_for_most_sweeps(shipped):
    hits = []
    for _, g in shipped.groupby(["gpu", "workload", "batch_size", "optimizer"]):
        caps = g["cap_w"].to_numpy()
        measured = caps[np.argmin((g["tau"] * g["power_w"]).to_numpy())]
        model = caps[np.argmin((g["tau_model"] * g["power_model_w"]).to_numpy())]
        hits.append(abs(measured - model) <= STEP_W)
    assert len(hits) == 218
    share = np.mean(hits)
    assert share >= 0.80, f"energy-optimal cap within 25 W for {share:.1%} of sweeps"


def test_calibration_recorded_in_the_catalog_matches_the_data(shipped):
    """The [fit] table shipped in power_model.toml (and copied into the docs) is current."""
    raw = tomllib.loads((REPO / "sim" / "data" / "power_model.toml").read_text("utf-8"))
    for (g, w), pts in shipped.groupby(["gpu", "workload"]):
        rec = raw["fit"][g][w]
        assert rec["points"] == len(pts)
        ape = np.abs(pts["tau_model"] / pts["tau"] - 1.0).mean()
        assert rec["time_mape"] == pytest.approx(ape, rel=1e-4)


# --- generalisation to GPUs that were not measured ---------------------------------------------


@pytest.mark.parametrize("held_out", MEASURED)
def test_generalisation_leave_one_gpu_out(zeus, held_out):
    """Fit the generic curve (floor scale s, shape a, b) on the other three GPUs, with their
    own per-pair n; predict the held-out GPU's throughput-vs-cap curve from its catalog specs
    (its floor and maximum limit) and each run's uncapped draw, the model's input. `n` per
    workload is the median of the other GPUs'. Scored below the maximum limit."""
    cp, z = zeus
    train, test = z[z["gpu"] != held_out], z[z["gpu"] == held_out]
    n_of = {k: cc.n for k, cc in hw.POWER_MODEL.pairs.items()}
    n_train = np.array([n_of[k] for k in zip(train["gpu"], train["workload"], strict=True)])
    s, a, b = cp.fit_shape(train, n_train, None, target="throughput")
    others = [g for g in MEASURED if g != held_out]
    n_test = test["workload"].map(
        {w: np.median([n_of[g, w] for g in others]) for w in ZEUS_WORKLOADS}
    )
    test = test[test["cap_w"] < test["max_cap_w"]]
    r, _ = hw.cap_response(
        test["cap_w"].to_numpy(),
        test["uncapped_w"].to_numpy(),
        GPU_CATALOG[held_out].max_cap_w,
        s * GPU_CATALOG[held_out].active_idle_w,
        n_test.loc[test.index].to_numpy(),
        a,
        b,
    )
    mape = np.mean(np.abs(r * test["tau"].to_numpy() - 1.0))
    assert mape <= 0.10, f"{held_out}: throughput MAPE {mape:.2%} from the other three GPUs"


# --- sanity ------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", GPU_IDS)
def test_throughput_never_decreases_and_power_never_exceeds_the_cap(gpu):
    spec = GPU_CATALOG[gpu]
    caps = np.linspace(spec.min_cap_w, spec.max_cap_w, 301)
    for profile in PROFILE_IDS:
        est = [estimate(gpu, profile, float(c)) for c in caps]
        r = np.array([e.throughput_fraction for e in est])
        p = np.array([e.power_w for e in est])
        assert np.all(np.diff(r) >= 0), profile
        assert np.all(np.diff(p) >= -1e-9), profile
        assert np.all(p <= caps) and np.all(p > 0), profile
        assert np.all((r > 0) & (r <= 1)), profile
        full = estimate(gpu, profile)
        assert full == estimate(gpu, profile, spec.max_cap_w)
        assert full.throughput_fraction == 1.0 and full.power_w <= spec.max_cap_w


@settings(max_examples=300, deadline=None)
@given(
    gpu=st.sampled_from(GPU_IDS),
    profile=st.sampled_from(PROFILE_IDS),
    u=st.floats(0.0, 1.0),
    v=st.floats(0.0, 1.0),
)
def test_cap_monotonicity_holds_between_any_two_caps(gpu, profile, u, v):
    spec = GPU_CATALOG[gpu]
    lo, hi = sorted(spec.min_cap_w + t * (spec.max_cap_w - spec.min_cap_w) for t in (u, v))
    a, b = estimate(gpu, profile, lo), estimate(gpu, profile, hi)
    assert a.throughput_fraction <= b.throughput_fraction
    assert a.power_w <= lo + 1e-9 and b.power_w <= hi + 1e-9


def test_speed_is_relative_to_the_reference_gpu():
    assert all(speed(REFERENCE_GPU, p) == 1.0 for p in PROFILE_IDS)


@pytest.mark.parametrize("profile", ["compute-bound", "bert-squad", "mixed"])
def test_compute_bound_work_runs_faster_on_h100_than_a100_than_v100(profile):
    assert speed("H100-SXM", profile) > speed("A100-80GB", profile) > speed("V100", profile)


def test_memory_bound_work_scales_with_bandwidth():
    # Same compute, different memory: the speed ratio follows the bandwidth ratio for
    # memory-bound work and barely moves for compute-bound work.
    for slow, fast in [("A100-40GB", "A100-80GB"), ("H100-SXM", "H200")]:
        bw = GPU_CATALOG[fast].mem_bw_gbps / GPU_CATALOG[slow].mem_bw_gbps
        mem = speed(fast, "memory-bound") / speed(slow, "memory-bound")
        comp = speed(fast, "compute-bound") / speed(slow, "compute-bound")
        assert math.log(mem) >= 0.75 * math.log(bw), (slow, fast)
        assert math.log(comp) <= 0.25 * math.log(bw), (slow, fast)
    # Across all GPUs, memory-bound speed tracks bandwidth far better than compute.
    ref = GPU_CATALOG[REFERENCE_GPU]
    s = np.array([speed(g, "memory-bound") for g in GPU_IDS])
    bw = np.array([GPU_CATALOG[g].mem_bw_gbps / ref.mem_bw_gbps for g in GPU_IDS])
    fl = np.array([GPU_CATALOG[g].fp16_tflops / ref.fp16_tflops for g in GPU_IDS])
    assert np.std(np.log(s / bw)) < 0.5 * np.std(np.log(s / fl))


def test_unmeasured_pairs_use_the_workload_or_generic_curve_from_catalog_specs():
    cc, p0 = hw.curve("H100-SXM", "resnet50")
    assert cc.source == "workload" and p0 == PROFILES["resnet50"].power_frac * 700
    cc, p0 = hw.curve("V100", "mixed")
    assert cc.source == "generic" and p0 == PROFILES["mixed"].power_frac * 250
    assert hw.curve("V100", "resnet50")[0].source == "measured"
    # A GDDR6 board with many memory devices has a higher floor, so it loses more
    # throughput at the same fraction of its limit than an HBM board.
    a40 = estimate("A40", "mixed", 0.5 * 300).throughput_fraction
    v100 = estimate("V100", "mixed", 0.5 * 250).throughput_fraction
    assert a40 < v100


def test_a_cap_is_a_positive_number_of_watts():
    with pytest.raises(ValueError, match="positive"):
        estimate("V100", "mixed", -5.0)
    with pytest.raises(ValueError, match="positive"):
        estimate("V100", "mixed", float("nan"))


def test_docs_carry_the_figure_and_the_current_fit_table():
    doc = (REPO / "docs" / "power-model.md").read_text("utf-8")
    figure = REPO / "docs" / "figures" / "v100_resnet50_energy_time.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "figures/v100_resnet50_energy_time.png" in doc
    raw = tomllib.loads((REPO / "sim" / "data" / "power_model.toml").read_text("utf-8"))
    v100 = raw["fit"]["V100"]["resnet50"]
    assert f"| V100 | resnet50 | {v100['points']} | {100 * v100['time_mape']:.1f}% |" in doc


# --- scenario GPU models join the catalog ---------------------------------------------


MI250X = {
    "name": "AMD Instinct MI250X (example)",
    "tdp_w": 560,
    "min_cap_w": 200,
    "max_cap_w": 560,
    "idle_w": 90,
    "memory_gb": 128,
    "memory_type": "HBM2e",
    "memory_devices": 8,
    "mem_bw_gbps": 3277,
    "fp16_tflops": 383,
    "fp32_tflops": 47.9,
    "die_mm2": 1448,
    "process_nm": 7,
    "release_year": 2021,
    "host_embodied_kg": 312.5,
    "service_life_years": 6,
}


def test_a_scenario_can_add_a_gpu_model_to_the_catalog(tmp_path, catalog_restored):
    scenario = make_scenario(
        tmp_path,
        [
            {
                "job_id": "j1",
                "submit_time": 0.0,
                "gpus": 1,
                "work_gpu_h": 1.0,
                "profile": "compute-bound",
            }
        ],
        gpu_models={"MI250X-test": MI250X},
        sites=[site(gpus=[{"model": "MI250X-test", "count": 2}])],
    )
    r = sim.simulate(scenario, "run_now")
    row = r.jobs.iloc[0]
    assert row["gpu_model"] == "MI250X-test" and row["state"] == "completed"
    assert row["end_s"] == pytest.approx(3600 / speed("MI250X-test", "compute-bound"))
    assert GPU_CATALOG["MI250X-test"].embodied_kg > 0  # by the catalog's rule


def test_a_scenario_gpu_model_may_not_redefine_a_built_in_one(catalog_restored):
    with pytest.raises(sim.ScenarioError, match="gpu_models.A100-80GB: .*built-in GPU"):
        make_scenario(gpu_models={"A100-80GB": MI250X})
    with pytest.raises(sim.ScenarioError, match=r"gpu_models\.X\.die_mm2: missing"):
        make_scenario(gpu_models={"X": {"name": "half a GPU"}})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "process_nm",
            4,
            r"gpu_models\.MI-test\.process_nm: expected one of \[5, 7, 8, 12, 16\] .*got 4$",
        ),
        ("memory_gb", "192", r"\.memory_gb: expected a positive number, got '192'$"),
        ("memory_devices", 8.5, r"\.memory_devices: expected a positive integer, got 8\.5$"),
        ("tdp_w", -1, r"\.tdp_w: expected a positive number, got -1$"),
        ("min_cap_w", 900, r"\.min_cap_w: expected at most max_cap_w \(560\), got 900$"),
        ("fp8_tflops", True, r"\.fp8_tflops: expected a positive number, got True$"),
        ("name", "", r"\.name: expected a non-empty string, got ''$"),
        ("tensor_cores", 1, r"\.tensor_cores: unknown field; expected fields: \["),
    ],
)
def test_a_bad_field_of_a_scenario_gpu_model_is_named_with_what_it_expects(
    catalog_restored, field, value, message
):
    with pytest.raises(sim.ScenarioError, match=message) as e:
        make_scenario(gpu_models={"MI-test": {**MI250X, field: value}})
    assert "\n" not in str(e.value)


def test_a_gpu_without_a_sourced_lowest_power_limit_takes_only_its_default_limit():
    b200 = GPU_CATALOG["B200"]
    assert not b200.min_cap_sourced and b200.min_cap_w == b200.max_cap_w == 1000
    assert b200.cap_error(1000) is None
    assert "B200 has no sourced lowest power limit" in str(b200.cap_error(800))
    assert GPU_CATALOG["H100-SXM"].cap_error(150) == (
        "cap 150 W is outside H100-SXM's settable range 200-700 W"
    )
