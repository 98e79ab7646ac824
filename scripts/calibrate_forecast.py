"""Fit the `calibrated` forecast-error model on real issued forecasts.

Reads two archives of issued forecasts with their actuals from the project's shared data
folder (never shipped):

- GB national average carbon intensity, 48-h forecasts issued every half hour by National
  Grid ESO's Carbon Intensity API, 2023-03-14..31, g/kWh (../shared/data/uk-ci-forecasts/);
- WattTime MOER for CAISO North, 5-65 min forecasts issued every 5 min, 2023-06-08..07-08,
  lbs CO2/MWh (../shared/data/watttime-caiso-north/).

It characterises the relative forecast error e = (forecast - actual) / mean(actual) by lead
time, fits one saturating sigma(h) law of `sim.grid.forecast.Calibration` on both archives
(each archive weighted equally), fits the error correlation (w, tau) on each archive and
ships the GB one, checks the model by running the simulator's own `Forecaster` on each real
actual series, and writes

- `sim/data/forecast_calibration.toml`: the parameters, the data sources, the fit date and
  the fitted-vs-data tables by lead time (the simulator reads this file, nothing else);
- `docs/figures/forecast_error_vs_horizon.png`: error vs horizon, model against data.

Usage: python scripts/calibrate_forecast.py [--data DIR] [--out TOML] [--figure PNG]
Needs the dev extras (scipy) and matplotlib.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

from sim.config.runtime import ForecastConfig  # noqa: E402
from sim.grid.forecast import Calibration, Forecaster  # noqa: E402
from sim.grid.signal import CarbonSignal  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "sim" / "data" / "forecast_calibration.toml"
FIGURE = REPO / "docs" / "figures" / "forecast_error_vs_horizon.png"
CHECK_SEEDS = 8
CHECK_LEADS_H = {"uk": [1.0, 6.0, 24.0, 47.5], "watttime": [1.0, 65 / 60]}
"""Leads at which the model must be within 20 % of the data (the issue's 1, 6, 24 and 48 h;
the GB forecasts' longest lead is 47.5 h, WattTime's 65 min)."""


@dataclass(frozen=True)
class Archive:
    """One archive of issued forecasts: where it is, its files and how to read them."""

    key: str
    folder: str
    step_min: int
    source: str
    label: str

    def load(self, data: Path) -> tuple[pd.Series, pd.DataFrame]:
        """The actual series and one row per (issue, lead) with the relative error e; only
        targets with an actual and leads > 0 (the current step is the truth in dcsim)."""
        d = data / self.folder
        if self.key == "uk":
            actual = pd.read_csv(d / "actuals.csv.gz", parse_dates=["target_start"])
            actual = actual.set_index("target_start").iloc[:, 0]
            fc = pd.read_csv(d / "forecasts.csv.gz", parse_dates=["issued_at", "target_start"])
        else:
            actual = pd.read_csv(d / WT_ACTUAL, parse_dates=["time"]).set_index("time").iloc[:, 0]
            fc = pd.read_csv(d / WT_FORECAST, parse_dates=["request_time", "forecast_time"])
        fc.columns = ["issue", "target", "value"]
        lead = (fc["target"] - fc["issue"]).dt.total_seconds() / 60.0
        fc["lead_steps"] = np.rint(lead / self.step_min).astype(int)
        if self.key == "watttime":
            # Only the leads every issued forecast has (5..65 min; 3 of ~8900 forecasts,
            # issued before a gap in the issue times, reach further).
            fc = fc[fc["lead_steps"] <= fc.groupby("issue")["lead_steps"].max().min()]
        fc = fc[fc["lead_steps"] > 0].copy()
        fc["actual"] = actual.reindex(fc["target"]).to_numpy()
        fc = fc.dropna(subset=["actual"])
        fc["e"] = (fc["value"] - fc["actual"]) / actual.mean()
        return actual, fc


WT_ACTUAL = "watttime2023_caiso-north_actual.csv"
WT_FORECAST = "watttime2023_caiso-north_forecast.csv"
ARCHIVES = (
    Archive(
        "uk",
        "uk-ci-forecasts",
        30,
        "National Grid ESO Carbon Intensity API, GB national average intensity, 48-h "
        "forecasts issued every 30 min, 2023-03-14..31, with actuals, g/kWh, as scraped by "
        "nmpowell/carbon-intensity-forecast-tracking @ 01dee10f (CC BY 4.0); "
        "../shared/data/uk-ci-forecasts/ (README there)",
        "GB average, National Grid ESO, Mar 2023",
    ),
    Archive(
        "watttime",
        "watttime-caiso-north",
        5,
        "WattTime marginal operating emissions rate (MOER), CAISO North, 5-min actuals and "
        "forecasts issued every 5 min, 2023-06-08..2023-07-08, lbs CO2/MWh; files "
        f"{WT_ACTUAL} and {WT_FORECAST} from dos-group/vessim @ b168852~1, datasets/ "
        "(copied verbatim into ../shared/data/watttime-caiso-north/)",
        "CAISO North MOER, WattTime, Jun-Jul 2023",
    ),
)


def gauss_equiv(rank_corr: np.ndarray) -> np.ndarray:
    """Pearson correlation of a bivariate normal with this Spearman rank correlation."""
    return 2.0 * np.sin(np.pi * np.asarray(rank_corr) / 6.0)


def rank_corr_model(rho: np.ndarray) -> np.ndarray:
    """Spearman rank correlation of a bivariate normal with Pearson correlation `rho`."""
    return 6.0 / np.pi * np.arcsin(np.asarray(rho) / 2.0)


def correlations(fc: pd.DataFrame, step_min: int) -> dict[str, np.ndarray]:
    """Rank correlations of errors: within one forecast by lead separation, and of the same
    target across issue times (each averaged over all lead pairs with that separation;
    pairwise complete, at least 200 pairs)."""
    by_issue = fc.pivot(index="issue", columns="lead_steps", values="e")
    by_target = fc.pivot(index="target", columns="lead_steps", values="e")
    s_issue = by_issue.corr(method="spearman", min_periods=200).to_numpy()
    s_target = by_target.corr(method="spearman", min_periods=200).to_numpy()
    sep = np.arange(1, len(by_issue.columns))
    within = np.array([np.nanmean(np.diagonal(s_issue, k)) for k in sep])
    across = np.array([np.nanmean(np.diagonal(s_target, k)) for k in sep])
    ok = np.isfinite(within) & np.isfinite(across)
    return {
        "sep_h": sep[ok] * step_min / 60.0,
        "within": within[ok],
        "across": across[ok],
        "adjacent": np.diagonal(s_issue, 1),
    }


def sigma_law(p: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The shipped law: sigma(h) = p0 (1 - exp(-(h / p1) ** p2)) (see `Calibration`)."""
    return Calibration(p[0], p[1], p[2], 0.5, 1.0).sigma(h)


