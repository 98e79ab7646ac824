"""Fit the `calibrated` forecast-error model on real issued forecasts.

Reads the WattTime MOER forecasts and actuals for CAISO North (June-July 2023) from the
project's shared data folder (never shipped), characterises the relative forecast error
e = (forecast - actual) / mean(actual) by lead time, fits the model of
`sim.grid.forecast.Calibration`, checks it by running the simulator's own `Forecaster` on
the real actual series, and writes

- `sim/data/forecast_calibration.toml`: the parameters, the data source, the fit date and
  the fitted-vs-data table by lead time (the simulator reads this file, nothing else);
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
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

from sim.grid.forecast import Calibration, Forecaster  # noqa: E402
from sim.grid.signal import CarbonSignal  # noqa: E402
from sim.scenario import ForecastConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "watttime-caiso-north"
OUT = REPO / "sim" / "data" / "forecast_calibration.toml"
FIGURE = REPO / "docs" / "figures" / "forecast_error_vs_horizon.png"
ACTUAL = "watttime2023_caiso-north_actual.csv"
FORECAST = "watttime2023_caiso-north_forecast.csv"
SOURCE = (
    "WattTime marginal operating emissions rate (MOER), CAISO North, 5-min actuals and "
    "forecasts issued every 5 min, 2023-06-08..2023-07-08, lbs CO2/MWh; files "
    f"{ACTUAL} and {FORECAST} from dos-group/vessim @ b168852~1, datasets/ "
    "(copied verbatim into ../shared/data/watttime-caiso-north/)"
)
STEP_MIN = 5
CHECK_SEEDS = 8


def load(data: Path) -> tuple[pd.Series, pd.DataFrame, dict]:
    """The actual series (5-min, lbs/MWh) and one row per (issue, lead) with the error.

    Only lead times every issued forecast has are kept (5..65 min; 3 of ~8900 forecasts,
    issued before a gap in the issue times, reach further) and only targets with an actual.
    """
    actual = pd.read_csv(data / ACTUAL, parse_dates=["time"]).set_index("time").iloc[:, 0]
    fc = pd.read_csv(data / FORECAST, parse_dates=["request_time", "forecast_time"])
    fc.columns = ["issue", "target", "value"]
    lead = (fc["target"] - fc["issue"]).dt.total_seconds() / 60.0
    fc["lead_steps"] = np.rint(lead / STEP_MIN).astype(int)
    per_issue = fc.groupby("issue")["lead_steps"].max()
    common = int(per_issue.min())
    notes = {
        "issues": int(per_issue.size),
        "rows": len(fc),
        "issues_reaching_beyond_common_lead": int((per_issue > common).sum()),
    }
    fc = fc[fc["lead_steps"] <= common].copy()
    fc["actual"] = actual.reindex(fc["target"]).to_numpy()
    notes["rows_without_actual"] = int(fc["actual"].isna().sum())
    fc = fc.dropna(subset=["actual"])
    fc["e"] = (fc["value"] - fc["actual"]) / actual.mean()
    return actual, fc, notes


def gauss_equiv(rank_corr: np.ndarray) -> np.ndarray:
    """Pearson correlation of a bivariate normal with this Spearman rank correlation."""
    return 2.0 * np.sin(np.pi * np.asarray(rank_corr) / 6.0)


def rank_corr_model(rho: np.ndarray) -> np.ndarray:
    """Spearman rank correlation of a bivariate normal with Pearson correlation `rho`."""
    return 6.0 / np.pi * np.arcsin(np.asarray(rho) / 2.0)


def correlations(fc: pd.DataFrame) -> dict[str, np.ndarray]:
    """Rank correlations of errors: within one forecast by lead separation, and of the same
    target across issue times (averaged over all lead pairs with that separation)."""
    by_issue = fc.pivot(index="issue", columns="lead_steps", values="e").dropna()
    by_target = fc.pivot(index="target", columns="lead_steps", values="e")
    leads = list(by_issue.columns)
    s_issue = by_issue.corr(method="spearman").to_numpy()
    s_target = by_target.corr(method="spearman", min_periods=500).to_numpy()
    n = len(leads)
    sep = np.arange(1, n)
    within = np.array([np.mean(np.diagonal(s_issue, k)) for k in sep])
    across = np.array([np.nanmean(np.diagonal(s_target, k)) for k in sep])
    adjacent = np.diagonal(s_issue, 1)
    return {
        "sep_min": sep * STEP_MIN,
        "within": within,
        "across": across,
        "adjacent": adjacent,
        "pearson_adjacent": np.diagonal(by_issue.corr().to_numpy(), 1),
    }


def fit_sigma(lead_h: np.ndarray, mae: np.ndarray, form: str) -> np.ndarray:
    """Least-squares fit (relative residuals) of MAE(h) = sqrt(2/pi) sigma(h) for a form:
    "power" sigma = s1 h^c (the model), "offset" a + b h^c, "log" a + b log(1 + h/h0)."""
    k = math.sqrt(2.0 / math.pi)
    forms = {
        "power": (lambda p, h: p[0] * h ** p[1], [0.15, 0.3], ([0, 0.01], [5, 2])),
        "offset": (
            lambda p, h: p[0] + p[1] * h ** p[2],
            [0.02, 0.15, 0.3],
            ([0, 0, 0.01], [1, 5, 2]),
        ),
        "log": (
            lambda p, h: p[0] + p[1] * np.log1p(h / p[2]),
            [0.05, 0.05, 0.1],
            ([0, 0, 1e-3], [1, 5, 10]),
        ),
    }
    f, x0, bounds = forms[form]
    p = least_squares(lambda p: (k * f(p, lead_h) - mae) / mae, x0=x0, bounds=bounds).x
    return p, (lambda h: k * f(p, np.asarray(h, dtype=float)))


def fit(stats: pd.DataFrame, corr: dict[str, np.ndarray]) -> Calibration:
    lead_h = stats.index.to_numpy() * STEP_MIN / 60.0
    (s1, c), _ = fit_sigma(lead_h, stats["mae"].to_numpy(), "power")

    sep_h = corr["sep_min"] / 60.0
    within = gauss_equiv(corr["within"])
    across = gauss_equiv(corr["across"])

    def corr_resid(p: np.ndarray) -> np.ndarray:
        w, tau = p
        return np.concatenate([w * np.exp(-sep_h / tau) - within, w - across])

    w, tau = least_squares(corr_resid, x0=[0.8, 1.0], bounds=([0, 1e-3], [1, 100])).x
    return Calibration(
        sigma_1h=float(s1),
        sigma_exponent=float(c),
        target_share=float(w),
        target_tau_h=float(tau),
        max_lead_h=float(lead_h[-1]),
    )


def model_errors(actual: pd.Series, cal: Calibration, seed: int, n_leads: int) -> pd.DataFrame:
    """Run the simulator's Forecaster on the real actual series, issuing a forecast every
    5 min like WattTime; relative errors by (issue, lead_steps)."""
    t = (actual.index - actual.index[0]).total_seconds().to_numpy(dtype=float)
    v = actual.to_numpy(dtype=float)
    sig = CarbonSignal(t, v, end_s=t[-1] + STEP_MIN * 60)
    f = Forecaster(ForecastConfig(model="calibrated"), np.random.default_rng(seed), cal)
    horizon = (n_leads + 1) * STEP_MIN * 60 - 1.0
    mean = sig.mean(t[0], sig.end_s)
    rows = []
    for k in range(len(t) - n_leads - 1):
        _, fv = f.forecast(sig, t[k], horizon)
        rows.append((fv[1:] - v[k + 1 : k + 1 + n_leads]) / mean)
    return pd.DataFrame(np.array(rows), columns=np.arange(1, n_leads + 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--figure", type=Path, default=FIGURE)
    args = ap.parse_args()

    actual, fc, notes = load(args.data)
    g = fc.groupby("lead_steps")["e"]
    stats = pd.DataFrame(
        {
            "bias": g.mean(),
            "median": g.median(),
            "mae": g.apply(lambda x: x.abs().mean()),
            "std": g.std(),
            "p95_abs": g.apply(lambda x: x.abs().quantile(0.95)),
            "n": g.size(),
        }
    )
    corr = correlations(fc)
    cal = fit(stats, corr)
    n_leads = int(stats.index.max())
    lead_min = stats.index.to_numpy() * STEP_MIN
    lead_h = lead_min / 60.0
    mae = stats["mae"].to_numpy()

    # Check: the simulator's Forecaster on the real actuals, several seeds.
    sims = [model_errors(actual, cal, seed, n_leads) for seed in range(CHECK_SEEDS)]
    model_mae = pd.concat([s.abs().mean() for s in sims], axis=1).mean(axis=1).to_numpy()
    model_adj = np.mean(
        [np.diagonal(s.corr(method="spearman").to_numpy(), 1) for s in sims], axis=0
    )

    # Extrapolation: the same data fitted by other sigma(h) forms.
    extra_h = np.array([2.0, 6.0, 12.0, 24.0])
    forms = {}
    for form in ("power", "offset", "log"):
        params, mae_of = fit_sigma(lead_h, mae, form)
        rms = float(np.sqrt(np.mean((mae_of(lead_h) / mae - 1) ** 2)))
        forms[form] = (params, mae_of, rms)

    a = actual.to_numpy()
    mean = float(actual.mean())
    day, hour = 24 * 60 // STEP_MIN, 60 // STEP_MIN
    benchmarks = {
        "persistence_24h_mae": float(np.abs(a[day:] - a[:-day]).mean() / mean),
        "persistence_1h_mae": float(np.abs(a[hour:] - a[:-hour]).mean() / mean),
        "climatology_mae": float(np.abs(a - mean).mean() / mean),
    }

    print(f"data: {notes}")
    print(f"fitted: {cal}")
    print("lead_min  bias     mae_data  mae_model  rel.diff  std_data  p95|e|  adj.rank-corr d/m")
    for i in range(len(lead_min)):
        r = stats.iloc[i]
        adj = f"{corr['adjacent'][i - 1]:.3f}/{model_adj[i - 1]:.3f}" if i else ""
        print(
            f"{lead_min[i]:8.0f} {r['bias']:+.4f} {r['mae']:9.4f} {model_mae[i]:10.4f} "
            f"{model_mae[i] / r['mae'] - 1:+8.1%} {r['std']:9.4f} {r['p95_abs']:7.3f}  {adj}"
        )
    for form, (params, mae_of, rms) in forms.items():
        print(
            f"sigma form {form}: params {params.round(4).tolist()}, rms rel. residual "
            f"{rms:.4f}, MAE at {extra_h.tolist()} h: {mae_of(extra_h).round(4).tolist()}"
        )
    print("benchmarks (relative MAE on the same actuals):", benchmarks)

    text = calibration_toml(
        notes, cal, stats, model_mae, model_adj, corr, extra_h, forms, benchmarks, mean
    )
    args.out.write_text(text, encoding="utf-8")
    tomllib.loads(text)  # written by hand: make sure it parses
    print(f"wrote {args.out}")
    figure(args.figure, stats, corr, cal, lead_h, model_mae, benchmarks, forms)
    print(f"wrote {args.figure}")


def calibration_toml(
    notes: dict,
    cal: Calibration,
    stats: pd.DataFrame,
    model_mae: np.ndarray,
    model_adj: np.ndarray,
    corr: dict[str, np.ndarray],
    extra_h: np.ndarray,
    forms: dict,
    benchmarks: dict[str, float],
    mean: float,
) -> str:
    """The shipped calibration file: parameters first, then the evidence, one row a line."""

    def row(**kv: object) -> str:
        return "  { " + ", ".join(f"{k} = {_toml(v)}" for k, v in kv.items()) + " },"

    lead_min = stats.index.to_numpy() * STEP_MIN
    formula = cal.mae(lead_min / 60.0)
    out = [
        "# Calibrated forecast-error model of dcsim (sim.grid.forecast.Calibration).",
        "# Written by scripts/calibrate_forecast.py; do not edit by hand. Errors are relative:",
        "# e = (forecast - actual) / mean actual; MAE = mean |e|. See docs/forecasts.md.",
        "",
        "[model]",
        "# sigma(h) = sigma_1h * (h / 1 h) ** sigma_exponent; e = sigma(h) * (sqrt(w) A(T) +",
        "# sqrt(1 - w) B), A an OU process over target time (tau), B i.i.d.; w = target_share.",
        f"sigma_1h = {cal.sigma_1h:.6f}",
        f"sigma_exponent = {cal.sigma_exponent:.6f}",
        f"target_share = {cal.target_share:.6f}",
        f"target_tau_h = {cal.target_tau_h:.6f}",
        f"max_lead_h = {cal.max_lead_h:.6f}  # longest lead in the data; beyond: extrapolated",
        "",
        "[source]",
        f"data = {_toml(SOURCE)}",
        f"fit_date = {_toml(dt.date.today().isoformat())}",
        f"script = {_toml('scripts/calibrate_forecast.py')}",
        f"issued_forecasts = {notes['issues']}",
        f"forecast_rows = {notes['rows']}",
        f"issues_reaching_beyond_65_min = {notes['issues_reaching_beyond_common_lead']}",
        f"rows_without_actual = {notes['rows_without_actual']}",
        f"mean_actual_lbs_per_mwh = {mean:.3f}",
        "note = "
        + _toml(
            "The real forecasts reach 65 min only: there is no data at 6 h or 24 h, and "
            "sigma(h) beyond 65 min is the fitted law extrapolated."
        ),
        "",
        "[fit]",
        "# By lead time: the real forecasts (data) against the model: `mae_model` runs the",
        f"# simulator's Forecaster on the real actual series (clipped at 0, {CHECK_SEEDS} seeds),",
        "# `mae_model_formula` is sigma(h) sqrt(2/pi). Rank correlation: Spearman, of the",
        "# errors at this lead and the previous one within one forecast.",
        "by_lead = [",
    ]
    for i, m in enumerate(lead_min):
        r = stats.iloc[i]
        out.append(
            row(
                lead_min=int(m),
                mae_data=round(float(r["mae"]), 5),
                mae_model=round(float(model_mae[i]), 5),
                mae_model_formula=round(float(formula[i]), 5),
                bias_data=round(float(r["bias"]), 5),
                median_data=round(float(r["median"]), 5),
                std_data=round(float(r["std"]), 5),
                p95_abs_data=round(float(r["p95_abs"]), 5),
                n=int(r["n"]),
                **(
                    {
                        "adjacent_rank_corr_data": round(float(corr["adjacent"][i - 1]), 4),
                        "adjacent_rank_corr_model": round(float(model_adj[i - 1]), 4),
                    }
                    if i
                    else {}
                ),
            )
        )
    out += [
        "]",
        "# Rank correlation of errors: within one forecast, of leads `separation_min` apart;",
        "# and of two forecasts of the same target issued `separation_min` apart.",
        "correlation = [",
    ]
    w, tau = cal.target_share, cal.target_tau_h
    for k, sep in enumerate(corr["sep_min"]):
        within_model = rank_corr_model(w * math.exp(-sep / 60.0 / tau))
        out.append(
            row(
                separation_min=int(sep),
                within_forecast_data=round(float(corr["within"][k]), 4),
                within_forecast_model=round(float(within_model), 4),
                same_target_data=round(float(corr["across"][k]), 4),
                same_target_model=round(float(rank_corr_model(w)), 4),
            )
        )
    out += [
        "]",
        "",
        "[extrapolation]",
        "# No data beyond 65 min. Other forms of sigma(h) fit 5..65 min as well but extrapolate",
        "# differently; their spread is the extrapolation uncertainty (rms: relative residual",
        "# of the MAE fit over 5..65 min).",
        f"lead_h = {_toml([float(x) for x in extra_h])}",
        "mae = [",
    ]
    names = {"power": "s1 h^c (the model)", "offset": "a + b h^c", "log": "a + b log(1 + h/h0)"}
    for form, (params, mae_of, rms) in forms.items():
        out.append(
            row(
                form=names[form],
                params=[round(float(x), 5) for x in params],
                rms=round(rms, 5),
                mae=[round(float(x), 4) for x in mae_of(extra_h)],
            )
        )
    out += [
        "]",
        "",
        "[benchmarks]",
        "# Relative MAE of naive forecasts on the same actuals, for scale.",
        *(f"{k} = {v:.5f}" for k, v in benchmarks.items()),
        "",
    ]
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
    stats: pd.DataFrame,
    corr: dict[str, np.ndarray],
    cal: Calibration,
    lead_h: np.ndarray,
    model_mae: np.ndarray,
    benchmarks: dict[str, float],
    forms: dict,
) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    h = np.geomspace(1 / 60, 24, 300)
    inside = h <= cal.max_lead_h
    ax1.plot(h[inside], 100 * cal.mae(h[inside]), color="C0", label="model MAE (fitted)")
    ax1.plot(
        h[~inside], 100 * cal.mae(h[~inside]), color="C0", ls="--", label="model, extrapolated"
    )
    alt = forms["offset"][1]
    ax1.plot(
        h,
        100 * alt(h),
        color="0.45",
        lw=0.8,
        ls="-.",
        label="alternative fit a + b h^c (extrapolation uncertainty)",
    )
    ax1.plot(lead_h, 100 * stats["mae"], "o", color="k", ms=4, label="WattTime forecasts: MAE")
    ax1.plot(lead_h, 100 * model_mae, "x", color="C0", ms=5, label="model on real actuals: MAE")
    ax1.plot(lead_h, 100 * stats["bias"], "s", color="C3", ms=3, label="WattTime: bias (mean)")
    ax1.axvspan(cal.max_lead_h, 24, color="0.92", zorder=0)
    ax1.axhline(100 * benchmarks["persistence_24h_mae"], color="0.5", lw=0.8, ls=":")
    ax1.text(
        0.02,
        100 * benchmarks["persistence_24h_mae"],
        " same time yesterday",
        fontsize=7,
        va="bottom",
        color="0.4",
    )
    ax1.text(3, 2, "no real forecasts\nbeyond 65 min", fontsize=8, color="0.35")
    ax1.set_xscale("log")
    ax1.set_xticks([1 / 12, 0.25, 1, 6, 24], ["5 min", "15 min", "1 h", "6 h", "24 h"])
    ax1.set_xlabel("lead time h (log scale)")
    ax1.set_ylabel("relative error (MAE, bias), % of mean intensity")
    ax1.set_title("Error vs horizon: CAISO North MOER, Jun-Jul 2023")
    ax1.legend(fontsize=7, loc="upper left")

    sep = corr["sep_min"]
    s = np.linspace(0, sep[-1], 200) / 60.0
    w, tau = cal.target_share, cal.target_tau_h
    within_model = rank_corr_model(np.where(s > 0, w * np.exp(-s / tau), 1.0))
    ax2.plot(sep, corr["within"], "o", color="k", ms=4, label="data: one forecast, leads apart")
    ax2.plot(s * 60, within_model, color="C0", label="model: one forecast")
    ax2.plot(sep, corr["across"], "^", color="C2", ms=4, label="data: same target, issues apart")
    ax2.axhline(rank_corr_model(w), color="C2", label="model: same target")
    ax2.set_ylim(0, 1.02)
    ax2.set_xlabel("separation in lead time or issue time (min)")
    ax2.set_ylabel("rank correlation of errors (Spearman)")
    ax2.set_title("Error correlation")
    ax2.legend(fontsize=7, loc="lower left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


if __name__ == "__main__":
    main()
