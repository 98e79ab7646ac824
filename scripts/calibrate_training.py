"""Derive the time-to-accuracy data of `sim.models.training` from the Zeus traces.

Reads the train trace and the four power traces of Zeus (You, Chung, Chowdhury, NSDI 2023)
from the project's sibling `shared/data/zeus-nsdi23/` and writes
`sim/data/zeus_training.toml`:

1. per workload, the job defaults of the Zeus artifact (`run_alibaba.py`,
   `get_job_with_defaults`: optimizer, target metric, maximum epochs, default batch size);
2. per (workload, batch size, target metric), the epoch at which each training run (seed)
   of the train trace first reached the target (nan: the run never did);
3. per (GPU, workload, batch size), the power sweep (the optimizer the train trace used):
   time per epoch and average power at each measured power limit, made monotone in the limit
   by the minimax isotonic fit in log space (a higher limit never slows a run down nor
   lowers its draw; the fit moves the few non-monotone readings, run-to-run noise of NCF and
   of the smallest batch sizes, by the least possible relative change: half the largest
   violation). The largest change is printed and recorded.

Run it after a data update: `python scripts/calibrate_training.py`. The product never reads
the Zeus files; only this script and the validation tests do.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "zeus-nsdi23"
OUT = REPO / "sim" / "data" / "zeus_training.toml"

GPUS = {"p100": "P100", "v100": "V100", "rtx6000": "RTX6000", "a40": "A40"}

# The Zeus artifact's job defaults (ml-energy/zeus, examples/research_reproducibility/
# zeus_nsdi23/run_alibaba.py, get_job_with_defaults): optimizer, target metric, maximum
# epochs and default batch size b0 per dataset. DeepSpeech2's b0 is 192 as in run_single.py
# and the profiles of sim.models.hardware (run_alibaba.py caps it at the GPU's largest, 256).
WORKLOADS = {
    "shufflenetv2": ("cifar100", "shufflenetv2", "adadelta", "top-1 accuracy", 0.60, 100, 1024),
    "resnet50": ("imagenet", "resnet50", "adadelta", "top-1 accuracy", 0.65, 100, 256),
    "deepspeech2": ("librispeech", "deepspeech2", "adamw", "word error rate (%)", 40.0, 16, 192),
    "ncf": ("movielens-1m", "ncf", "adam", "NDCG@10", 0.41, 100, 1024),
    "bert-squad": ("squad", "bert_base_uncased", "adamw", "F1", 84.0, 6, 32),
    "bert-sentiment140": ("sentiment140", "bert_base_uncased", "adamw", "accuracy", 0.84, 10, 128),
}
LOWER_IS_BETTER = {"deepspeech2"}


def workload_rows(frame: pd.DataFrame, wid: str) -> pd.DataFrame:
    """The rows of one workload (its dataset, network and the train trace's optimizer)."""
    dataset, network, optimizer = WORKLOADS[wid][:3]
    keep = (
        (frame["dataset"] == dataset)
        & (frame["network"] == network)
        & (frame["optimizer"] == optimizer)
    )
    return frame[keep]


def epochs_table(train: pd.DataFrame, wid: str) -> dict[str, dict[str, list[float]]]:
    """{batch size: {target: [epoch per run, nan if never reached]}} of one workload."""
    rows = workload_rows(train, wid)
    out: dict[str, dict[str, list[float]]] = {}
    for b, per_batch in rows.groupby("batch_size"):
        runs = sorted(per_batch["run"].unique())
        table = per_batch.pivot_table(
            index="target_metric", columns="run", values="target_epoch", aggfunc="first"
        ).reindex(columns=runs)
        out[str(int(b))] = {
            f"{t:g}": [float(v) for v in table.loc[t].to_numpy()] for t in table.index
        }
    return out


def monotone(values: np.ndarray, increasing: bool) -> np.ndarray:
    """The monotone sequence nearest to positive `values` (ordered by power limit) in the
    largest relative change: the minimax (L-infinity) isotonic fit of log(values), the
    midpoint of the running maximum from the left and the running minimum from the right."""
    z = np.log(values) if increasing else -np.log(values)
    rising = np.maximum.accumulate(z)
    falling = np.minimum.accumulate(z[::-1])[::-1]
    mid = (rising + falling) / 2
    return np.exp(mid if increasing else -mid)


def sweep_table(power: pd.DataFrame, wid: str) -> tuple[dict[str, dict[str, list]], float]:
    """{batch size: {cap_w, epoch_s, power_w}} of one (GPU, workload), monotone in the cap,
    and the largest relative change the monotone fit made."""
    out: dict[str, dict[str, list]] = {}
    worst = 0.0
    for b, sweep in workload_rows(power, wid).groupby("batch_size"):
        sweep = sweep.sort_values("power_limit")
        if sweep["power_limit"].duplicated().any():
            raise ValueError(f"{wid} batch {b}: a power limit is measured twice")
        epoch_s = sweep["time_per_epoch"].to_numpy(float)
        power_w = sweep["average_power"].to_numpy(float)
        fit_s, fit_w = monotone(epoch_s, False), monotone(power_w, True)
        worst = max(worst, float(np.max(np.abs(fit_s / epoch_s - 1))))
        worst = max(worst, float(np.max(np.abs(fit_w / power_w - 1))))
        out[str(int(b))] = {
            "cap_w": [float(c) for c in sweep["power_limit"]],
            "epoch_s": [round(float(v), 4) for v in fit_s],
            "power_w": [round(float(v), 4) for v in fit_w],
        }
    return out, worst


def toml_value(v: object) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return str(v)


def write_toml(
    epochs: dict[str, dict], sweeps: dict[str, dict[str, dict]], worst: float, out: Path
) -> None:
    lines = [
        "# Time-to-accuracy data of sim.models.training, generated by",
        "# scripts/calibrate_training.py from the Zeus traces: do not edit by hand, re-run it.",
        'source = "Zeus train and power traces (You, Chung, Chowdhury, NSDI 2023): '
        "trace_summary_train.csv and trace_summary_power_{p100,v100,rtx6000,a40}.csv from "
        "ml-energy/zeus @ 75a8b939, examples/research_reproducibility/zeus_nsdi23/trace/ "
        '(Apache-2.0); job defaults from run_alibaba.py of the same folder"',
        'generated_by = "scripts/calibrate_training.py"',
        f"monotone_fit_max_change = {worst:.4f}",
        "",
    ]
    for wid, (dataset, network, optimizer, metric, target, max_epochs, b0) in WORKLOADS.items():
        lines += [
            f"[workloads.{toml_value(wid)}]",
            f"dataset = {toml_value(dataset)}",
            f"network = {toml_value(network)}",
            f"optimizer = {toml_value(optimizer)}",
            f"metric = {toml_value(metric)}",
            f"lower_is_better = {toml_value(wid in LOWER_IS_BETTER)}",
            f"default_target = {target!r}",
            f"default_batch_size = {b0}",
            f"max_epochs = {max_epochs}",
            "",
        ]
        for b, targets in epochs[wid].items():
            lines.append(f'[workloads.{toml_value(wid)}.epochs."{b}"]')
            lines += [f'"{t}" = {toml_value(runs)}' for t, runs in targets.items()]
            lines.append("")
    for gid, per_workload in sweeps.items():
        for wid, per_batch in per_workload.items():
            for b, sweep in per_batch.items():
                lines.append(f'[sweeps.{gid}.{toml_value(wid)}."{b}"]')
                lines += [f"{k} = {toml_value(v)}" for k, v in sweep.items()]
                lines.append("")
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines), "utf-8")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the zeus-nsdi23 folder")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    train = pd.read_csv(args.data / "trace_summary_train.csv")
    epochs = {wid: epochs_table(train, wid) for wid in WORKLOADS}
    sweeps: dict[str, dict[str, dict]] = {}
    worst = 0.0
    for key, gid in GPUS.items():
        power = pd.read_csv(args.data / f"trace_summary_power_{key}.csv")
        sweeps[gid] = {}
        for wid in WORKLOADS:
            sweeps[gid][wid], w = sweep_table(power, wid)
            worst = max(worst, w)
    write_toml(epochs, sweeps, worst, args.out)
    print(f"wrote {args.out}; largest change of the monotone fit: {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
