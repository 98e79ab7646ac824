"""A user's policy that fails: one line naming the policy and what failed, then the user's
own traceback lines (never dcsim's), exit 2. A built-in policy's failure stays a bug."""

from __future__ import annotations

import operator
import textwrap

import pytest

import sim
from tests.conftest import SMALL_SCENARIO_TOML, make_scenario, run_cli

SCENARIO = SMALL_SCENARIO_TOML

CASES = {
    "a syntax error": (
        """
        class Mine:
            def decide(self, state)
                return []
        """,
        ["cannot import", "SyntaxError: expected ':'", "line 2", "def decide(self, state)"],
    ),
    "a missing module": (
        """
        import no_such_module_xyz

        class Mine:
            def decide(self, state):
                return []
        """,
        ["importing", "ModuleNotFoundError", "no_such_module_xyz", "line 1, in <module>"],
    ),
    "a name error when imported": (
        """
        LIMIT = undefined_name

        class Mine:
            def decide(self, state):
                return []
        """,
        ["importing", "NameError", "line 1, in <module>", "LIMIT = undefined_name"],
    ),
    "a constructor that raises": (
        """
        class Mine:
            def __init__(self):
                raise RuntimeError("no licence")

            def decide(self, state):
                return []
        """,
        ["its constructor raised RuntimeError: no licence", "line 3, in __init__"],
    ),
    "a decide that raises in a helper": (
        """
        def share(state):
            return 1 / 0

        class Mine:
            def decide(self, state):
                return share(state)
        """,
        [
            "policy Mine: decide(state) raised ZeroDivisionError: division by zero",
            "line 6, in decide",
            "line 2, in share",
            "return 1 / 0",
        ],
    ),
    "a decide that yields and raises": (
        """
        class Mine:
            def decide(self, state):
                for job in state.pending:
                    yield job.no_such_field
        """,
        ["decide(state) raised AttributeError", "no_such_field", "line 4, in decide"],
    ),
    "a decide that returns a number": (
        """
        class Mine:
            def decide(self, state):
                return 42
        """,
        ["decide(state) returned 42 (int), not a list of actions", "line 2, in decide"],
    ),
    "a decide that returns nothing": (
        """
        class Mine:
            def decide(self, state):
                pass
        """,
        ["decide(state) returned None (NoneType), not a list of actions", "line 2, in decide"],
    ),
    "an action of a foreign type": (
        """
        class Mine:
            def decide(self, state):
                return ["start everything"]
        """,
        ["returned 'start everything' (a str), not an action (sim.api: Start", "line 2"],
    ),
    "a hook that raises": (
        """
        class Mine:
            @property
            def tick_s(self):
                return {}["tick"]

            def decide(self, state):
                return []
        """,
        ["reading its hooks raised KeyError: 'tick'", "line 4, in tick_s"],
    ),
    "a query the engine refuses": (
        """
        class Mine:
            def decide(self, state):
                state.forecast("nowhere", 3600.0)
                return []
        """,
        ["policy Mine: decide(state): unknown site 'nowhere'", "line 3, in decide"],
    ),
}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_failing_user_policy_names_itself_and_shows_only_the_users_frames(tmp_path, capsys, case):
    code, expected = CASES[case]
    policy = write(tmp_path, "mine.py", code)
    scenario = write(tmp_path, "study.toml", SCENARIO)
    status, out = run_cli(["run", str(scenario), "--policy", f"{policy}:Mine"], capsys)
    assert status == 2
    err = out.err.replace(str(policy), "mine.py")
    assert err.startswith("error: policy "), err
    for fragment in expected:
        assert fragment in err, err
    assert 'File "mine.py"' in err  # the user's own lines...
    assert "sim/engine" not in err and "simpy" not in err and "Traceback" not in err
    assert len(err.splitlines()) <= 7  # ...at most three frames of them


def test_a_policy_class_missing_from_its_file_is_one_line(tmp_path, capsys):
    policy = write(
        tmp_path, "mine.py", "class Mine:\n    def decide(self, state):\n        return []\n"
    )
    scenario = write(tmp_path, "study.toml", SCENARIO)
    status, out = run_cli(["run", str(scenario), "--policy", f"{policy}:Yours"], capsys)
    assert status == 2
    assert out.err.strip().splitlines() == [
        f"error: {scenario}: policy.name: {str(policy)!r} has no class 'Yours'"
    ]


def test_a_module_that_does_not_exist_is_one_line_naming_it(tmp_path, capsys):
    scenario = write(tmp_path, "study.toml", SCENARIO)
    status, out = run_cli(["run", str(scenario), "--policy", "no_such_pkg.mine:Mine"], capsys)
    assert status == 2
    assert out.err.strip().splitlines() == [
        f"error: {scenario}: policy.name: cannot import 'no_such_pkg.mine': "
        "No module named 'no_such_pkg'"
    ]


