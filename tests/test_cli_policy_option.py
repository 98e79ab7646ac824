"""`dcsim run --policy NAME` with `--set policy.params...`: the parameters reach the named
policy, and nothing the user gave is dropped without a word."""

from __future__ import annotations

import sim
from tests.conftest import SMALL_SCENARIO_TOML as SCENARIO
from tests.conftest import run_cli
from tests.test_cli_user_policies import write


def test_params_set_after_policy_reach_that_policy(tmp_path, capsys):
    scenario = write(tmp_path, "study.toml", SCENARIO)
    args = ["run", str(scenario), "--out", str(tmp_path / "out"), "--policy", "wait_awhile"]
    status, out = run_cli([*args, "--set", "policy.params.margin_s=600"], capsys)
    assert status == 0, out.err
    saved = sim.Results.load(tmp_path / "out").scenario.policy
    assert (saved.name, saved.params) == ("wait_awhile", {"margin_s": 600})


def test_a_param_the_chosen_policy_does_not_take_is_one_line_naming_key_and_policy(
    tmp_path, capsys
):
    scenario = write(tmp_path, "study.toml", SCENARIO)
    args = ["run", str(scenario), "--policy", "wait_awhile", "--set", "policy.params.bakfill=1"]
    status, out = run_cli(args, capsys)
    assert status == 2
    assert out.err.strip().splitlines() == [
        f"error: {scenario}: policy.params.bakfill: wait_awhile has no parameter 'bakfill'; "
        "its parameters: backfill, capacity_aware, carbon_price_per_t, interruptible, margin_s, "
        "objective, replan"
    ]


def test_a_param_a_plain_user_class_does_not_take_is_named_before_it_is_built(tmp_path, capsys):
    policy = write(
        tmp_path,
        "mine.py",
        "class Mine:\n"
        "    def __init__(self, limit_g_per_kwh=200.0):\n"
        "        self.limit_g_per_kwh = limit_g_per_kwh\n"
        "    def decide(self, state):\n"
        "        return []\n",
    )
    scenario = write(tmp_path, "study.toml", SCENARIO)
    name = f"{policy}:Mine"
    args = ["run", str(scenario), "--policy", name, "--set", "policy.params.limit=100"]
    status, out = run_cli(args, capsys)
    assert status == 2
    assert out.err.strip().splitlines() == [
        f"error: {scenario}: policy.params.limit: {name} has no parameter 'limit'; "
        "its parameters: limit_g_per_kwh"
    ]


def test_policy_and_a_set_of_the_policy_name_together_are_refused(tmp_path, capsys):
    scenario = write(tmp_path, "study.toml", SCENARIO)
    args = ["run", str(scenario), "--policy", "wait_awhile", "--set", "policy.name=run_now"]
    status, out = run_cli(args, capsys)
    assert status == 2
    assert out.err.strip().splitlines() == [
        "error: --policy wait_awhile and --set policy.name=run_now both choose the policy; "
        "give one of them"
    ]


def test_policy_naming_the_scenarios_own_policy_says_its_params_are_not_used(tmp_path, capsys):
    text = SCENARIO + '\n[policy]\nname = "wait_awhile"\nparams = { margin_s = 900 }\n'
    scenario = write(tmp_path, "study.toml", text)
    status, out = run_cli(["run", str(scenario), "--policy", "wait_awhile"], capsys)
    assert status == 0, out.err
    assert "note: --policy wait_awhile runs with its default parameters, not the scenario's " in (
        out.err.replace("\n", "")
    )
    assert "policy.params (margin_s)" in out.err.replace("\n", "")
