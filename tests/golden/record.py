"""Record the golden results: `python -m tests.golden.record` from the project root."""

from __future__ import annotations

import json

import sim
from tests.golden.cases import CASES, GOLDEN_DIR, SCENARIOS, SKIPPED_SUMMARY_KEYS, recorded_tables


def run_case(scenario_file: str, policy: str | None, overrides: list[str]) -> sim.Results:
    return sim.simulate(sim.load_scenario(SCENARIOS / scenario_file, overrides), policy)


def main() -> None:
    for name, scenario_file, policy, overrides in CASES:
        results = run_case(scenario_file, policy, overrides)
        out = GOLDEN_DIR / name
        out.mkdir(exist_ok=True)
        summary = {k: v for k, v in results.summary.items() if k not in SKIPPED_SUMMARY_KEYS}
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        for table in recorded_tables(results):
            getattr(results, table).to_parquet(out / f"{table}.parquet", index=False)
        print(name, summary["jobs_completed"], summary["carbon_total_kg"])


if __name__ == "__main__":
    main()
