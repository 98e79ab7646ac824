"""MIG partitions (sim.models.mig): the profile catalog, NVIDIA's placement rules, per-slice speed
and the power of a partitioned GPU. docs/mig.md describes the model and its sources."""

from __future__ import annotations

import pytest

from sim.models import hardware, mig
from sim.models.mig import PlacedSlice, Placement

MIG_GPU_IDS = ["A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200"]
GENERIC_KINDS = ["compute-bound", "memory-bound", "mixed", "inference"]


# --- the catalog ------------------------------------------------------------------------------


def test_every_mig_capable_gpu_of_the_catalog_has_its_profiles() -> None:
    assert list(mig.MIG_GPUS) == MIG_GPU_IDS
    assert set(mig.MIG_GPUS) <= set(hardware.GPU_CATALOG)
    assert list(mig.MIG_GPUS["A100-80GB"].profiles) == [
        "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ]  # fmt: skip
    assert list(mig.MIG_GPUS["H100-SXM"].profiles) == [
        "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ]  # fmt: skip
    assert list(mig.MIG_GPUS["H200"].profiles) == [
        "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb",
    ]  # fmt: skip


def test_profiles_follow_the_placement_table_of_the_mig_user_guide() -> None:
    # `nvidia-smi mig -lgipp`: {0..6}:1, {0,2,4,6}:2, {0,2,4}:2, {0,4}:4, {0}:4, {0}:8
    expected = [
        (1, 1, (0, 1, 2, 3, 4, 5, 6)),
        (1, 2, (0, 2, 4, 6)),
        (2, 2, (0, 2, 4)),
        (3, 4, (0, 4)),
        (4, 4, (0,)),
        (7, 8, (0,)),
    ]
    for gpu in mig.MIG_GPUS.values():
        got = [(p.compute_slices, p.memory_slices, p.starts) for p in gpu.profiles.values()]
        assert got == expected, gpu.gpu_model


def test_a_seventh_gpu_instance_holds_all_the_smss_of_mig_mode() -> None:
    a100 = mig.MIG_GPUS["A100-80GB"]
    assert a100.profiles["7g.80gb"].sm_count == 7 * a100.profiles["1g.10gb"].sm_count == 98
    assert a100.sm_full == 108  # MIG mode leaves 10 of the A100's SMs unused
    h100 = mig.MIG_GPUS["H100-SXM"]
    assert h100.profiles["7g.80gb"].sm_count == h100.sm_full == 132
    assert 7 * h100.profiles["1g.10gb"].sm_count == 112  # seven 1g hold fewer SMs than 7g


def test_unknown_gpu_and_profile_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^GPU model 'T4' does not support MIG; MIG GPUs: A100"):
        mig.validate_layout("T4", ["1g.10gb"])
    with pytest.raises(ValueError, match=r"^A100-80GB: unknown MIG profile '1g.5gb'; profiles:"):
        mig.validate_layout("A100-80GB", ["1g.5gb"])
    with pytest.raises(ValueError, match="unknown workload kind 'nope'"):
        mig.slice_speed_frac("H200", "1g.18gb", "nope")
    with pytest.raises(ValueError, match="does not support MIG"):
        mig.reconfiguration_s("L4")


# --- layouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        (["4g.40gb", "4g.40gb"], "4g.40gb allows at most 1 instance(s) per GPU, got 2"),
        (["7g.80gb", "1g.10gb"], "needs 9 memory slices, the GPU has 8"),
        (["3g.40gb", "3g.40gb", "1g.10gb"], "needs 9 memory slices, the GPU has 8"),
        (
            ["4g.40gb", "2g.20gb", "2g.20gb"],
            "no placement without overlapping memory slices (allowed starts: "
            "4g.40gb at [0]; 2g.20gb at [0, 2, 4])",
        ),
    ],
)
def test_invalid_layouts_are_refused_with_one_line(layout: list[str], why: str) -> None:
    with pytest.raises(ValueError) as err:
        mig.validate_layout("A100-80GB", layout)
    message = str(err.value)
    assert message == f"A100-80GB: {' + '.join(layout)} does not fit: {why}"
    assert "\n" not in message


def test_valid_layouts_get_nvidia_start_slots() -> None:
    # the MIG User Guide's examples: two 3g; a 3-2-1-1 geometry; 4g beside 3g (R510 on)
    assert mig.validate_layout("A100-40GB", ["3g.20gb", "3g.20gb"]).slices == (
        PlacedSlice(0, "3g.20gb"),
        PlacedSlice(4, "3g.20gb"),
    )
    # the guide's driver put the 3g at 4 and the 2g at 2; any non-overlapping set of allowed
    # starts is a valid layout, and ours puts the widest first
    assert mig.validate_layout("A100-40GB", ["1g.5gb", "2g.10gb", "1g.5gb", "3g.20gb"]).slices == (
        PlacedSlice(0, "2g.10gb"),
        PlacedSlice(2, "1g.5gb"),
        PlacedSlice(3, "1g.5gb"),
        PlacedSlice(4, "3g.20gb"),
    )
    assert mig.validate_layout("H100-SXM", ["3g.40gb", "4g.40gb"]).profiles == (
        "4g.40gb",
        "3g.40gb",
    )