def fit_sigma(by_archive: dict[str, pd.DataFrame]) -> np.ndarray:
    """Least-squares fit of MAE(h) = sqrt(2/pi) sigma(h) on every lead of every archive:
    relative residuals, each archive's weights summing to the same total."""
    k = math.sqrt(2.0 / math.pi)
    h = np.concatenate([s["lead_h"].to_numpy() for s in by_archive.values()])
    mae = np.concatenate([s["mae"].to_numpy() for s in by_archive.values()])
    weight = np.concatenate([np.full(len(s), len(s) ** -0.5) for s in by_archive.values()])
    return least_squares(
        lambda p: weight * (k * sigma_law(p, h) - mae) / mae,
        x0=[0.3, 3.0, 0.5],
        bounds=([1e-3, 1e-3, 0.01], [5.0, 1000.0, 3.0]),
    ).x


def fit_correlation(corr: dict[str, np.ndarray]) -> tuple[float, float]:
    """(w, tau_h) fitted on the rank correlations, each converted to the correlation of a
    normal pair: within one forecast w exp(-dT / tau), across issue times w."""
    sep_h, within, across = corr["sep_h"], gauss_equiv(corr["within"]), gauss_equiv(corr["across"])

    def resid(p: np.ndarray) -> np.ndarray:
        w, tau = p
        return np.concatenate([w * np.exp(-sep_h / tau) - within, w - across])

    w, tau = least_squares(resid, x0=[0.8, 1.0], bounds=([0, 1e-3], [1, 1000])).x
    return float(w), float(tau)


