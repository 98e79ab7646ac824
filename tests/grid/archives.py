"""The real issued-forecast archives of `../shared/data`, read once for the forecast tests."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import SHARED_DATA

WATTTIME = SHARED_DATA / "watttime-caiso-north"


def watttime_archive() -> tuple[pd.Series, pd.DataFrame]:
    """WattTime's CAISO North MOER (lbs/MWh; times UTC without an offset): the actual
    series and the issued forecasts (columns `issue`, `target`, `value`). Skips the test
    when the shared data is absent."""
    if not WATTTIME.is_dir():
        pytest.skip(f"real forecasts not found at {WATTTIME} (checkout without ../shared/data)")
    actual = pd.read_csv(WATTTIME / "watttime2023_caiso-north_actual.csv", parse_dates=["time"])
    forecasts = pd.read_csv(
        WATTTIME / "watttime2023_caiso-north_forecast.csv",
        parse_dates=["request_time", "forecast_time"],
    )
    forecasts.columns = ["issue", "target", "value"]
    return actual.set_index("time").iloc[:, 0], forecasts


def issued_archive(path) -> None:
    """An archive at `path` issued every 2 h from 2020-06-01T00:30Z for 30 h, each issue of
    hourly targets on the hour, 30 h ahead: the even issues forecast a dear grid, 900 g/kWh
    and rising (start now), the odd ones a clean one, 20 g/kWh and rising (wait). Issued
    between breakpoints, an issue changes what follows the current step only."""
    start = pd.Timestamp("2020-06-01T00:00Z")
    rows = []
    for issue in range(15):
        issued = (start + pd.Timedelta(hours=2 * issue + 0.5)).strftime("%Y-%m-%dT%H:%MZ")
        base = 20.0 if issue % 2 else 900.0
        for lead_h in range(1, 31):
            target = start + pd.Timedelta(hours=2 * issue + lead_h)
            rows.append(f"{issued},{target.strftime('%Y-%m-%dT%H:%MZ')},{base + lead_h:.1f}")
    path.write_text("issued_at,target_start,value\n" + "\n".join(rows) + "\n")