def _memory_slices_taken(p: Placement) -> int:
    """Memory slices a placement occupies; asserts no two instances overlap."""
    taken: set[int] = set()
    for s in p.slices:
        prof = mig.profile(p.gpu_model, s.profile)
        assert s.start in prof.starts
        cells = set(range(s.start, s.start + prof.memory_slices))
        assert not taken & cells, p
        taken |= cells
    return len(taken)


@pytest.mark.parametrize("gpu", MIG_GPU_IDS)
def test_every_maximal_layout_is_valid_and_cannot_grow(gpu: str) -> None:
    found = mig.layouts(gpu)
    assert len(found) == 28  # the same placement table on every MIG GPU of the catalog
    assert len({tuple(sorted(p.profiles)) for p in found}) == len(found)
    for placement in found:
        _memory_slices_taken(placement)
        compute = sum(mig.profile(gpu, n).compute_slices for n in placement.profiles)
        assert compute <= mig.COMPUTE_SLICES
        assert mig.validate_layout(gpu, placement.profiles).profiles == placement.profiles
        for name in mig.MIG_GPUS[gpu].profiles:
            with pytest.raises(ValueError, match="does not fit"):
                mig.validate_layout(gpu, [*placement.profiles, name])


def test_fits_finds_a_free_slot_or_none() -> None:
    empty = Placement("A100-80GB")
    assert mig.fits("A100-80GB", empty, "7g.80gb") == 0
    assert mig.fits("A100-80GB", empty, "3g.40gb") == 4  # keeps 4g.40gb possible at 0
    assert mig.fits("A100-80GB", empty, "1g.10gb") == 4  # keeps 4g.40gb possible at 0
    half = mig.validate_layout("A100-80GB", ["4g.40gb"])
    assert mig.fits("A100-80GB", half, "3g.40gb") == 4
    assert mig.fits("A100-80GB", half, "4g.40gb") is None
    full = mig.validate_layout("A100-80GB", ["7g.80gb"])
    assert all(mig.fits("A100-80GB", full, n) is None for n in mig.MIG_GPUS["A100-80GB"].profiles)
    with pytest.raises(ValueError, match="^H200: the placement is of A100-80GB$"):
        mig.fits("H200", full, "1g.18gb")


def _add(placement: Placement, name: str) -> Placement:
    start = mig.fits(placement.gpu_model, placement, name)
    assert start is not None, (placement, name)
    slices = tuple(sorted((*placement.slices, PlacedSlice(start, name))))
    return Placement(placement.gpu_model, slices)


def test_fits_then_adding_gives_a_valid_layout() -> None:
    placement = Placement("H200")
    for name in ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]:
        placement = _add(placement, name)
        _memory_slices_taken(placement)
    assert placement.profiles == ("2g.35gb", "1g.18gb", "1g.18gb", "3g.71gb")
    assert mig.fits("H200", placement, "1g.18gb") is None


def test_one_at_a_time_placement_may_need_a_repartition() -> None:
    # a 1g placed first keeps 4g possible, so a later 3g has no aligned half left; the
    # same multiset fits when placed at once
    placement = _add(_add(Placement("H200"), "1g.18gb"), "2g.35gb")
    assert mig.fits("H200", placement, "3g.71gb") is None
    mig.validate_layout("H200", ["1g.18gb", "2g.35gb", "3g.71gb"])


# --- speed ------------------------------------------------------------------------------------


def test_slice_speed_is_the_roofline_over_sm_and_bandwidth_shares() -> None:
    # A100-80GB 3g.40gb: 42 of 108 SMs, 4 of 8 memory slices; compute-bound compute_frac 0.9
    expected = 1.0 / (0.9 / (42 / 108) + 0.1 / 0.5)
    assert mig.slice_speed_frac("A100-80GB", "3g.40gb", "compute-bound") == pytest.approx(expected)
    # a 1g with two memory slices is faster on memory-bound work than one with one slice
    one = mig.slice_speed_frac("A100-80GB", "1g.10gb", "memory-bound")
    two = mig.slice_speed_frac("A100-80GB", "1g.20gb", "memory-bound")
    assert two > 1.5 * one


@pytest.mark.parametrize("gpu", MIG_GPU_IDS)
@pytest.mark.parametrize("kind", GENERIC_KINDS)
def test_slices_of_a_layout_never_outrun_the_whole_gpu(gpu: str, kind: str) -> None:
    for placement in mig.layouts(gpu):
        total = sum(mig.slice_speed_frac(gpu, n, kind) for n in placement.profiles)
        assert 0 < total <= 1.0 + 1e-12, placement


