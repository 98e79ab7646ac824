"""mig_partitioner: MIG layouts chosen for the services' slice variants and the MIG jobs,
found by an exact search, applied by draining (a whole-GPU bridge first) and repartitioning
(docs/policies-mig-partitioner.md)."""

from __future__ import annotations

import math
from collections import Counter
from itertools import product

import pytest

import sim
from policies.mig_partitioner import MigPartitioner
from sim.api import Repartition
from sim.models import mig
from sim.models.llm_replica import replica_model
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

A100, H100 = "A100-80GB", "H100-SXM"
MODEL = "Llama-3.1-8B-Instruct"  # 16 GB of weights: not on a 1g.10gb slice
SEVEN_1G = ["1g.10gb"] * 7
RATE_PER_S = 5.0
SLO = {"ttft_ms": 2000, "tpot_ms": 100, "percentile": 95}
ON_3G = {
    "name": "chat",
    "model": MODEL,
    "gpu": A100,
    "mig_profile": "3g.40gb",
    "max_batch": 64,
    "sites": ["a"],
    "replicas": {"a": 0},
    "slo": SLO,
    "requests": {"rate_per_s": RATE_PER_S},
}
ONE_HOUR = {"dist": "exponential", "mean_h": 1.0}
FEW_JOBS = {"synthetic": {"arrival_rate_per_h": 1e-4, "duration": ONE_HOUR}}


def wrong_layout(tmp_path, count: int = 3):
    """`count` A100-80GB all in seven 1g.10gb slices (one whole H100 besides); the service
    serves the 8B model on 3g.40gb slices only, with no replica at the start."""
    gpus = [{"model": A100, "count": count, "mig": SEVEN_1G}, {"model": H100, "count": 1}]
    return make_scenario(
        tmp_path,
        sites=[site(gpus=gpus)],
        services=[ON_3G],
        serving={"fidelity": "fluid", "step_s": 60.0},
        workload=FEW_JOBS,
        duration_h=1.0,
    )


def slices_needed(h: PolicyHarness) -> int:
    """3g.40gb replicas for the rate with the default headroom (0.25)."""
    capacity = h.state.service("chat").replica_point("a").capacity_rps
    return math.ceil(RATE_PER_S * 1.25 / capacity)


def test_a_wrong_layout_is_repartitioned_and_the_service_meets_its_slo(tmp_path):
    """The 8B model's weights do not fit a 1g.10gb slice, so without repartitioning nothing
    serves; the policy repartitions (valid layouts: the engine refuses others with a
    PolicyError) and the service meets its SLO once the new slices serve."""
    with pytest.raises(ValueError, match="do not fit"):
        replica_model(MODEL, A100, 1, 64, 1000.0, 300.0, mig_profile="1g.10gb")
    r = sim.simulate(wrong_layout(tmp_path), MigPartitioner())
    assert r.summary["mig_repartitions"] > 0
    after = r.services[r.services["start_s"] >= 120.0]
    assert after["slo_met"].sum() / after["arrived"].sum() >= SLO["percentile"] / 100.0


def test_without_prediction_error_it_covers_the_demand_with_the_fewest_gpus_reconfigured(
    tmp_path,
):
    """Brute force over every GPU keeping its layout or taking any maximal layout: the
    fewest GPUs to reconfigure so that the pool holds the 3g.40gb slices needed; the policy
    reconfigures exactly that many and the new layouts hold them."""
    h = PolicyHarness(wrong_layout(tmp_path)).advance(0.0)
    need = slices_needed(h)
    assert need >= 3  # more than one GPU holds (two 3g.40gb at most)
    options = [None, *(p.profiles for p in mig.layouts(A100))]
    fewest = min(
        sum(o is not None for o in combo)
        for combo in product(options, repeat=3)
        if sum(Counter(o or SEVEN_1G)["3g.40gb"] for o in combo) >= need
    )
    actions = MigPartitioner().decide(h.state)
    repartitions = [a for a in actions if isinstance(a, Repartition)]
    assert len(repartitions) == fewest
    h.apply(actions)
    h.advance(mig.reconfiguration_s(A100))
    layouts = [g.layout for g in h.state.mig_layouts("a", A100)]
    assert sum(Counter(layout)["3g.40gb"] for layout in layouts) >= need


