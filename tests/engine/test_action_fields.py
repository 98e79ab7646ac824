"""Specification: an action whose field holds a value of another type than the one `sim.api`
declares (a list where a site is due, a number where the capacity kinds are, a list where
the shares are) is refused before the engine acts on it, with a one-line PolicyError naming
the policy, the action, the field and the value: every field of every action."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import sim
from sim.api import (
    Defer,
    Migrate,
    PolicyError,
    Reject,
    Repartition,
    Resume,
    Route,
    Scale,
    SetBattery,
    SetCap,
    SetDirective,
    Start,
    Suspend,
)
from sim.engine.action_fields import field_check
from sim.plugins import ACTION_TYPES
from tests.engine.test_services import serving_scenario

VALID = {
    Start: lambda job, svc: Start(job, "a", 300.0, "H100-SXM", 64, 1, ("reserved",)),
    Defer: lambda job, svc: Defer(job, 3600.0),
    Suspend: lambda job, svc: Suspend(job),
    Resume: lambda job, svc: Resume(job, "a", 300.0, "H100-SXM"),
    Migrate: lambda job, svc: Migrate(job, "a", "H100-SXM"),
    SetCap: lambda job, svc: SetCap("a", 300.0),
    Scale: lambda job, svc: Scale(svc, "a", 1, "small"),
    SetDirective: lambda job, svc: SetDirective(svc, "brief"),
    Route: lambda job, svc: Route(svc, {"a": 1.0}),
    Reject: lambda job, svc: Reject(job, "too big"),
    Repartition: lambda job, svc: Repartition("a", "A100-80GB", ("1g.10gb",), 1),
    SetBattery: lambda job, svc: SetBattery("a", 10.0, None),
}
"""An action of each type with every field of its declared type (what the engine then makes
of it does not matter here: the types are checked first)."""

CASES = [
    (kind, f.name, wrong)
    for kind in VALID
    for f in dataclasses.fields(kind)
    for wrong in ("list", "object")
]


def test_every_action_type_of_the_policy_contract_is_covered():
    assert set(VALID) == set(ACTION_TYPES)


@dataclasses.dataclass
class Returns:
    """A policy whose first decision returns one action, `make(job, service)` with `field`
    replaced by a value of a wrong type: its valid value in a list, or a bare object."""

    make: object
    field: str
    wrong: str

    def decide(self, state):
        valid = self.make(state.pending[0], state.service("chat"))
        value = getattr(valid, self.field)
        bad = [value] if self.wrong == "list" else object()
        return [dataclasses.replace(valid, **{self.field: bad})]


@pytest.mark.parametrize(("kind", "field", "wrong"), CASES, ids=lambda c: getattr(c, "__name__", c))
def test_a_field_of_a_wrong_type_is_a_one_line_policy_error_naming_the_action(
    tmp_path, kind, field, wrong
):
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 1, "work_gpu_h": 1}]
    scenario = serving_scenario(tmp_path, jobs=jobs)
    with pytest.raises(PolicyError) as e:
        sim.simulate(scenario, Returns(VALID[kind], field, wrong))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"policy Returns: {kind.__name__}(")
    assert f"): {field} must be " in message


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda job, svc: Start(job, ["a"]), "site must be str, got ['a'] (list)"),
        (lambda job, svc: Start(job, "a", capacity=4), "capacity must be a tuple of str or None"),
        (lambda job, svc: Route(svc, [0.3, 0.7]), "shares must be a dict of str to float or None"),
    ],
)
def test_the_issues_examples_name_the_declared_types(tmp_path, make, message):
    jobs = [{"job_id": "j", "submit_time": 0, "gpus": 1, "work_gpu_h": 1}]

    class Once:
        def decide(self, state):
            return [make(state.pending[0], state.service("chat"))] if state.pending else []

    with pytest.raises(PolicyError, match=re.escape(message)):
        sim.simulate(serving_scenario(tmp_path, jobs=jobs), Once())


def test_numpy_numbers_and_lists_of_names_are_of_the_declared_types():
    battery = field_check(SetBattery)
    assert battery.wrong(SetBattery("a", np.float32(1.5), None)) is None
    assert battery.wrong(SetBattery("a", np.int64(2), None)) is None
    assert field_check(Repartition).wrong(Repartition("a", "A100-80GB", ["1g.10gb"])) is None  # type: ignore[arg-type]
    assert field_check(Repartition).wrong(Repartition("a", "A100-80GB", [1])) == (  # type: ignore[list-item]
        "layout",
        "a tuple of str",
        [1],
    )
