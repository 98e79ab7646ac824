"""carbon_aware_variants: the quality floor holds where a cheap variant would break it, a
dirty grid moves the service to lower-carbon variants, the latency target is kept, and the
search is exact."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

import sim
from policies.carbon_aware_variants import CarbonAwareVariants, Option, best_mix
from policies.serve_autoscale import ServeAutoscale
from tests.conftest import make_scenario, site

BIG = "Llama-3.1-70B-Instruct"  # MMLU-Pro 66.4 (sim/data/serving_quality.toml)
SMALL = "Llama-3.1-8B-Instruct"  # 48.3
H100 = [{"model": "H100-SXM", "count": 8}]
NO_JOBS = {
    "synthetic": {"arrival_rate_per_h": 0.001, "duration": {"dist": "exponential", "mean_h": 1}}
}


def service(own: str, other: str, **changes) -> dict:
    gpus = {BIG: 4, SMALL: 1}
    return {
        "name": "chat",
        "model": own,
        "gpu": "H100-SXM",
        "gpus_per_replica": gpus[own],
        "sites": ["a"],
        "replicas": {"a": 1},
        "slo": {"ttft_ms": 2000, "tpot_ms": 150},
        "requests": {"rate_per_s": 4.0},
        "variants": [{"model": other, "gpus_per_replica": gpus[other]}],
        **changes,
    }


def scenario(tmp_path, svc: dict, carbon: dict | None = None, hours: float = 2.0):
    a = site(gpus=H100, carbon=carbon or {"constant_g_per_kwh": 300.0})
    return make_scenario(
        tmp_path,
        sites=[a],
        workload=NO_JOBS,
        services=[svc],
        duration_h=hours,
        serving={"fidelity": "request"},
    )


def dirty_second_hour(tmp_path) -> dict:
    """100 g/kWh, 600 in the second hour, 100 after (48 h, hourly). The forecast ends with
    the run, so its mean over the rest of a 3-hour run is 267 g/kWh in the first hour and
    under 600 in the second."""
    start = pd.Timestamp("2020-06-01T00:00:00Z")
    values = [100.0, 600.0] + [100.0] * 46
    frame = pd.DataFrame(
        {
            "timestamp": [start + pd.Timedelta(hours=h) for h in range(48)],
            "carbon_intensity": values,
        }
    )
    path = tmp_path / "ci.csv"
    frame.to_csv(path, index=False)
    return {"file": str(path)}


def test_the_floor_holds_where_the_cheap_variant_alone_breaks_it(tmp_path):
    """The service starts on its 8B model (48.3, under the floor of 60). serve_autoscale
    keeps serving every request below the floor; the policy switches to the 70B at once,
    and the only requests below the floor are those that arrive during the 70B's cold
    start (its weights read at the site's 2 GB/s), served by the 8B meanwhile."""
    sc = scenario(tmp_path, service(SMALL, BIG, quality_floor=60.0))
    naive = sim.simulate(sc, ServeAutoscale()).summary
    assert naive["served_below_floor_share"] == 1.0
    r = sim.simulate(sc, CarbonAwareVariants())
    req = r.requests
    served = req[req["state"] == "served"]
    first_big_s = served.loc[served["quality"] >= 60.0, "arrival_s"].min()
    cold_start_s = 70.6 * 2 / 2.0  # 70.6 B parameters x 2 bytes (BF16) at 2 GB/s, s
    assert first_big_s <= cold_start_s + 1.0
    below = served[served["quality"] < 60.0]
    assert below["arrival_s"].max() < first_big_s
    assert r.summary["served_below_floor_share"] == pytest.approx(len(below) / len(served))
    assert r.summary["served_below_floor_share"] < 0.02


def test_a_dirty_grid_moves_it_to_the_lower_carbon_variant_and_cuts_carbon(tmp_path):
    """Clean first hour: the 70B (best quality) fits the budget. In the second the grid is
    well above its forecast mean: the budget tightens, the 8B serves, and carbon per request
    falls below the static 70B's (serve_autoscale on the own model) while the SLO holds;
    the third hour is clean again and the 70B is back."""
    svc = service(BIG, SMALL)
    sc = scenario(tmp_path, svc, dirty_second_hour(tmp_path), hours=3.0)
    static = sim.simulate(sc, ServeAutoscale()).summary
    r = sim.simulate(sc, CarbonAwareVariants())
    req = r.requests[r.requests["state"] == "served"]
    big = req["quality"] > 60.0
    t = req["arrival_s"]
    clean = t < 3600.0
    dirty = (t >= 3600.0 + 300.0) & (t < 7200.0)  # after the switch's cold start
    clean_again = t >= 7200.0 + 300.0
    assert big[clean].mean() == 1.0
    assert (~big[dirty]).mean() == 1.0
    assert big[clean_again].mean() == 1.0
    s = r.summary
    per_request = s["carbon_serving_kg"] / s["requests_served"]
    assert per_request < 0.8 * static["carbon_serving_kg"] / static["requests_served"]
    assert s["slo_attainment"] >= 0.99  # the service's percentile (99)


def test_it_is_deterministic(tmp_path):
    sc = scenario(tmp_path, service(SMALL, BIG, quality_floor=60.0), hours=0.5)
    a, b = (sim.simulate(sc, CarbonAwareVariants()) for _ in range(2))
    assert {k: v for k, v in a.summary.items() if k != "sim_wall_s"} == {
        k: v for k, v in b.summary.items() if k != "sim_wall_s"
    }
    pd.testing.assert_frame_equal(a.requests, b.requests)


def _brute_force(options, need, min_replicas, budget, free):
    """Every count vector up to the need, ranked as best_mix ranks minimal covers."""
    from policies.carbon_aware_variants import _minimal, _mix

    best = None
    ranges = [range(0, int(need / o.capacity_rps) + min_replicas + 2) for o in options]
    for counts in itertools.product(*ranges):
        used: dict = {}
        for n, o in zip(counts, options, strict=True):
            key = (o.site, o.gpu)
            used[key] = used.get(key, 0) + max(0, n - o.have) * o.gpus
        if any(used[k] > free.get(k, 0) for k in used):
            continue
        mix = _mix(options, counts)
        covered = mix.capacity_rps >= need - 1e-9 and sum(counts) >= min_replicas
        if not covered:
            continue
        if not _minimal(options, counts, mix.capacity_rps, sum(counts), need, min_replicas):
            continue
        if best is None or mix.rank(budget) > best.rank(budget):
            best = mix
    return best


@pytest.mark.parametrize("budget", [0.05, 0.2, 1.0])
@pytest.mark.parametrize("need", [3.0, 17.5, 40.0])
def test_the_search_is_exact_against_brute_force(need, budget):
    options = [
        Option("a", "big", "H100", 4, 7.9, 66.4, 0.4, 1),
        Option("a", "mid", "H100", 2, 10.0, 58.0, 0.15, 0),
        Option("b", "big", "H100", 4, 7.9, 66.4, 0.2, 0),
        Option("b", "small", "A100", 1, 13.4, 48.3, 0.05, 2),
    ]
    free = {("a", "H100"): 8, ("b", "H100"): 12, ("b", "A100"): 3}
    got = best_mix(options, need, 1, budget, free)
    want = _brute_force(options, need, 1, budget, free)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.rank(budget) == want.rank(budget)


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="budget_g_per_request must be > 0 or None"):
        CarbonAwareVariants(budget_g_per_request=0.0)
    with pytest.raises(ValueError, match="tightening must be in"):
        CarbonAwareVariants(tightening=-1.0)