def lead_stats(fc: pd.DataFrame, step_min: int) -> pd.DataFrame:
    g = fc.groupby("lead_steps")["e"]
    stats = pd.DataFrame(
        {
            "bias": g.mean(),
            "mae": g.apply(lambda x: x.abs().mean()),
            "std": g.std(),
            "p95_abs": g.apply(lambda x: x.abs().quantile(0.95)),
            "n": g.size(),
        }
    )
    stats["lead_h"] = stats.index.to_numpy() * step_min / 60.0
    return stats


def model_mae(actual: pd.Series, cal: Calibration, step_min: int, n_leads: int) -> np.ndarray:
    """Relative MAE by lead step of the simulator's Forecaster run on the real actual series
    (issuing a forecast at every actual, like the archive), mean of `CHECK_SEEDS` seeds. Only
    targets that have an actual count; a gap in the actuals is held by the last value."""
    t = (actual.index - actual.index[0]).total_seconds().to_numpy(dtype=float)
    v = actual.to_numpy(dtype=float)
    sig = CarbonSignal(t, v, end_s=t[-1] + step_min * 60)
    mean = float(actual.mean())
    step_s = step_min * 60.0
    horizon = n_leads * step_s + 1.0
    pos = {x: i for i, x in enumerate(t)}
    out = np.zeros(n_leads)
    for seed in range(CHECK_SEEDS):
        f = Forecaster(ForecastConfig(model="calibrated"), np.random.default_rng(seed), cal)
        err_sum, count = np.zeros(n_leads), np.zeros(n_leads)
        for k in range(len(t)):
            times, fv = f.forecast(sig, t[k], horizon)
            for lead in range(1, n_leads + 1):
                j = pos.get(t[k] + lead * step_s)
                if j is not None:
                    i = np.searchsorted(times, t[j], side="right") - 1
                    err_sum[lead - 1] += abs(fv[i] - v[j])
                    count[lead - 1] += 1
        out += err_sum / count / mean
    return out / CHECK_SEEDS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--figure", type=Path, default=FIGURE)
    args = ap.parse_args()

    loaded = {a.key: a.load(args.data) for a in ARCHIVES}
    stats = {a.key: lead_stats(loaded[a.key][1], a.step_min) for a in ARCHIVES}
    corr = {a.key: correlations(loaded[a.key][1], a.step_min) for a in ARCHIVES}
    s_inf, lead_sat, expo = fit_sigma(stats)
    fits = {a.key: fit_correlation(corr[a.key]) for a in ARCHIVES}
    w, tau = fits["uk"]  # the day-ahead archive; see docs/forecasts.md
    cal = Calibration(
        sigma_inf=float(s_inf),
        lead_sat_h=float(lead_sat),
        sigma_exponent=float(expo),
        target_share=w,
        target_tau_h=tau,
        max_lead_h=float(stats["uk"]["lead_h"].max()),
    )
    print(f"fitted: {cal}")
    print(f"correlation fits (w, tau_h): {fits}")
    checks = {}
    benchmarks = {}
    for a in ARCHIVES:
        actual, _ = loaded[a.key]
        st = stats[a.key]
        st["mae_model"] = model_mae(actual, cal, a.step_min, int(st.index.max()))[
            st.index.to_numpy() - 1
        ]
        st["mae_formula"] = cal.mae(st["lead_h"].to_numpy())
        benchmarks[a.key] = persistence_mae(actual)
        checks[a.key] = st.set_index("lead_h").loc[CHECK_LEADS_H[a.key], ["mae", "mae_model"]]
        print(f"{a.key}: benchmarks {benchmarks[a.key]}")
        print(
            "  lead_h  mae_data  mae_model  rel.diff\n"
            + "\n".join(
                f"  {h:6.3f} {r['mae']:9.4f} {r['mae_model']:10.4f} "
                f"{r['mae_model'] / r['mae'] - 1:+8.1%}"
                for h, r in checks[a.key].iterrows()
            )
        )
    text = calibration_toml(cal, stats, corr, fits, benchmarks, loaded)
    args.out.write_text(text, encoding="utf-8")
    tomllib.loads(text)  # written by hand: make sure it parses
    print(f"wrote {args.out}")
    figure(args.figure, stats, corr, cal, benchmarks)
    print(f"wrote {args.figure}")


