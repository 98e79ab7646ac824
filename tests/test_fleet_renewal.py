"""The fleet-renewal what-if (docs/servers.md, "Extend or replace"): the scenario runs as
given (extend) and with one pool replaced by new hardware bought in the start year
(replace); each horizon year repeats the run's period; embodied carbon is counted
amortised (within lifetimes) and upfront (the new hardware's whole embodied carbon in the
year it is bought); the break-even year is the first in which replacing has emitted no
more in total than extending."""

from __future__ import annotations

import json

import pytest

from sim.engine.build import simulate
from sim.errors import ScenarioError
from sim.study.fleet_renewal import break_even_year, fleet_renewal, replaced_scenario
from tests.conftest import make_scenario, run_cli, site

H100_KG = 230.052 + 312.5
"""One H100-SXM's embodied carbon with its host share (gpus.toml), kgCO2e."""
YEAR_H = 365.25 * 24.0


def small(tmp_path, old_pool):
    jobs = [{"job_id": "a", "submit_time": 0, "gpus": 4, "work_gpu_h": 90.0}]
    sites = [site(gpus=[old_pool], pue=1.0, host_w_per_gpu=0.0)]
    return make_scenario(
        tmp_path, jobs, start="2022-01-01T00:00:00Z", sites=sites, embodied="installed"
    )


OLD = {"model": "A100-80GB", "count": 4, "purchase_year": 2016, "lifetime_years": 5}
"""Bought 2016 for 5 years: fully amortised in 2022, charges no embodied carbon."""


def test_the_replaced_pool_is_the_new_model_bought_in_the_start_year(tmp_path):
    scenario = small(tmp_path, OLD)
    replaced = replaced_scenario(scenario, None, 0, "DGX-H100", None).sites[0]
    new = replaced.gpus[0]
    assert (new.model, new.count, new.purchase_year) == ("H100-SXM", 8, 2022)
    # a site of servers only: the servers' catalog host power replaces host_w_per_gpu
    assert "host_w_per_gpu" not in replaced.model_fields_set
    assert new.servers is not None and new.servers.count == 1  # 4 GPUs: one whole server
    gpus = replaced_scenario(scenario, "a", 0, "H100-SXM", None).sites[0].gpus[0]
    assert (gpus.model, gpus.count, gpus.servers) == ("H100-SXM", 4, None)


def test_the_what_if_gives_hand_checkable_totals_and_break_even(tmp_path):
    scenario = small(tmp_path, OLD)
    rows, summary = fleet_renewal(scenario, "H100-SXM", horizon_years=8)
    scale = YEAR_H / 24.0  # the 24 h run repeated over each Julian year
    assert summary["scale_per_year"] == pytest.approx(scale)
    runs = {
        "extend": simulate(scenario).summary,
        "replace": simulate(replaced_scenario(scenario, None, 0, "H100-SXM", None)).summary,
    }
    # the new GPUs: 4 x 542.552 kg over 6 years of 8760 h, charged every horizon year
    per_year_kg = 4 * H100_KG / (6 * 8760) * YEAR_H
    assert per_year_kg == pytest.approx(361.95, abs=0.01)
    replace_rows = [r for r in rows if r.option == "replace"]
    assert replace_rows[0].embodied_amortised_kg == pytest.approx(per_year_kg)
    # bought 1 January 2022, the run's start: all of it within the 8 years, once; none
    # after its 6 years (of 8760 h: the catalog's rate)
    assert summary["replace"]["embodied_amortised_kg"] == pytest.approx(4 * H100_KG)
    assert [r.embodied_amortised_kg for r in replace_rows[6:]] == [0.0, 0.0]
    assert summary["replace"]["embodied_upfront_kg"] == pytest.approx(4 * H100_KG)  # 2170 kg
    assert summary["extend"]["embodied_amortised_kg"] == 0.0  # fully amortised old pool
    assert summary["extend"]["embodied_upfront_kg"] == 0.0  # already owned: sunk
    for option, run in runs.items():
        totals = summary[option]
        assert totals["energy_kwh"] == pytest.approx(8 * scale * run["energy_facility_kwh"])
        assert totals["operational_kg"] == pytest.approx(8 * scale * run["carbon_operational_kg"])
        # 300 g/kWh, PUE 1: the operational carbon is 0.3 kg per kWh
        assert totals["operational_kg"] == pytest.approx(0.3 * totals["energy_kwh"])
        assert totals["total_upfront_kg"] == pytest.approx(
            totals["operational_kg"] + totals["embodied_upfront_kg"]
        )
    saved_per_year = scale * (
        runs["extend"]["carbon_operational_kg"] - runs["replace"]["carbon_operational_kg"]
    )
    # the H100s finish the same work (22.5 h on the A100s) on less energy: about 409 kg a
    # year, more than their 362 kg a year amortised, so replacing pays in the first year
    assert saved_per_year == pytest.approx(409.0, abs=1.0)
    assert summary["break_even_year_amortised"] == 2022
    # upfront: the first year y (0-based) with (y + 1) x 409 >= 2170 kg: y = 5
    assert summary["break_even_year_upfront"] == 2027
    assert [r.year for r in rows if r.option == "replace"] == list(range(2022, 2030))


def test_break_even_is_the_first_year_replacing_has_emitted_no_more():
    extend = [100.0, 200.0, 300.0]
    assert break_even_year(extend, [250.0, 290.0, 330.0], 2023) is None
    assert break_even_year(extend, [160.0, 200.0, 240.0], 2023) == 2024  # equal counts
    assert break_even_year(extend, [90.0, 180.0, 270.0], 2023) == 2023


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"replace_with": "H200X"}, ["--replace-with 'H200X'", "DGX-H100", "H100-SXM"]),
        ({"replace_with": "H100-SXM", "pool": 1}, ["--pool 1", "'a'", "0..0"]),
        ({"replace_with": "H100-SXM", "site": "b"}, ["--site 'b'", "['a']"]),
        ({"replace_with": "H100-SXM", "count": 0}, ["--count 0"]),
        ({"replace_with": "H100-SXM", "horizon_years": 0}, ["--horizon-years 0"]),
    ],
)
def test_bad_input_is_one_line_naming_option_and_value(tmp_path, args, words):
    with pytest.raises(ScenarioError) as e:
        fleet_renewal(small(tmp_path, OLD), **args)
    assert "\n" not in str(e.value)
    for word in words:
        assert word in str(e.value)


def test_the_command_prints_the_table_and_writes_csv_and_json(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(small(tmp_path, OLD).to_toml())
    out = tmp_path / "out"
    args = ["fleet-renewal", str(path), "--replace-with", "H100-SXM", "--horizon-years", "3"]
    code, captured = run_cli([*args, "--out", str(out)], capsys)
    assert code == 0, captured.err
    assert "break-even year" in captured.out and "extend" in captured.out
    summary = json.loads((out / "fleet_renewal.json").read_text())
    assert summary["horizon_years"] == 3 and summary["new"]["model"] == "H100-SXM"
    lines = (out / "fleet_renewal.csv").read_text().splitlines()
    assert lines[0].startswith("option,year,energy_kwh,operational_kg,embodied_amortised_kg")
    assert len(lines) == 1 + 2 * 3


def test_the_command_refuses_an_unknown_model_with_status_2(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(small(tmp_path, OLD).to_toml())
    code, captured = run_cli(["fleet-renewal", str(path), "--replace-with", "H200X"], capsys)
    assert code == 2
    assert captured.err.count("\n") == 1 and "--replace-with 'H200X'" in captured.err
