"""Figures, one function per kind, publication quality: labelled axes with units, a
colour-blind-safe palette (Okabe-Ito), one style."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
STYLE = {
    "figure.dpi": 150,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 9,
    "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO),
}


def zone_profile(series: pd.Series, title: str, timezone: str, path: str | Path) -> Path:
    """Daily profile (mean and 5-95% band by local hour), weekly profile (mean by local
    weekday) and the distribution of an hourly carbon-intensity series (g/kWh, UTC index)."""
    local = series.tz_convert(timezone)
    by_hour = local.groupby(local.index.hour)
    by_day = local.groupby(local.index.day_of_week).mean()
    with plt.rc_context(STYLE):
        fig, (ax_d, ax_w, ax_h) = plt.subplots(1, 3, figsize=(10, 3), constrained_layout=True)
        ax_d.fill_between(
            by_hour.mean().index,
            by_hour.quantile(0.05),
            by_hour.quantile(0.95),
            alpha=0.25,
            label="5-95%",
        )
        ax_d.plot(by_hour.mean(), label="mean")
        ax_d.set(
            xlabel=f"hour of day ({timezone})",
            ylabel="carbon intensity (gCO2e/kWh)",
            title="daily profile",
            xticks=range(0, 24, 6),
        )
        ax_d.legend(frameon=False)
        ax_w.bar(range(7), by_day.to_numpy())
        ax_w.set(
            xlabel="day of week",
            ylabel="mean carbon intensity (gCO2e/kWh)",
            title="weekly profile",
            xticks=range(7),
            xticklabels=["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
        )
        ax_h.hist(series.to_numpy(), bins=50)
        ax_h.set(xlabel="carbon intensity (gCO2e/kWh)", ylabel="hours", title="distribution")
        fig.suptitle(title)
        path = Path(path)
        fig.savefig(path)
        plt.close(fig)
    return path
