"""The fragmentation and placement study: Alibaba's 2023 GPU trace replayed on 8-GPU
servers under each placement rule, with and without strict locality, at two cluster sizes
and two queue disciplines (docs/study-fragmentation.md).

    python scripts/study_fragmentation.py --out out/fragmentation            # 32 runs, ~30 s
    python scripts/study_fragmentation.py --out out/fragmentation --check    # + the claims

Imports `openb_pod_list_default.csv` from the project's sibling `shared/data/alibaba-gpu-2023/`
(whole GPUs, `fractional = "round_up"`) into `OUT/alibaba2023_jobs.parquet`, runs
`scenarios/fragmentation.toml` on it for every (servers, queue, rule, max_servers), and
writes `OUT/fragmentation.csv` (one row per run) and the figure
`OUT/study-fragmentation.png` (`--figure` also writes it to docs/figures/).
`notebooks/fragmentation.ipynb` calls `import_jobs`, `study` and `figure`.

Waits are counted to the horizon for jobs that never started (`sim`'s `wait_mean_h` leaves
them out), so a rule that starves a job shows it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: `policies` is a top-level package
    sys.path.insert(0, str(REPO))

import sim  # noqa: E402
from policies.run_now import RunNow  # noqa: E402
from sim.config.scenario import Scenario  # noqa: E402
from sim.study.plots import OKABE_ITO, STYLE  # noqa: E402
from sim.workload.importers import import_trace, write_native  # noqa: E402

__all__ = [
    "LIMITS",
    "QUEUES",
    "RULES",
    "SCENARIO",
    "SERVERS",
    "TRACE",
    "check",
    "figure",
    "import_jobs",
    "run",
    "scenario",
    "study",
]

SCENARIO = REPO / "scenarios" / "fragmentation.toml"
TRACE = REPO.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_pod_list_default.csv"
FIGURE = REPO / "docs" / "figures" / "study-fragmentation.png"

RULES = ("fewest_servers", "first_fit", "best_fit", "spread")
LIMITS = ("strict", "unlimited")
SERVERS = (7, 10)
"""PCIe-V100x8 servers: 56 GPUs, below the 64 the trace's pods hold at its busiest instant
(so jobs queue), and 80 GPUs, a quarter above it (waits only from fragmentation)."""
QUEUES = {"fcfs": RunNow(), "backfill": RunNow(backfill=True)}
"""`run_now` as the scenario has it (first come, first served: a blocked head of the queue
holds every job behind it) and with greedy backfilling (later jobs that fit start)."""
FREE_GPU_CASE = {"servers": 7, "queue": "backfill", "max_servers": "strict"}
"""The runs whose free GPUs by server the figure shows, for `best_fit` and `spread`."""
WINDOW_DAYS = (115.0, 150.0)
"""The busy part of the trace (days since its first submission) the free-GPU panels show:
4,309 of the 4,334 pods arrive in it."""


def import_jobs(path: Path, trace: Path = TRACE) -> Path:
    """The trace's pods as a native job file at `path` (whole GPUs); `path` returned.
    FileNotFoundError naming the trace if it is absent (a checkout without ../shared/data)."""
    if not trace.is_file():
        raise FileNotFoundError(f"Alibaba 2023 trace not found at {trace} (../shared/data)")
    jobs, _ = import_trace("alibaba2023", trace, fractional="round_up")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_native(jobs, path)
    return path


def scenario(jobs: Path, servers: int, rule: str, max_servers: str) -> Scenario:
    """`scenarios/fragmentation.toml` on the job file `jobs` with `servers` servers, the
    placement `rule` and the server limit `max_servers`."""
    return sim.load_scenario(
        SCENARIO,
        [
            f"workload.file={jobs.resolve()}",
            f"sites[0].gpus[0].servers.count={servers}",
            f"sites[0].placement={rule}",
            f"sites[0].max_servers={max_servers}",
        ],
    )


def _waits_h(result: sim.Results) -> pd.Series:
    """Each job's wait, h: to its start, or to the horizon if it never started."""
    jobs = result.jobs
    horizon_s = result.scenario.horizon_s
    return (jobs["start_s"].fillna(horizon_s) - jobs["submit_s"]) / 3600.0


def _row(result: sim.Results) -> dict[str, float]:
    """The study's columns of one run: waits in hours, energy in kWh, carbon in kg."""
    s = result.summary
    jobs = result.jobs
    waits = _waits_h(result)
    multi = jobs["gpus"] > 1
    return {
        "fragmentation_wait_h": s["fragmentation_wait_h"],
        "wait_mean_h": waits.mean(),
        "wait_p95_h": waits.quantile(0.95),
        "wait_multi_gpu_mean_h": waits[multi].mean(),
        "jobs_never_started": int(jobs["start_s"].isna().sum()),
        "jobs_completed": s["jobs_completed"],
        "gpu_utilization": s["gpu_utilization"],
        "energy_facility_kwh": s["energy_facility_kwh"],
        "carbon_operational_kg": s["carbon_operational_kg"],
    }


def run(jobs: Path, servers: int, queue: str, rule: str, max_servers: str) -> sim.Results:
    """One run of the study: the scenario at these settings under `QUEUES[queue]`."""
    return sim.simulate(scenario(jobs, servers, rule, max_servers), QUEUES[queue])


