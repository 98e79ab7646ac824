"""The services' power from their deployments' logs: per step of the services table
(`per_step`) and merged into the sites' power table (`with_extra_power`), each the same
numbers as the simple way on varied logs."""

from __future__ import annotations

from array import array
from datetime import datetime
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from sim.engine.service_power import StepEnergy, per_step, with_extra_power
from sim.grid.pue import PueProfile
from sim.grid.signal import CarbonSignal
from sim.util.records import INSTANT_S, PowerLog, in_instants, instant_starts

START = datetime(2024, 6, 1)
STEP_S = 60.0


def per_site(power: pd.DataFrame, sites, levels) -> pd.DataFrame:
    """The simple way: per site the union of its times and its deployments' log times,
    a frame per site, and the concatenation put in the canonical order."""
    parts = []
    for site in sites:
        rows = power[power["site"] == site.name]
        mine = [lv for service in levels for lv in service if lv.site is site]
        if not mine:
            parts.append(rows)
            continue
        t_site = rows["time_s"].to_numpy()
        times = np.union1d(t_site, np.concatenate([np.asarray(lv.time_s) for lv in mine]))
        new = instant_starts(times)
        read_s = times[np.r_[np.flatnonzero(new)[1:], len(times)] - 1]
        times = times[new]
        k = np.searchsorted(t_site, read_s, side="right") - 1
        extra = np.zeros(len(times))
        for lv in mine:
            j = np.searchsorted(np.asarray(lv.time_s), read_s, side="right") - 1
            extra += np.where(j >= 0, np.asarray(lv.extra_w)[np.maximum(j, 0)], 0.0)
        parts.append(
            pd.DataFrame(
                {
                    "time_s": times,
                    "site": pd.Categorical.from_codes(
                        np.full(len(times), site.index), categories=power["site"].cat.categories
                    ),
                    "it_w": rows["it_w"].to_numpy()[k] + extra,
                    "facility_w": rows["facility_w"].to_numpy()[k]
                    + extra * site.pue.values_at(read_s),
                    "busy_gpus": rows["busy_gpus"].to_numpy()[k],
                }
            )
        )
    merged = pd.concat(parts, ignore_index=True)
    order, time_s = in_instants(merged["time_s"].to_numpy(), merged["site"].cat.codes.to_numpy())
    merged = merged.iloc[order].reset_index(drop=True)
    merged["time_s"] = time_s
    return merged


def varied_run(seed: int):
    """A power table and deployments' logs over a few sites: times on a shared step grid
    (simultaneous across sites and logs), off it, a last bit or less than an instant apart
    (one instant), logs that start late or hold one row, and sites without any."""
    rng = np.random.default_rng(seed)
    names = ["frankfurt", "paris", "london", "madrid"][: rng.integers(1, 5)]
    sites = [
        SimpleNamespace(index=i, name=name, pue=PueProfile(list(rng.uniform(1.1, 1.6, 24)), START))
        for i, name in enumerate(names)
    ]
    horizon_s = STEP_S * rng.integers(5, 200)
    grid_s = np.arange(0.0, horizon_s, STEP_S)

    def some_times(n: int) -> np.ndarray:
        """`n` increasing times: on the grid, anywhere, or within an instant of the grid."""
        t = np.concatenate(
            [
                rng.choice(grid_s, n),
                rng.uniform(0.0, horizon_s, n),
                rng.choice(grid_s, n) + rng.choice([1e-11, 0.5 * INSTANT_S, INSTANT_S], n),
            ]
        )
        return np.unique(rng.choice(t, n))

    log = PowerLog(n_sites=len(sites))
    for i in range(len(sites)):
        log.record(0.0, i, 1000.0, 1300.0, 0)
    rows = [(t, i) for i in range(len(sites)) for t in some_times(rng.integers(0, 30))]
    for t, i in sorted(rows):
        log.record(t, i, rng.uniform(0, 5e3), rng.uniform(0, 7e3), int(rng.integers(0, 9)))
    power = log.drain_frame(names)

    def deployment(site, times_s: np.ndarray) -> SimpleNamespace:
        return SimpleNamespace(
            site=site,
            time_s=array("d", times_s),
            extra_w=array("d", rng.uniform(0, 3e3, len(times_s))),
        )

    levels = []
    for _ in range(rng.integers(1, 5)):
        service = []
        for site in rng.choice(sites, rng.integers(0, len(sites) + 1), replace=False):
            kind = rng.integers(4)
            times_s = [grid_s, some_times(40), np.array([rng.choice(grid_s)]), grid_s[3:]][kind]
            service.append(deployment(site, times_s))
        levels.append(service)
    return power, sites, levels


