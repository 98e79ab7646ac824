"""The GPU-sharing model (`sim.models.sharing`) and the shared-GPU ledger
(`sim.engine.ledger.SharedGpus`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.engine.ledger import SharedGpus
from sim.models.sharing import SLOWDOWN_FULL, gpu_power_w, is_fractional, share, speed_factor


def test_a_job_alone_on_its_gpu_runs_at_full_speed_for_its_share():
    assert speed_factor(500, 0) == 1.0
    assert share(500) == 0.5


def test_a_job_whose_gpu_rest_is_taken_is_slowed_by_gandivas_19_percent():
    assert SLOWDOWN_FULL == 0.19
    assert speed_factor(500, 500) == pytest.approx(1 / 1.19)
    assert speed_factor(100, 900) == pytest.approx(1 / 1.19)


def test_the_slowdown_grows_linearly_with_the_share_the_others_hold_of_the_rest():
    # a job of 200 milli next to 400: the others hold half of the 800 it leaves
    assert speed_factor(200, 400) == pytest.approx(1 / (1 + 0.19 * 0.5))


def test_more_jobs_than_fit_on_one_gpu_is_an_error():
    with pytest.raises(ValueError, match="at most 500 fit"):
        speed_factor(500, 600)


def test_only_shares_below_1000_are_fractional():
    assert is_fractional(999)
    assert not is_fractional(1000)


def test_a_shared_gpu_draws_idle_plus_each_jobs_share_of_its_power_above_idle():
    assert gpu_power_w(60.0, []) == 60.0
    assert gpu_power_w(60.0, [(500, 300.0)]) == pytest.approx(60 + 0.5 * 240)
    assert gpu_power_w(60.0, [(500, 300.0), (250, 200.0)]) == pytest.approx(
        60 + 0.5 * 240 + 0.25 * 140
    )
    with pytest.raises(ValueError, match="more than 1000"):
        gpu_power_w(60.0, [(600, 300.0), (500, 300.0)])


@given(st.lists(st.tuples(st.integers(1, 1000), st.floats(60.0, 400.0)), max_size=8))
def test_a_shared_gpu_never_draws_more_than_its_busiest_jobs_power(jobs):
    fitting, held = [], 0
    for milli, active_w in jobs:
        if held + milli <= 1000:
            fitting.append((milli, active_w))
            held += milli
    limit_w = max((w for _, w in fitting), default=60.0)
    assert 60.0 <= gpu_power_w(60.0, fitting) <= limit_w + 1e-9


def test_the_ledger_places_jobs_first_fit_and_frees_a_gpu_when_its_last_job_leaves():
    shared = SharedGpus()
    assert shared.join(1, 600)  # opens GPU 0
    assert shared.join(2, 600)  # does not fit GPU 0: opens GPU 1
    assert not shared.join(3, 400)  # first fit: GPU 0
    assert shared.used_milli() == [1000, 600]
    assert shared.co_located(1) == [3] and shared.others_milli(3) == 600
    assert shared.spare_milli() == 400
    assert not shared.leave(1)
    assert shared.leave(3)  # GPU 0 is empty: free again
    assert shared.used_milli() == [600]
    assert shared.fit(400) == 0 and shared.fit(500) is None
    assert shared.others_milli(2) == 0 and len(shared) == 1


@given(st.lists(st.tuples(st.booleans(), st.integers(1, 999)), max_size=60))
def test_the_ledger_never_puts_more_than_1000_milli_on_a_gpu(steps):
    shared, present, j = SharedGpus(), [], 0
    for leave, milli in steps:
        if leave and present:
            shared.leave(present.pop(milli % len(present)))
        else:
            shared.join(j, milli)
            present.append(j)
            j += 1
        used = shared.used_milli()
        assert all(0 < u <= 1000 for u in used)
        assert sum(used) == sum(shared.milli_of(k) for k in present)
        assert shared.spare_milli() == 1000 * len(used) - sum(used)