def first_layouts(tmp_path, error: float, seed: int) -> list[tuple[str, ...]]:
    h = PolicyHarness(wrong_layout(tmp_path)).advance(0.0)
    policy = MigPartitioner(prediction_error=error, seed=seed)
    return [a.layout for a in policy.decide(h.state) if isinstance(a, Repartition)]


def test_a_prediction_error_is_deterministic_per_seed_and_changes_the_choice(tmp_path):
    exact = first_layouts(tmp_path, 0.0, 0)
    perturbed = {seed: first_layouts(tmp_path, 0.5, seed) for seed in range(6)}
    assert all(first_layouts(tmp_path, 0.5, seed) == got for seed, got in perturbed.items())
    assert any(got != exact for got in perturbed.values())


def mig_job(job_id: str, work_gpu_h: float, submit_s: float) -> dict:
    return {
        "job_id": job_id,
        "submit_time": submit_s,
        "gpus": 1,
        "work_gpu_h": work_gpu_h,
        "mig_profile": "4g.40gb",
        "profile": "mixed",
    }


def busy_pool(tmp_path):
    """Two A100-80GB of 4g.40gb + 3g.40gb; a long 4g job from the start holds GPU 0's 4g, and
    the service (8B on H100s, or on 3g.40gb slices) needs three 3g slices: GPU 1 becomes
    3g + 3g. At 30 min a second 4g job arrives: its profile is on GPU 0's layout (so it
    is not rejected) but held, and GPU 1 serves the service's replicas."""
    service = {
        **ON_3G,
        "gpu": H100,
        "mig_profile": None,
        "variants": [{"name": "mig3g", "model": MODEL, "gpu": A100, "mig_profile": "3g.40gb"}],
    }
    gpus = [{"model": A100, "count": 2, "mig": ["4g.40gb", "3g.40gb"]}, {"model": H100, "count": 2}]
    jobs = [mig_job("long", 2.0, 0.0), mig_job("second", 0.3, 1800.0)]
    return make_scenario(
        tmp_path,
        jobs,
        sites=[site(gpus=gpus)],
        services=[service],
        serving={"fidelity": "fluid", "step_s": 60.0},
        duration_h=1.5,
    )


def test_a_mig_job_gets_its_profile_after_a_drain_with_a_bridge(tmp_path):
    """Without draining (min_gain = inf) the second job never starts: no free 4g.40gb slice;
    the policy bridges the service on an H100, drains the slices, repartitions GPU 1 to
    hold a 4g, and the job starts while the service drops no request."""
    naive = sim.simulate(busy_pool(tmp_path), MigPartitioner(min_gain=math.inf))
    assert math.isnan(naive.jobs.set_index("job_id").loc["second", "start_s"])
    r = sim.simulate(busy_pool(tmp_path), MigPartitioner())
    second = r.jobs.set_index("job_id").loc["second"]
    assert second["state"] == "completed" and second["start_s"] > 1800.0
    assert r.summary["mig_repartitions"] >= 2  # GPU 1 for the service, then for the job
    later = r.services[r.services["start_s"] >= 600.0]
    assert later["dropped"].sum() == pytest.approx(0.0, abs=1e-6)
    assert later["slo_met"].sum() / later["arrived"].sum() >= SLO["percentile"] / 100.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"headroom": -0.1}, "headroom must be in"),
        ({"prediction_error": -1.0}, "prediction_error must be in"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"tick_s": 0.0}, "tick_s must be > 0"),
        ({"min_gain": math.nan}, "min_gain must be >= 0"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params, message):
    with pytest.raises(ValueError, match=message):
        MigPartitioner(**params)
