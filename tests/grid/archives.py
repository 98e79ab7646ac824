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
