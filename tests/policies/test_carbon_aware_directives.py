"""carbon_aware_directives: the least-penalty level within the carbon budget, never one
below the quality floor; outputs shrink by the level's factor; deterministic; chainable."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from policies.carbon_aware_directives import CarbonAwareDirectives
from policies.chain import Chain
from policies.kit.inference import ServingCarbon
from policies.serve_autoscale import ServeAutoscale
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

H100 = [{"model": "H100-SXM", "count": 8}]
NO_JOBS = {
    "synthetic": {"arrival_rate_per_h": 0.001, "duration": {"dist": "exponential", "mean_h": 1}}
}


def scenario(tmp_path, hours: float = 1.0, carbon: dict | None = None, **changes):
    svc = {
        "name": "chat",
        "model": "Llama-3.1-70B-Instruct",  # MMLU-Pro 66.4; brief 65.4, very_brief 63.4
        "gpu": "H100-SXM",
        "gpus_per_replica": 4,
        "sites": ["a"],
        "replicas": {"a": 2},
        "slo": {"ttft_ms": 2000, "tpot_ms": 150},
        "requests": {"rate_per_s": 3.0},
        "directives": "default",
        **changes,
    }
    return make_scenario(
        tmp_path,
        sites=[site(gpus=H100, carbon=carbon or {"constant_g_per_kwh": 300.0})],
        workload=NO_JOBS,
        services=[svc],
        duration_h=hours,
        serving={"fidelity": "request"},
    )


def carbon_by_level(sc) -> dict[str, float]:
    """Each level's carbon per request at the start, g (constant grid: weight 1)."""
    h = PolicyHarness(sc)
    policy = CarbonAwareDirectives()
    grid = ServingCarbon(h.state, policy.window_s, policy.tightening)
    return {lv.name: lv.carbon_g for lv in policy.figures(h.state.service("chat"), grid)}


def served(result) -> pd.DataFrame:
    return result.requests[result.requests["state"] == "served"]


def test_the_budget_binds_and_the_least_penalty_level_within_it_is_chosen(tmp_path):
    sc = scenario(tmp_path)
    g = carbon_by_level(sc)
    assert g["normal"] > g["brief"] > g["very_brief"]
    budget = (g["normal"] + g["brief"]) / 2  # normal breaks it, brief meets it
    r = sim.simulate(sc, CarbonAwareDirectives(budget_g_per_request=budget))
    assert np.allclose(served(r)["quality"], 65.4)  # brief from the start


def test_outputs_shrink_by_the_directive_factor(tmp_path):
    """Same seed, same requests: under `brief` (factor 0.75) the mean output is 0.75 of
    normal's (each request's tokens rounded, at least 1)."""
    sc = scenario(tmp_path)
    g = carbon_by_level(sc)
    normal = sim.simulate(sc, CarbonAwareDirectives(budget_g_per_request=2 * g["normal"]))
    brief = sim.simulate(sc, CarbonAwareDirectives(budget_g_per_request=g["brief"]))
    ratio = brief.requests["output_tokens"].mean() / normal.requests["output_tokens"].mean()
    assert ratio == pytest.approx(0.75, abs=0.005)
    assert np.allclose(served(normal)["quality"], 66.4)


def test_the_floor_is_never_crossed_even_when_only_a_level_below_it_meets_the_budget(tmp_path):
    """Floor 64: very_brief (63.4) is out. A budget only very_brief meets gives brief, the
    least carbon above the floor; no request is served below the floor."""
    sc = scenario(tmp_path, quality_floor=64.0)
    g = carbon_by_level(sc)
    budget = (g["brief"] + g["very_brief"]) / 2
    r = sim.simulate(sc, CarbonAwareDirectives(budget_g_per_request=budget))
    assert r.summary["served_below_floor_share"] == 0.0
    assert np.allclose(served(r)["quality"], 65.4)


def test_a_grid_above_its_forecast_mean_tightens_the_default_budget(tmp_path):
    """Default budget: normal's carbon at the forecast mean. At 600 g/kWh now against a
    mean of 350 over the rest of the run, normal breaks it and a shorter level is chosen;
    at 100 (under the mean) normal is kept."""
    start = pd.Timestamp("2020-06-01T00:00:00Z")
    frame = pd.DataFrame(
        {
            "timestamp": [start + pd.Timedelta(hours=h) for h in range(48)],
            "carbon_intensity": [600.0] + [100.0] * 47,
        }
    )
    frame.to_csv(tmp_path / "ci.csv", index=False)
    sc = scenario(tmp_path, hours=2.0, carbon={"file": str(tmp_path / "ci.csv")})
    r = served(sim.simulate(sc, CarbonAwareDirectives()))
    dirty = r["arrival_s"] < 3600.0
    assert (r.loc[dirty, "quality"] < 66.4).all()
    assert np.allclose(r.loc[~dirty, "quality"], 66.4)


def test_it_chains_after_serve_autoscale_and_is_deterministic(tmp_path):
    sc = scenario(tmp_path, hours=0.5)
    budget = carbon_by_level(sc)["brief"]

    def run():
        return sim.simulate(
            sc, Chain([ServeAutoscale(), CarbonAwareDirectives(budget_g_per_request=budget)])
        )

    a, b = run(), run()
    assert a.services["replicas"].max() > 0
    assert (served(a)["quality"] < 66.4).all()
    assert {k: v for k, v in a.summary.items() if k != "sim_wall_s"} == {
        k: v for k, v in b.summary.items() if k != "sim_wall_s"
    }
    pd.testing.assert_frame_equal(a.requests, b.requests)


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="budget_g_per_request must be > 0 or None"):
        CarbonAwareDirectives(budget_g_per_request=-1.0)
    with pytest.raises(ValueError, match="window_s must be > 0"):
        CarbonAwareDirectives(window_s=0.0)