def study(
    jobs: Path, servers: tuple[int, ...] = SERVERS, queues: tuple[str, ...] = tuple(QUEUES)
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Every (servers, queue, rule, max_servers) run on the job file `jobs`: one row each
    (`_row`'s columns), and the `servers` table (free GPUs by server) of the
    `FREE_GPU_CASE` runs by rule, for the figure."""
    rows: list[dict[str, Any]] = []
    free: dict[str, pd.DataFrame] = {}
    for n, queue, rule, limit in itertools.product(servers, queues, RULES, LIMITS):
        result = run(jobs, n, queue, rule, limit)
        rows.append({"servers": n, "queue": queue, "rule": rule, "max_servers": limit})
        rows[-1].update(_row(result))
        if {"servers": n, "queue": queue, "max_servers": limit} == FREE_GPU_CASE:
            free[rule] = result.servers
    return pd.DataFrame(rows), free


def _free_grid(servers: pd.DataFrame, n: int, gpus: int, times_s: np.ndarray) -> np.ndarray:
    """Free GPUs of each of `n` servers (rows) at `times_s` (columns), from a `servers`
    table's change rows (every server starts with its `gpus` free)."""
    grid = np.full((n, len(times_s)), gpus, dtype=float)
    for server, rows in servers.groupby("server"):
        t = rows["time_s"].to_numpy()
        at = np.searchsorted(t, times_s, side="right") - 1
        values = rows["free_gpus"].to_numpy()[np.maximum(at, 0)]
        grid[int(server)] = np.where(at >= 0, values, gpus)
    return grid


def figure(table: pd.DataFrame, free: dict[str, pd.DataFrame]) -> Figure:
    """Top: the fragmentation wait of each rule under strict locality, per cluster size and
    queue. Below: the free GPUs by server over the trace's busy days for `best_fit` and
    `spread` (`FREE_GPU_CASE`), if their tables are in `free`."""
    shown = [rule for rule in ("best_fit", "spread") if rule in free]
    with matplotlib.rc_context(STYLE):
        fig = plt.figure(figsize=(9.0, 3.2 + 2.0 * len(shown)), layout="constrained")
        axes = fig.subplots(1 + len(shown), 1, height_ratios=[1.6] + [1.0] * len(shown))
        axes = np.atleast_1d(axes)
        strict = table[table["max_servers"] == "strict"]
        cases = strict[["servers", "queue"]].drop_duplicates().to_numpy().tolist()
        x = np.arange(len(RULES))
        width = 0.8 / len(cases)
        for k, (n, queue) in enumerate(cases):
            part = strict[(strict["servers"] == n) & (strict["queue"] == queue)]
            hours = part.set_index("rule").reindex(RULES)["fragmentation_wait_h"]
            axes[0].bar(x + (k - (len(cases) - 1) / 2) * width, hours, width,
                        label=f"{n} servers ({8 * n} GPUs), {queue}",
                        color=OKABE_ITO[k % len(OKABE_ITO)])  # fmt: skip
        axes[0].set_xticks(x, RULES)
        axes[0].set_ylabel("fragmentation wait, h")
        axes[0].set_title("Hours jobs waited with enough GPUs free, not on one server (strict)")
        axes[0].legend(fontsize=8)
        n = int(FREE_GPU_CASE["servers"])
        times_s = np.arange(WINDOW_DAYS[0] * 86400.0, WINDOW_DAYS[1] * 86400.0, 600.0)
        for ax, rule in zip(axes[1:], shown, strict=True):
            grid = _free_grid(free[rule], n, 8, times_s)
            image = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis",
                              vmin=0, vmax=8, origin="lower",
                              extent=(*WINDOW_DAYS, -0.5, n - 0.5))  # fmt: skip
            ax.grid(False)
            ax.set_ylabel("server")
            ax.set_title(f"free GPUs by server, {rule} ({n} servers, backfill, strict)")
            fig.colorbar(image, ax=ax, label="free GPUs")
        axes[-1].set_xlabel("day of the trace")
    return fig


def check(table: pd.DataFrame) -> list[str]:
    """The study's claims, asserted on `table` (AssertionError naming the first that fails);
    returns them as sentences."""
    key = ["servers", "queue", "max_servers"]
    claims = []
    for (n, queue, limit), part in table.groupby(key):
        wait = part.set_index("rule")["fragmentation_wait_h"]
        case = f"{n} servers, {queue}, max_servers {limit}"
        if limit == "unlimited":
            # a job fits whenever enough GPUs are free in total: fragmentation never holds it
            assert (wait == 0).all(), f"{case}: fragmentation wait without a server limit"
            claims.append(f"{case}: no fragmentation wait under any rule")
            continue
        # packing leaves whole servers free; spreading single-GPU pods leaves none
        assert wait["spread"] > wait["best_fit"], f"{case}: spread not above best_fit"
        assert wait["spread"] > wait["first_fit"], f"{case}: spread not above first_fit"
        assert wait["first_fit"] >= wait["best_fit"], f"{case}: first_fit below best_fit"
        # for 1-GPU pods fewest_servers chooses as best_fit does (the fullest server)
        assert wait["fewest_servers"] == wait["best_fit"], f"{case}: fewest_servers differs"
        claims.append(
            f"{case}: spread {wait['spread']:.0f} h > first_fit {wait['first_fit']:.0f} h "
            f">= best_fit = fewest_servers {wait['best_fit']:.1f} h"
        )
    return claims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the tables")
    parser.add_argument("--check", action="store_true", help="assert the study's claims")
    parser.add_argument("--figure", action="store_true", help=f"also write {FIGURE}")
    parser.add_argument("--trace", type=Path, default=TRACE)
    args = parser.parse_args(argv)
    jobs = import_jobs(args.out / "alibaba2023_jobs.parquet", args.trace)
    table, free = study(jobs)
    table.to_csv(args.out / "fragmentation.csv", index=False)
    fig = figure(table, free)
    fig.savefig(args.out / "study-fragmentation.png", dpi=150)
    if args.figure:
        fig.savefig(FIGURE, dpi=150)
    pd.set_option("display.width", 200)
    print(table.round(2).to_string(index=False))
    if args.check:
        print("\n".join(check(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
