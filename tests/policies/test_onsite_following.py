"""`follow_onsite` starts flexible jobs when forecast on-site surplus covers their power,
counts surplus as carbon-free (so without surplus it is the carbon-aware time shifter),
and chains after a space shifter and before `battery_carbon`."""

from __future__ import annotations

import pytest

from policies import REGISTRY
from policies.onsite_following import OnsiteFollowing
from policies.wait_awhile import WaitAwhile
from sim.config.loading import load_scenario
from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.plugins import build_policy

SITE = """
[[sites]]
name = "{name}"
lat = 50.1
lon = 8.7
pue = 1.2
carbon = {carbon}
gpus = [{{ model = "A100-80GB", count = 8 }}]
{extra}
"""

PV = 'onsite = { pv_kwp = 6, profile = { zone = "DE", year = 2019 } }'

# Three jobs with 40 h of slack submitted in the night (2 h, 2 GPUs each), one without.
JOBS = """job_id,submit_time,gpus,work_gpu_h,deadline,origin_site
j1,0,2,6,144000,{origin}
j2,0,2,6,144000,{origin}
j3,600,2,6,144000,{origin}
j4,3600,2,6,,{origin}
"""


def scenario(tmp_path, sites: list[tuple[str, str, str]], origin: str = "a"):
    """A two-day June run from midnight UTC with `sites` (name, carbon, extra keys)."""
    (tmp_path / "jobs.csv").write_text(JOBS.format(origin=origin))
    text = 'name = "follow"\nseed = 1\nstart = 2019-06-01T00:00:00Z\nduration_h = 48\n'
    for name, carbon, extra in sites:
        text += SITE.format(name=name, carbon=carbon, extra=extra)
    text += '\n[workload]\nfile = "jobs.csv"\n'
    (tmp_path / "s.toml").write_text(text)
    return load_scenario(tmp_path / "s.toml")


FLAT = "{ constant_g_per_kwh = 300 }"
DE = '{ zone = "DE", year = 2019 }'


def chain(*names: str):
    return build_policy("chain", {"policies": [{"name": n} for n in names]})


def flexible(results):
    return results.jobs[results.jobs["job_id"] != "j4"]


@pytest.fixture(scope="module")
def solar(tmp_path_factory):
    sc = scenario(tmp_path_factory.mktemp("solar"), [("a", FLAT, PV)])
    return simulate(sc, REGISTRY["follow_onsite"]()), simulate(sc, REGISTRY["run_now"]())


def test_flexible_jobs_run_in_the_solar_hours_and_use_more_onsite_energy(solar):
    followed, plain = solar
    hours = followed.onsite.set_index("start_s")["generation_kwh"]
    for job in flexible(followed).itertuples():
        # every hour of the run has generation; run_now ran them in the night
        run = hours[(hours.index >= job.start_s - 3599) & (hours.index < job.end_s)]
        assert (run > 0).all(), job.job_id
    assert (flexible(plain)["start_s"] < 3600).all()
    # the job without a deadline runs at once in both
    assert followed.jobs.set_index("job_id").loc["j4", "start_s"] == 3600.0
    assert followed.summary["onsite_used_kwh"] > plain.summary["onsite_used_kwh"] + 5.0
    assert followed.summary["grid_import_kwh"] < plain.summary["grid_import_kwh"] - 5.0
    assert followed.summary["carbon_operational_kg"] < plain.summary["carbon_operational_kg"]


def test_committed_runs_count_as_load_so_later_jobs_move_to_surplus_left(solar):
    followed, _ = solar
    starts = followed.jobs.set_index("job_id")["start_s"]
    # 6 kWp does not carry three 2-GPU jobs at once: the third goes where surplus is left
    assert starts["j1"] == starts["j2"]
    assert starts["j3"] > starts["j1"]


def test_without_onsite_energy_it_starts_jobs_as_wait_awhile(tmp_path):
    sc = scenario(tmp_path, [("a", DE, "")])
    followed = simulate(sc, OnsiteFollowing())
    carbon = simulate(sc, WaitAwhile())
    assert followed.jobs["start_s"].equals(carbon.jobs["start_s"])
    assert (flexible(carbon)["start_s"] > 3600).all()  # the carbon rule did shift them


def test_after_a_space_shifter_it_time_shifts_at_the_site_it_chose(tmp_path):
    # the jobs come from b (dirtier, no PV); forecast_site moves them to a, where they
    # wait for the sun; alone, follow_onsite plans them at b (flat, no PV): at once
    sites = [("a", FLAT, PV), ("b", "{ constant_g_per_kwh = 500 }", "")]
    sc = scenario(tmp_path, sites, origin="b")
    chained = simulate(sc, chain("forecast_site", "follow_onsite"))
    spaced = simulate(sc, chain("forecast_site"))
    alone = simulate(sc, OnsiteFollowing())
    assert (chained.jobs["site"] == "a").all()
    assert (flexible(chained)["start_s"] > 6 * 3600).all()
    assert (flexible(spaced)["start_s"] < 3600).all()
    assert (alone.jobs["site"] == "b").all() and (flexible(alone)["start_s"] < 3600).all()
    assert chained.summary["onsite_used_kwh"] > spaced.summary["onsite_used_kwh"] + 5.0


def test_battery_carbon_after_it_directs_the_battery_and_keeps_its_starts(tmp_path):
    battery = PV + "\nbattery = { capacity_kwh = 10, power_kw = 3 }"
    sc = scenario(tmp_path, [("a", DE, battery)])
    chained = simulate(sc, chain("follow_onsite", "battery_carbon"))
    alone = simulate(sc, OnsiteFollowing())
    assert chained.jobs["start_s"].equals(alone.jobs["start_s"])
    assert (flexible(chained)["start_s"] > 3600).all()
    # battery_carbon charged from the grid in clean hours; self-consumption never does
    assert chained.onsite["grid_to_battery_kwh"].sum() > 1.0
    assert alone.onsite["grid_to_battery_kwh"].sum() < 1e-9


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"margin_s": -1}, "policy.params: follow_onsite: margin_s must be >= 0 s, got -1"),
        ({"surplus": 1}, "policy.params.surplus: follow_onsite has no parameter 'surplus'"),
        ({"objective": "green"}, "policy.params.objective: "),
    ],
)
def test_bad_parameters_are_one_line_errors(params, message):
    with pytest.raises(ScenarioError) as e:
        build_policy("follow_onsite", params)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)