def test_seven_1g_against_one_7g() -> None:
    def ratio(gpu: str, one: str, seven: str, kind: str) -> float:
        return 7 * mig.slice_speed_frac(gpu, one, kind) / mig.slice_speed_frac(gpu, seven, kind)

    # A100: seven 1g hold the 7g's 98 SMs, but 7 of its 8 memory slices
    compute = ratio("A100-80GB", "1g.10gb", "7g.80gb", "compute-bound")
    memory = ratio("A100-80GB", "1g.10gb", "7g.80gb", "memory-bound")
    assert memory < compute < 1.0
    assert memory > 7 / 8
    # H100: seven 1g hold 112 of the 7g's 132 SMs
    assert ratio("H100-SXM", "1g.10gb", "7g.80gb", "compute-bound") < compute


# WULVER (NJIT ARCS, "MIG Performance Testing"): GROMACS on A100-SXM4-80GB, ns/day:
# 10gb (1g.10gb) 43.28, 20gb (2g.20gb) 81.205, 40gb (3g.40gb) 115.507, full GPU 118.59.
PUBLISHED_A100_80GB = {
    "1g.10gb": 43.28 / 118.59,
    "2g.20gb": 81.205 / 118.59,
    "3g.40gb": 115.507 / 118.59,
}


@pytest.mark.parametrize("kind", GENERIC_KINDS)
def test_model_is_a_lower_bound_on_published_slice_speeds(kind: str) -> None:
    """The model assumes work that saturates the whole GPU; work that does not (here a
    host-bound GROMACS run) loses less on a slice, so the published speed is never below the
    model's. docs/mig.md has the table."""
    for profile_name, published in PUBLISHED_A100_80GB.items():
        assert mig.slice_speed_frac("A100-80GB", profile_name, kind) <= published


def test_h100_half_slice_matches_published_serving_claims() -> None:
    """Baseten, "Using fractional H100 GPUs for efficient model serving": an H100 3g.40gb
    instance has "about half of the power of a full GPU" and meets "or exceed[s]" an A100.
    Tolerances as stated in docs/mig.md: within 20% of one half, at least 0.9 of an A100."""
    half = mig.slice_speed_frac("H100-SXM", "3g.40gb", "inference")
    assert half == pytest.approx(0.5, rel=0.2)
    vs_a100 = (
        half * hardware.speed("H100-SXM", "inference") / hardware.speed("A100-80GB", "inference")
    )
    assert vs_a100 >= 0.9


# --- power ------------------------------------------------------------------------------------


def test_power_of_a_partitioned_gpu_is_idle_plus_each_slices_share() -> None:
    spec = hardware.GPU_CATALOG["H100-SXM"]
    dynamic_w = spec.max_cap_w - spec.idle_w
    assert mig.gpu_power_w("H100-SXM", []) == spec.idle_w
    assert mig.gpu_power_w("H100-SXM", [("7g.80gb", 1.0)]) == pytest.approx(spec.max_cap_w)
    got = mig.gpu_power_w("H100-SXM", [("3g.40gb", 0.5), ("4g.40gb", 1.0)])
    assert got == pytest.approx(spec.idle_w + (0.5 * 60 / 132 + 64 / 132) * dynamic_w)


@pytest.mark.parametrize("gpu", MIG_GPU_IDS)
def test_power_adds_up_and_stays_within_the_limit(gpu: str) -> None:
    spec = hardware.GPU_CATALOG[gpu]
    whole_dynamic_w = spec.max_cap_w - spec.idle_w
    for placement in mig.layouts(gpu):
        full = mig.gpu_power_w(gpu, [(n, 1.0) for n in placement.profiles])
        sms = sum(mig.profile(gpu, n).sm_count for n in placement.profiles)
        # the slices' dynamic power is the whole GPU's, scaled by the SMs they hold
        assert full - spec.idle_w == pytest.approx(
            whole_dynamic_w * sms / mig.MIG_GPUS[gpu].sm_full
        )
        assert full <= spec.max_cap_w
        # each slice's dynamic power is its own: the sum of one-slice-busy draws
        alone = [
            mig.gpu_power_w(gpu, [(m, float(i == j)) for j, m in enumerate(placement.profiles)])
            - spec.idle_w
            for i in range(len(placement.profiles))
        ]
        assert sum(alone) == pytest.approx(full - spec.idle_w)


def test_seven_1g_draw_what_one_7g_draws_on_an_a100() -> None:
    seven = mig.gpu_power_w("A100-80GB", [("1g.10gb", 1.0)] * 7)
    assert seven == pytest.approx(mig.gpu_power_w("A100-80GB", [("7g.80gb", 1.0)]))


def test_power_refuses_bad_loads_and_layouts() -> None:
    with pytest.raises(ValueError, match=r"^H200: load of 1g.18gb must be in \[0, 1\], got 1.5$"):
        mig.gpu_power_w("H200", [("1g.18gb", 1.5)])
    with pytest.raises(ValueError, match="^H200: 7g.141gb \\+ 1g.18gb does not fit"):
        mig.gpu_power_w("H200", [("7g.141gb", 1.0), ("1g.18gb", 0.0)])


def test_reconfiguration_time_is_a_positive_constant_per_gpu() -> None:
    for gpu in MIG_GPU_IDS:
        assert mig.reconfiguration_s(gpu) > 0
        assert mig.MIG_GPUS[gpu].sources["reconfiguration_s"].startswith("EST")
