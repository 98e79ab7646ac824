"""The invocation generator: seeded, and its statistics those of the Azure Functions 2019
trace as published (Shahrad et al., ATC 2020)."""

import numpy as np
import pytest

from sim.functions import ECOLIFE_GENERATIONS, AzureFunctions2019, generate_invocations

N = 20_000


@pytest.fixture(scope="module")
def functions():
    return generate_invocations(N, 60.0, np.random.default_rng(1))[0]


def test_same_seed_same_invocations():
    a = generate_invocations(200, 3600.0, np.random.default_rng(7))
    b = generate_invocations(200, 3600.0, np.random.default_rng(7))
    for x, y in zip(a, b, strict=True):
        assert x.equals(y)
    c = generate_invocations(200, 3600.0, np.random.default_rng(8))[1]
    assert not a[1].equals(c)


def test_share_invoked_at_most_hourly_and_minutely(functions):
    rate = functions["rate_per_day"]
    assert (rate <= 24).mean() == pytest.approx(0.45, abs=0.01)
    assert (rate <= 1440).mean() == pytest.approx(0.81, abs=0.01)


def test_rates_span_eight_orders_of_magnitude(functions):
    rate = functions["rate_per_day"]
    assert np.log10(rate.max() / rate.min()) >= 8


def test_inter_arrival_cv_classes(functions):
    cv = functions["cv"]
    assert (cv == 0).mean() == pytest.approx(0.16, abs=0.01)
    assert (cv > 1).mean() == pytest.approx(0.40, abs=0.01)


def test_execution_time_is_the_published_lognormal(functions):
    log_s = np.log(functions["exec_s"])
    assert log_s.mean() == pytest.approx(-0.38, abs=0.05)
    assert log_s.std() == pytest.approx(2.36, abs=0.05)


def test_memory_median_is_the_burr_median(functions):
    c, k, lam = 11.652, 0.221, 107.083
    median = lam * (2.0 ** (1 / k) - 1) ** (1 / c)
    assert functions["memory_mb"].median() == pytest.approx(median, rel=0.02)


def test_counted_invocations_follow_the_rates():
    fns, inv = generate_invocations(300, 86400.0, np.random.default_rng(3))
    hot = fns[(fns["rate_per_day"] > 500) & (fns["rate_per_day"] < 20_000)]
    counts = inv.groupby("function_id").size().reindex(hot["function_id"], fill_value=0)
    ratio = counts.to_numpy() / hot["rate_per_day"].to_numpy()
    assert np.median(ratio) == pytest.approx(1.0, abs=0.1)
    assert inv["arrival_s"].is_monotonic_increasing
    assert ((inv["arrival_s"] >= 0) & (inv["arrival_s"] < 86400.0)).all()


def test_a_timer_is_periodic():
    fns, inv = generate_invocations(400, 86400.0, np.random.default_rng(5))
    timer = fns[(fns["cv"] == 0) & (fns["rate_per_day"] > 50)]["function_id"].iloc[0]
    gaps = np.diff(inv[inv["function_id"] == timer]["arrival_s"])
    rate = fns.loc[timer, "rate_per_day"]
    assert gaps == pytest.approx(np.full(len(gaps), 86400.0 / rate))


def test_bad_calibration_is_an_error_naming_the_keys():
    with pytest.raises(ValueError, match="share_at_most_hourly"):
        AzureFunctions2019(share_at_most_hourly=0.9)


def test_ecolife_generations_new_is_faster_and_holds_more_idle_power():
    old, new = ECOLIFE_GENERATIONS["i3"], ECOLIFE_GENERATIONS["m5zn"]
    assert new.exec_s(10.0) < old.exec_s(10.0)
    assert new.keep_alive_power_w(0.125) > old.keep_alive_power_w(0.125)


def test_functions_above_the_rate_cap_are_left_out_before_their_gaps_are_drawn():
    # seed 3's 200 functions invoke 34.6 million times a day, 35 of them above 2,000
    full, _ = generate_invocations(200, 1.0, np.random.default_rng(3))
    capped, invocations = generate_invocations(
        200, 86400.0, np.random.default_rng(3), max_rate_per_day=2000
    )
    assert capped.equals(full)  # every function is still drawn and listed
    above = set(capped["function_id"][capped["rate_per_day"] > 2000])
    assert len(above) == 35
    assert above.isdisjoint(invocations["function_id"])
    assert invocations["function_id"].nunique() > 100
    assert len(invocations) < 200_000


def test_a_rate_cap_not_above_zero_is_refused():
    with pytest.raises(ValueError, match="max_rate_per_day must be > 0, got 0"):
        generate_invocations(5, 60.0, np.random.default_rng(1), max_rate_per_day=0)