def persistence_mae(actual: pd.Series) -> dict[str, float]:
    """Relative MAE of "same time yesterday" and of the mean (climatology) on the actuals."""
    mean = float(actual.mean())
    yesterday = actual.reindex(actual.index - pd.Timedelta(hours=24)).to_numpy()
    ok = np.isfinite(yesterday)
    return {
        "persistence_24h_mae": float(np.abs(actual.to_numpy()[ok] - yesterday[ok]).mean() / mean),
        "climatology_mae": float(np.abs(actual - mean).mean() / mean),
    }


def calibration_toml(
    cal: Calibration,
    stats: dict[str, pd.DataFrame],
    corr: dict[str, dict[str, np.ndarray]],
    fits: dict[str, tuple[float, float]],
    benchmarks: dict[str, dict[str, float]],
    loaded: dict[str, tuple[pd.Series, pd.DataFrame]],
) -> str:
    """The shipped calibration file: parameters first, then the evidence, one row a line."""

    def row(**kv: object) -> str:
        return "  { " + ", ".join(f"{k} = {_toml(v)}" for k, v in kv.items()) + " },"

    out = [
        "# Calibrated forecast-error model of dcsim (sim.grid.forecast.Calibration).",
        "# Written by scripts/calibrate_forecast.py; do not edit by hand. Errors are relative:",
        "# e = (forecast - actual) / mean actual; MAE = mean |e|. See docs/forecasts.md.",
        "",
        "[model]",
        "# sigma(h) = sigma_inf * (1 - exp(-(h / lead_sat_h) ** sigma_exponent)), fitted on both",
        "# archives; e = sigma(h) * (sqrt(w) A(T) + sqrt(1 - w) B), A an OU process over target",
        "# time (tau), B i.i.d.; w = target_share and tau fitted on the GB day-ahead archive.",
        f"sigma_inf = {cal.sigma_inf:.6f}",
        f"lead_sat_h = {cal.lead_sat_h:.6f}",
        f"sigma_exponent = {cal.sigma_exponent:.6f}",
        f"target_share = {cal.target_share:.6f}",
        f"target_tau_h = {cal.target_tau_h:.6f}",
        f"max_lead_h = {cal.max_lead_h:.6f}  # longest lead in the data; beyond: extrapolated",
        "",
        "[source]",
        f"fit_date = {_toml(dt.date.today().isoformat())}",
        f"script = {_toml('scripts/calibrate_forecast.py')}",
    ]
    for a in ARCHIVES:
        actual, fc = loaded[a.key]
        out += [
            "",
            f"[source.{a.key}]",
            f"data = {_toml(a.source)}",
            f"issued_forecasts = {fc['issue'].nunique()}",
            f"pairs_with_actual = {len(fc)}",
            f"mean_actual = {float(actual.mean()):.3f}",
            f"target_share_fit = {fits[a.key][0]:.6f}",
            f"target_tau_h_fit = {fits[a.key][1]:.6f}",
            *(f"{k} = {v:.5f}" for k, v in benchmarks[a.key].items()),
        ]
    for a in ARCHIVES:
        st = stats[a.key]
        out += [
            "",
            f"[fit.{a.key}]",
            "# By lead: the real forecasts (data) against the model: `mae_model` runs the",
            f"# simulator's Forecaster on the real actual series ({CHECK_SEEDS} seeds), ",
            "# `mae_formula` is sigma(h) sqrt(2/pi).",
            "by_lead = [",
        ]
        for lead_steps, r in st.iterrows():
            out.append(
                row(
                    lead_min=int(lead_steps) * a.step_min,
                    mae_data=round(float(r["mae"]), 5),
                    mae_model=round(float(r["mae_model"]), 5),
                    mae_formula=round(float(r["mae_formula"]), 5),
                    bias_data=round(float(r["bias"]), 5),
                    std_data=round(float(r["std"]), 5),
                    p95_abs_data=round(float(r["p95_abs"]), 5),
                    n=int(r["n"]),
                )
            )
        out += [
            "]",
            "# Rank correlation of errors: within one forecast, of leads `separation_h` apart;",
            "# and of two forecasts of the same target issued `separation_h` apart.",
            "correlation = [",
        ]
        c = corr[a.key]
        w, tau = cal.target_share, cal.target_tau_h
        for k, sep in enumerate(c["sep_h"]):
            out.append(
                row(
                    separation_h=round(float(sep), 4),
                    within_forecast_data=round(float(c["within"][k]), 4),
                    within_forecast_model=round(
                        float(rank_corr_model(w * math.exp(-sep / tau))), 4
                    ),
                    same_target_data=round(float(c["across"][k]), 4),
                    same_target_model=round(float(rank_corr_model(w)), 4),
                )
            )
        out.append("]")
    out.append("")
    return "\n".join(out)


