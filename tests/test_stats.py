"""Paired comparisons of a sweep: the relative change against a baseline gets a paired
bootstrap interval over seeds (`sim.study.stats.change_interval`), in `paired_differences`'
`change_pct_low`, `change_pct_high` and `change_pct_method`."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

import sim
from sim.study.stats import BOOTSTRAP_SEED, change_interval, change_pct, paired_differences
from tests.conftest import REPO

TRUE_CHANGE_PCT = -10.0


def paired_runs(seeds: int, replicates: int = 1, seed: int = 1) -> pd.DataFrame:
    """A sweep's summary with known truth: per seed, a baseline run whose carbon has a large
    seed effect (lognormal around 100 kg), and a `green` run that emits 10% less plus noise
    (sd 5 kg), so the true relative change is -10%. `replicates` independent sweeps, told
    apart by the `replicate` column."""
    rng = np.random.default_rng(seed)
    base = 100.0 * np.exp(rng.normal(0.0, 0.5, (replicates, seeds)))
    green = base * (1 + TRUE_CHANGE_PCT / 100) + rng.normal(0.0, 5.0, base.shape)
    grid = {
        "replicate": np.repeat(np.arange(replicates), seeds),
        "seed": np.tile(range(seeds), replicates),
    }
    frame = pd.concat(
        [
            pd.DataFrame({**grid, "policy": "run_now", "carbon_kg": base.ravel()}),
            pd.DataFrame({**grid, "policy": "green", "carbon_kg": green.ravel()}),
        ]
    )
    frame.attrs["params"] = ["policy", "replicate"]
    return frame


@pytest.mark.parametrize(
    ("seeds", "coverage_range"),
    [
        (20, (0.92, 0.98)),  # about the nominal 95%
        (5, (0.80, 0.90)),  # with few seeds the bootstrap's interval is too narrow (docs)
    ],
)
def test_the_interval_covers_the_true_relative_change_at_about_the_nominal_rate(
    seeds, coverage_range
):
    table = paired_differences(paired_runs(seeds, replicates=400), "carbon_kg")
    assert len(table) == 400 and (table["pairs"] == seeds).all()
    assert (table["change_pct_method"] == "BCa").all()
    covered = (table["change_pct_low"] <= TRUE_CHANGE_PCT) & (
        TRUE_CHANGE_PCT <= table["change_pct_high"]
    )
    assert coverage_range[0] <= covered.mean() <= coverage_range[1]
    assert (table["change_pct_low"] < table["change_pct"]).all()
    assert (table["change_pct"] < table["change_pct_high"]).all()


def test_the_relative_change_is_the_ratio_of_the_means():
    table = paired_differences(paired_runs(5), "carbon_kg").iloc[0]
    assert table["change_pct"] == pytest.approx(100 * table["diff_mean"] / table["baseline_mean"])
    assert change_pct(np.array([1.0, 3.0]), np.array([2.0, 2.0])) == 0.0  # not the mean ratio


def scipy_bootstrap(frame: pd.DataFrame, paired: bool):
    """scipy's BCa bootstrap interval of `green`'s relative change against `run_now` (%),
    resampling each seed's two runs together (`paired`) or each policy's runs on their own,
    its generator seeded as `paired_differences` seeds it."""
    runs = [frame.loc[frame["policy"] == p, "carbon_kg"].to_numpy() for p in ("green", "run_now")]
    return scipy_stats.bootstrap(
        tuple(runs),
        lambda g, b, axis: 100 * (g.mean(axis) - b.mean(axis)) / b.mean(axis),
        paired=paired,
        vectorized=True,
        method="BCa",
        random_state=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval


def test_the_interval_is_scipys_paired_bca_bootstrap_with_a_fixed_seed():
    frame = paired_runs(8)
    row = paired_differences(frame, "carbon_kg").iloc[0]
    assert (row["change_pct_low"], row["change_pct_high"]) == pytest.approx(
        tuple(scipy_bootstrap(frame, paired=True))
    )
    assert row["change_pct_method"] == "BCa"
    again = paired_differences(frame, "carbon_kg").iloc[0]
    assert (again["change_pct_low"], again["change_pct_high"]) == (
        row["change_pct_low"],
        row["change_pct_high"],
    )


def test_a_comparisons_interval_does_not_depend_on_the_other_comparisons_in_the_table():
    frame = paired_runs(8)
    alone = paired_differences(frame, "carbon_kg")
    more = frame[frame["policy"] == "green"].assign(
        policy="greener", carbon_kg=lambda f: f["carbon_kg"] * 0.9
    )
    together = paired_differences(pd.concat([more, frame]), "carbon_kg")
    columns = ["change_pct_low", "change_pct_high"]
    pd.testing.assert_frame_equal(
        together.loc[together["policy"] == "green", columns].reset_index(drop=True), alone[columns]
    )


def test_pairing_by_seed_makes_the_interval_far_narrower_than_an_unpaired_one():
    frame = paired_runs(10)  # the seed effect (sd ~50%) dwarfs the policy's noise (5 kg)
    row = paired_differences(frame, "carbon_kg").iloc[0]
    unpaired = scipy_bootstrap(frame, paired=False)
    assert row["change_pct_low"] <= TRUE_CHANGE_PCT <= row["change_pct_high"]
    assert unpaired.low <= TRUE_CHANGE_PCT <= unpaired.high
    paired_width = row["change_pct_high"] - row["change_pct_low"]
    assert paired_width < (unpaired.high - unpaired.low) / 10


@pytest.mark.parametrize(
    ("green", "base", "expected"),
    [
        ([90.0], [100.0], (np.nan, np.nan, None)),  # one seed: no interval
        ([90.0, 180.0, 45.0], [0.0, 0.0, 0.0], (np.nan, np.nan, None)),  # no relative change
        (
            [90.0, 180.0, 45.0],
            [0.0, 200.0, 50.0],
            (np.nan, np.nan, None),
        ),  # some resamples lack one
        ([90.0, 180.0, 45.0], [100.0, 200.0, 50.0], (-10.0, -10.0, "percentile")),  # all alike
        ([100.0, 200.0, 50.0], [100.0, 200.0, 50.0], (0.0, 0.0, "percentile")),  # no difference
    ],
)
def test_without_spread_or_without_a_baseline_the_interval_is_degenerate_or_missing_silently(
    green, base, expected
):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high, method = change_interval(np.array(green), np.array(base))
    assert (low, high) == pytest.approx(expected[:2], nan_ok=True, abs=1e-9)
    assert method == expected[2]


def test_the_paired_table_of_a_real_sweep_has_the_bootstrap_interval(tmp_path):
    sim.sweep(
        REPO / "scenarios" / "quickstart.toml",
        {"policy": ["run_now", "wait_awhile"]},
        seeds=[0, 1, 2],
        out=tmp_path,
        overrides=["duration_h=24", "demand_response=[]"],
        workers=1,
    )
    table = paired_differences(sim.load_sweep(tmp_path), "carbon_total_kg", baseline="run_now")
    row = table.set_index("policy").loc["wait_awhile"]
    assert row["pairs"] == 3
    assert row["change_pct_low"] <= row["change_pct"] <= row["change_pct_high"]
    assert row["change_pct_method"] in ("BCa", "percentile")
    assert table.attrs["change_pct_interval"] == {
        "level": 0.95,
        "kind": "paired bootstrap over seeds of the ratio of means",
        "methods": ["BCa", "percentile"],
        "resamples": 9999,
        "seed": BOOTSTRAP_SEED,
    }
