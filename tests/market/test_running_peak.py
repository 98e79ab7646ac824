"""The demand-charge peak so far (`running_month_peak_kw`): the largest mean over the
month's demand intervals that have ended, as the bill (`interval_peaks_kw`) cuts them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from sim.market.billing import running_month_peak_kw

START = datetime(2020, 6, 30, 23, 0, tzinfo=UTC)  # an hour before July (UTC)


def peak(times_s, power_w, now_s, timezone="UTC", interval_min=15):
    return running_month_peak_kw(
        np.asarray(times_s, float), np.asarray(power_w, float), now_s, START, timezone, interval_min
    )


def test_only_ended_intervals_of_the_present_month_count():
    # 10 kW in June's last hour; July: 2 kW, 6 kW over [3600 + 600, 3600 + 1200), 1 kW after
    times, power = [0.0, 3600.0, 4200.0, 4800.0], [10e3, 2e3, 6e3, 1e3]
    assert peak(times, power, 1800.0) == 10.0  # June: its intervals so far
    assert peak(times, power, 3600.0 + 899.0) is None  # July's first interval has not ended
    assert peak(times, power, 3600.0 + 900.0) == pytest.approx((600 * 2 + 300 * 6) / 900)
    # the second interval [900, 1800) holds 300 s at 6 kW and 600 s at 1 kW
    assert peak(times, power, 3600.0 + 1800.0) == pytest.approx((600 * 2 + 300 * 6) / 900)
    assert peak([], [], 10.0) is None


def test_a_series_that_starts_late_counts_from_its_first_time():
    # the run (times from 0) starts in June; a series kept from 1800 s on, in July at 30 min
    times, power = [1800.0, 3600.0], [4e3, 8e3]
    assert peak(times, power, 3600.0 + 1800.0, interval_min=30) == 8.0
    assert peak(times, power, 3599.0, interval_min=30) is None  # June's [1800, 3600) runs
    assert peak(times, power, 3600.0, interval_min=30) is None  # July has just begun