def test_a_failing_member_of_a_chain_shows_the_members_frames(tmp_path, capsys):
    policy = write(
        tmp_path,
        "mine.py",
        "class Mine:\n    def decide(self, state):\n        raise LookupError('no site')\n",
    )
    scenario = write(tmp_path, "study.toml", SCENARIO)
    chain = f'policy.params.policies=[{{name="run_now"}}, {{name="{policy}:Mine"}}]'
    status, out = run_cli(["run", str(scenario), "--policy", "chain", "--set", chain], capsys)
    assert status == 2
    assert out.err.startswith("error: policy Chain: decide(state) raised LookupError: no site")
    assert f'File "{policy}", line 3, in decide' in out.err
    assert "policies/chain.py" not in out.err


def test_a_chain_member_returning_something_else_than_actions_is_one_line_naming_it(
    tmp_path, capsys
):
    policy = write(
        tmp_path, "mine.py", "class Mine:\n    def decide(self, state):\n        return 42\n"
    )
    scenario = write(tmp_path, "study.toml", SCENARIO)
    chain = f'policy.params.policies=[{{name="run_now"}}, {{name="{policy}:Mine"}}]'
    status, out = run_cli(["run", str(scenario), "--policy", "chain", "--set", chain], capsys)
    assert status == 2
    assert out.err.strip() == (
        "error: chain member Mine: decide(state) returned 42 (int), not a list of actions"
    )


def test_a_builtin_policy_failing_in_dcsim_code_is_a_bug_with_its_traceback(monkeypatch):
    # run_now's placement replaced by a C function that fails: no frame of the user's.
    monkeypatch.setattr("policies.run_now.first_come_first_served", operator.truediv)
    with pytest.raises(TypeError, match="unsupported operand"):
        sim.simulate(make_scenario())


def test_a_user_policy_that_raises_is_a_policy_error_in_the_python_api_too():
    class Mine:
        def decide(self, state):
            raise ValueError("bad plan")

    with pytest.raises(sim.PolicyError, match="policy .*Mine: decide.state. raised ValueError"):
        sim.simulate(make_scenario(), Mine())


# --- a ValueError from a constructor: a refused parameter value, with where it came from ----

PARSING_HELPER = """
def parse(text):
    return float(text)

"""
VALUE_ERRORS = {
    "a plain class": """
        class Mine:
            def __init__(self, watts="1"):
                self.watts = parse(watts)

            def decide(self, state):
                return []
        """,
    "a dataclass": """
        from dataclasses import dataclass

        @dataclass
        class Mine:
            watts: str = "1"

            def __post_init__(self):
                self.value = parse(self.watts)

            def decide(self, state):
                return []
        """,
}


@pytest.mark.parametrize("kind", VALUE_ERRORS, ids=list(VALUE_ERRORS))
def test_a_user_constructors_value_error_is_a_parameter_error_followed_by_the_users_frames(
    tmp_path, capsys, kind
):
    policy = write(tmp_path, "mine.py", PARSING_HELPER + textwrap.dedent(VALUE_ERRORS[kind]))
    scenario = write(tmp_path, "study.toml", SCENARIO)
    args = ["run", str(scenario), "--policy", f"{policy}:Mine", "--set", "policy.params.watts=abc"]
    status, out = run_cli(args, capsys)
    assert status == 2
    lines = out.err.replace(str(policy), "mine.py").strip().splitlines()
    assert lines[0] == (
        f"error: {scenario}: policy.params: mine.py:Mine: could not convert string to float: 'abc'"
    )
    init = "__init__" if kind == "a plain class" else "__post_init__"
    assert lines[1].endswith(f", in {init}") and lines[1].startswith('  File "mine.py"')
    assert lines[3:] == ['  File "mine.py", line 2, in parse', "    return float(text)"]
    assert "Traceback" not in out.err and "pydantic" not in out.err and "sim/" not in out.err


def test_a_user_policys_deliberate_refusal_shows_the_line_that_refused(tmp_path, capsys):
    source = """
        class Mine:
            def __init__(self, watts=1.0):
                if watts < 0:
                    raise ValueError(f"watts must be >= 0, got {watts}")

            def decide(self, state):
                return []
        """
    policy = write(tmp_path, "mine.py", source)
    scenario = write(tmp_path, "study.toml", SCENARIO)
    args = ["run", str(scenario), "--policy", f"{policy}:Mine", "--set", "policy.params.watts=-1"]
    status, out = run_cli(args, capsys)
    assert status == 2
    assert out.err.replace(str(policy), "mine.py").strip().splitlines() == [
        f"error: {scenario}: policy.params: mine.py:Mine: watts must be >= 0, got -1",
        '  File "mine.py", line 4, in __init__',
        '    raise ValueError(f"watts must be >= 0, got {watts}")',
    ]


@pytest.mark.parametrize(
    ("policy", "value", "message"),
    [
        ("carbon_threshold", "percentile=130", "percentile must be in [0, 100], got 130"),
        ("static_cap", "watts=-5", "watts"),
    ],
)
def test_a_builtin_policys_refused_parameter_value_stays_one_line(
    tmp_path, capsys, policy, value, message
):
    scenario = write(tmp_path, "study.toml", SCENARIO)
    args = ["run", str(scenario), "--policy", policy, "--set", f"policy.params.{value}"]
    status, out = run_cli(args, capsys)
    assert status == 2
    (line,) = out.err.strip().splitlines()
    assert line.startswith(f"error: {scenario}: policy.params") and message in line
