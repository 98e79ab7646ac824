"""What the policy views read: a query declared once in `sim.api` is offered by `SystemState`
as the engine answers it, and what a query hands out of the site ledger is a read-only
view (setting anything on it fails, and a dict it returns is a copy), never a ledger
object."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sim import api
from sim.api import StateQueries, SystemState
from sim.engine.ledger import Pool, Site
from sim.engine.site_view import PoolView, SiteView
from sim.testing import PolicyHarness
from tests.conftest import make_scenario, site

OFFERED = [name for name in vars(api._Offered) if not name.startswith("_")]


def test_a_query_declared_once_is_offered_by_the_state_and_answered_by_the_engine():
    asked = []
    engine = SimpleNamespace(
        site_names=("a",),
        pending={},
        running={},
        suspended={},
        service_names=(),
        carbon_intensity=lambda site: asked.append(site) or 123.0,
    )
    state = SystemState(engine)  # type: ignore[arg-type]
    assert state.carbon_intensity("a") == 123.0
    assert asked == ["a"]
    assert "carbon_intensity" in OFFERED
    for name in OFFERED:  # one declaration: the state's method and the engine's protocol
        assert getattr(SystemState, name) is getattr(api._Offered, name)
        assert getattr(StateQueries, name) is getattr(api._Offered, name)


def test_the_state_answers_every_offered_query_as_the_engine_does():
    h = PolicyHarness(make_scenario())
    state, queries = h.state, h.engine.queries
    assert state.carbon_intensity("a") == queries.carbon_intensity("a")
    assert state.runtime_version("a") == queries.runtime_version("a")
    assert state.expected_ends("a", "A100-80GB") == queries.expected_ends("a", "A100-80GB")
    assert state.parallel_scaling("a", "A100-80GB", "llm", 2) == queries.parallel_scaling(
        "a", "A100-80GB", "llm", 2
    )


def test_a_site_is_read_through_a_view_that_cannot_change_it():
    h = PolicyHarness(make_scenario())
    view = h.engine.queries.site("a")
    assert isinstance(view, SiteView) and not isinstance(view, Site)
    pool = view.pool("A100-80GB")
    assert isinstance(pool, PoolView) and not isinstance(pool, Pool)
    assert (pool.count, pool.free) == (4, 4)
    with pytest.raises(AttributeError):
        view.cap_w = 300.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.pools = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        pool.free = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.runtime_version = 7  # type: ignore[attr-defined]
    assert h.state.free_gpus("a") == {"A100-80GB": 4}
    assert h.state.site_cap_w("a") is None


def test_what_a_pool_view_hands_out_is_a_copy():
    split = {"model": "A100-80GB", "count": 8, "reserved": 2, "spot": 2}
    scenario = make_scenario(sites=[site(gpus=[split])])
    h = PolicyHarness(scenario)
    kinds = h.state.free_gpus_by_kind("a", "A100-80GB")
    kinds["spot"] = 0
    assert h.state.free_gpus_by_kind("a", "A100-80GB") == kinds | {"spot": 2}
    milli = h.state.shared_gpus("a")["A100-80GB"]
    milli.append(500)
    assert h.state.shared_gpus("a") == {"A100-80GB": []}