@pytest.mark.parametrize("seed", range(40))
def test_the_merge_is_the_per_site_table_row_for_row(seed):
    power, sites, levels = varied_run(seed)
    expected = per_site(power, sites, levels)
    merged = with_extra_power(power, sites, levels)
    pd.testing.assert_frame_equal(merged, expected, check_exact=True)
    assert merged.dtypes.to_dict() == power.dtypes.to_dict()


def test_a_deployment_adds_its_power_on_its_site_from_its_first_row():
    power, sites, _ = varied_run(0)
    site = sites[0]
    quiet = power[power["site"] == site.name]
    level = SimpleNamespace(site=site, time_s=array("d", [120.0]), extra_w=array("d", [500.0]))
    merged = with_extra_power(power, sites, [[level]])
    here = merged[merged["site"] == site.name]
    before = here["time_s"] < 120.0
    assert here[before]["it_w"].tolist() == quiet[quiet["time_s"] < 120.0]["it_w"].tolist()
    after = here[~before]
    k = np.searchsorted(quiet["time_s"], after["time_s"], side="right") - 1
    assert np.allclose(after["it_w"], quiet["it_w"].to_numpy()[k] + 500.0)
    others = merged[merged["site"] != site.name].reset_index(drop=True)
    assert others.equals(power[power["site"] != site.name].reset_index(drop=True))


def per_step_simple(level, edges_s: np.ndarray, horizon_s: float) -> StepEnergy:
    """The simple way: each cumulative function at the log rows' starts and ends apart."""
    t = np.asarray(level.time_s)
    t_next = np.append(t[1:], horizon_s)
    k = np.clip(np.searchsorted(t, edges_s, side="right") - 1, 0, len(t) - 1)
    t_k, from_s = t[k], np.maximum(edges_s, t[k])

    def increments(fn):
        return fn(t_next) - fn(t), fn(from_s) - fn(t_k)

    def integral(weights, rows, to_edge):
        before = np.concatenate([[0.0], np.cumsum(weights * rows)])
        return np.diff(before[k] + weights[k] * to_edge)

    pue = increments(level.site.pue.cumulative)
    it_w = level.it_w()
    floor_w = level.pool.idle_w + level.pool.host_w
    return StepEnergy(
        energy_kwh=integral(it_w, *pue) / 3.6e6,
        carbon_kg=integral(it_w, *increments(level.site.facility_ci.cumulative)) / 3.6e9,
        gpu_s=integral(np.asarray(level.gpus_log, dtype=float), t_next - t, from_s - t_k),
        idle_kwh=integral(np.asarray(level.idle_gpus_log) * floor_w, *pue) / 3.6e6,
        loading_kwh=integral(np.asarray(level.loading_w_log), *pue) / 3.6e6,
    )


@pytest.mark.parametrize("seed", range(20))
def test_the_energy_per_step_is_the_simple_ways(seed):
    rng = np.random.default_rng(seed)
    horizon_s = STEP_S * rng.integers(3, 300) + rng.choice([0.0, 17.5])
    edges_s = np.append(STEP_S * np.arange(np.ceil(horizon_s / STEP_S)), horizon_s)
    pue = PueProfile(1.3 if seed % 2 else list(rng.uniform(1.1, 1.6, 24)), START)
    hours_s = 3600.0 * np.arange(np.ceil(horizon_s / 3600.0))
    signal = CarbonSignal(hours_s, list(rng.uniform(50, 500, len(hours_s))), end_s=horizon_s)
    site = SimpleNamespace(pue=pue, facility_ci=pue.times(signal))
    grid_s = edges_s[:-1]
    times_s = [
        grid_s,
        np.unique(rng.uniform(0.0, horizon_s, rng.integers(1, 50))),
        grid_s[rng.integers(len(grid_s)) :],
        np.array([0.0]),
    ][rng.integers(4)]
    n = len(times_s)
    gpus = rng.integers(0, 9, n)
    extra_w = rng.uniform(0, 5e3, n)
    level = SimpleNamespace(
        site=site,
        pool=SimpleNamespace(idle_w=rng.uniform(50, 100), host_w=rng.uniform(0, 200)),
        time_s=array("d", times_s),
        gpus_log=array("i", gpus),
        idle_gpus_log=array("i", rng.integers(0, gpus + 1)),
        loading_w_log=array("d", rng.uniform(0, 1e3, n)),
        it_w=lambda: gpus * 250.0 + extra_w,
    )
    got, expected = per_step(level, edges_s, horizon_s), per_step_simple(level, edges_s, horizon_s)
    for name in StepEnergy._fields:
        assert np.array_equal(getattr(got, name), getattr(expected, name)), name
