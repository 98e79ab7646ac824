"""The batch engine's accounting: a `Schedule`'s runs written into the engine's components
as the event engine would have left them at the horizon (job states and times, the runs'
charges, the site's power log and idle energy, the event log), by vectorised passes; the
results are then built by the engine's own `build_results`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.engine.batch.plan import Schedule
from sim.engine.jobs import COMPLETED, DEFERRED, RUNNING
from sim.engine.run_charges import GS_PER_KGH, WS_PER_KWH

if TYPE_CHECKING:
    from sim.engine.core import Engine

__all__ = ["account"]


def account(engine: Engine, plan: Schedule) -> None:
    """Leave `engine`'s components as the event engine would at the horizon, before their
    `close`: `plan`'s runs on the one site's one pool, charged up to their end or the
    horizon."""
    horizon = engine.horizon_s
    book, runs, charges = engine.book, engine.runs, engine.runs.charges
    site = engine.fleet.sites[0]
    pool = site.pools[0]
    started = ~np.isnan(plan.start_s)
    done = started & (plan.end_s < horizon)
    deferred = ~np.isnan(plan.until_s)
    state = np.frombuffer(book.state, dtype=np.int8)
    state[plan.arrived] = DEFERRED
    state[started] = RUNNING
    state[done] = COMPLETED
    np.frombuffer(book.start_s)[started] = plan.start_s[started]
    np.frombuffer(book.end_s)[done] = plan.end_s[done]
    np.frombuffer(book.site_of, dtype=np.int16)[started] = site.index
    for j in np.flatnonzero(started).tolist():
        runs.model[j] = pool.model
    np.frombuffer(runs.remaining_gpu_s)[done] = 0.0
    # The runs' charges: one segment each, [start, end or the horizon].
    ran = np.flatnonzero(started)
    t0 = plan.start_s[ran]
    t1 = np.minimum(plan.end_s[ran], horizon)
    gpus = np.asarray(charges.gpu_share)[ran]
    it_w = gpus * (plan.draw_w[ran] + pool.host_w)
    pue = site.pue.constant
    assert pue is not None  # `refusal`: no hourly PUE
    np.frombuffer(charges.energy_kwh)[ran] = it_w * (pue * (t1 - t0)) / WS_PER_KWH
    np.frombuffer(charges.carbon_kg)[ran] = it_w * site.facility_ci.integrals(t0, t1) / GS_PER_KGH
    gpu_s = gpus * (t1 - t0)
    np.frombuffer(charges.gpu_s)[ran] = gpu_s
    price = engine.prices.charged(pool.model)
    np.frombuffer(charges.cost)[ran] = np.where(t1 > t0, gpu_s / 3600.0 * price, 0.0)
    np.frombuffer(charges.embodied_kg)[ran] = pool.embodied.kg(gpu_s, t0, t1)
    _log_power(engine, plan, ran, t1)
    _log_events(engine, plan, deferred, ran)


def _log_power(engine: Engine, plan: Schedule, ran: np.ndarray, t1: np.ndarray) -> None:
    """The site's power log, busy GPUs, IT power and the pool's idle energy, from its
    starts and ends before the horizon."""
    site = engine.fleet.sites[0]
    pool = site.pools[0]
    gpus = engine.jobs.gpus[ran].astype(np.int64)
    delta_w = gpus * (plan.draw_w[ran] - pool.idle_w)
    ends = plan.end_s[ran] < engine.horizon_s
    times = np.concatenate(([0.0], plan.start_s[ran], t1[ends]))
    busy_step = np.concatenate(([0], gpus, -gpus[ends]))
    watt_step = np.concatenate(([site.it_w], delta_w, -delta_w[ends]))
    order = np.argsort(times, kind="stable")
    times, busy, it_w = times[order], np.cumsum(busy_step[order]), np.cumsum(watt_step[order])
    pue = site.pue.constant
    assert pue is not None
    engine.fleet.power_log.load_levels(site.index, times, it_w, it_w * pue, busy)
    # Pool._accrue at each start and end: (unheld W x PUE x s) / 3600, summed in order
    unheld_w = (pool.count - busy[:-1]) * (pool.idle_w + pool.host_w)
    accrued_wh = unheld_w * (pue * np.diff(times)) / 3600.0
    pool._idle_wh = float(np.cumsum(np.concatenate(([0.0], accrued_wh)))[-1])
    pool._since_s = float(times[-1])
    pool.held = int(busy[-1])
    pool.free = pool.count - pool.held
    site.busy_gpus = int(busy[-1])
    site.it_w = float(it_w[-1])


def _log_events(engine: Engine, plan: Schedule, deferred: np.ndarray, ran: np.ndarray) -> None:
    """The jobs' events: submit, defer, ready, start, finish (the `unfinished` ones are the
    job book's `close`)."""
    events, horizon = engine.events, engine.horizon_s
    jobs = engine.jobs
    site = engine.fleet.sites[0]
    arrived = np.flatnonzero(plan.arrived)
    events.extend(jobs.submit_s[arrived], "submit", arrived)
    put_off = np.flatnonzero(deferred & plan.arrived)
    events.extend(plan.now_s[put_off], "defer", put_off, value=plan.until_s[put_off])
    ready = np.flatnonzero(deferred & ~np.isnan(plan.start_s))
    events.extend(plan.start_s[ready], "ready", ready)
    events.extend(plan.start_s[ran], "start", ran, site.index, detail=site.pools[0].model)
    done = ran[plan.end_s[ran] < horizon]
    events.extend(plan.end_s[done], "finish", done, site.index)