def _toml(v: object) -> str:
    if isinstance(v, str):
        return json.dumps(v)  # a valid TOML basic string for this text
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def figure(
    path: Path,
    stats: dict[str, pd.DataFrame],
    corr: dict[str, dict[str, np.ndarray]],
    cal: Calibration,
    benchmarks: dict[str, dict[str, float]],
) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    h = np.geomspace(1 / 12, 48, 300)
    ax1.plot(h, 100 * cal.mae(h), color="C0", label="model MAE (one law, both archives)")
    for a, color, mark in zip(ARCHIVES, ("k", "C3"), ("o", "s"), strict=True):
        st = stats[a.key]
        ax1.plot(st["lead_h"], 100 * st["mae"], mark, color=color, ms=3, label=f"{a.label}: MAE")
        ax1.plot(
            st["lead_h"],
            100 * st["mae_model"],
            "x",
            color=color,
            ms=4,
            alpha=0.6,
            label="model on its real actuals",
        )
    per = 100 * benchmarks["uk"]["persistence_24h_mae"]
    ax1.axhline(per, color="0.5", lw=0.8, ls=":")
    ax1.text(1 / 12, per, " GB: same time yesterday", fontsize=7, va="bottom", color="0.4")
    ax1.set_xscale("log")
    ax1.set_xticks([1 / 12, 0.5, 1, 6, 24, 48], ["5 min", "30 min", "1 h", "6 h", "24 h", "48 h"])
    ax1.set_xlabel("lead time h (log scale)")
    ax1.set_ylabel("MAE, % of mean intensity")
    ax1.set_title("Forecast error vs lead: model against real forecasts")
    ax1.set_ylim(0, None)
    ax1.legend(fontsize=7, loc="lower right")

    w, tau = cal.target_share, cal.target_tau_h
    c = corr["uk"]
    s = np.linspace(0, c["sep_h"][-1], 200)
    ax2.plot(
        c["sep_h"], c["within"], "o", color="k", ms=3, label="GB data: one forecast, leads apart"
    )
    ax2.plot(
        s,
        rank_corr_model(np.where(s > 0, w * np.exp(-s / tau), 1.0)),
        color="C0",
        label="model: one forecast",
    )
    ax2.plot(
        c["sep_h"], c["across"], "^", color="C2", ms=3, label="GB data: same target, issues apart"
    )
    ax2.axhline(rank_corr_model(w), color="C2", label="model: same target")
    wt = corr["watttime"]
    ax2.plot(wt["sep_h"], wt["within"], "s", color="C3", ms=3, label="CAISO data: one forecast")
    ax2.set_ylim(-0.4, 1.02)
    ax2.set_xlabel("separation in lead time or issue time (h)")
    ax2.set_ylabel("rank correlation of errors (Spearman)")
    ax2.set_title("Error correlation")
    ax2.legend(fontsize=7, loc="lower left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


if __name__ == "__main__":
    main()
