"""The fleet: every site's GPU pools, IT and facility power, PUE steps, powered-off nodes
and site-wide caps, and the site results computed from the power log.

The GPU ledger itself (free GPUs per pool, busy nodes, IT power) lives in
`sim.engine.ledger.Site`; this component owns the sites, logs their power, runs the timers that
switch idle nodes off and that log facility power where an hourly PUE steps, and answers
"which site is that" for every other component.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.component import Component
from sim.engine.ledger import GpuParts, Pool, Site
from sim.engine.lifetimes import pool_server_kg_by_group
from sim.engine.servers import ServerBooks
from sim.errors import PolicyError
from sim.grid import CarbonSignal
from sim.market.billing import SiteTariff, demand_charge, site_tariff
from sim.models.servers import EMBODIED_GROUPS
from sim.results import (
    ResultParts,
    busy_gpu_s,
    site_energy_cost,
    site_energy_kwh,
    site_operational_carbon_kg,
)
from sim.util.records import PowerLog

if TYPE_CHECKING:
    from sim.engine.component import Core

__all__ = ["Fleet"]


class Fleet(Component):
    """The sites of a run and their power."""

    name = "fleet"

    __slots__ = (
        "_core",
        "names",
        "power_log",
        "sites",
        "by_name",
        "has_capacity_kinds",
        "decision_signals",
        "tariffs",
        "has_servers",
        "_waiting_on",
    )

    def __init__(
        self,
        core: Core,
        *,
        signals: list[CarbonSignal],
        decision_signals: list[CarbonSignal | None],
    ):
        self._core = core
        scenario = core.scenario
        self.names: list[str] = scenario.site_names()
        self.power_log = PowerLog(len(scenario.sites))
        """Per site, every change of IT and facility power and busy GPUs (a step function)."""
        self.sites = [
            Site(i, cfg, scenario.start, signals[i], self.power_log)
            for i, cfg in enumerate(scenario.sites)
        ]
        self.by_name = {s.name: s for s in self.sites}
        """The sites by name."""
        self.has_capacity_kinds = any(p.capacity is not None for s in self.sites for p in s.pools)
        """Some pool is split into capacity kinds (reserved, on-demand, spot)."""
        self.decision_signals = decision_signals
        """Per site, the separate signal its decisions see (`sites.decision_carbon`), or
        None: decisions see the signal it is charged on."""
        self.tariffs: list[SiteTariff | None] = [
            site_tariff(
                site, i, scenario.start, scenario.horizon_s, scenario.years, scenario.currency
            )
            for i, site in enumerate(scenario.sites)
        ]
        """Per site, its electricity tariff for the run (None: not billed)."""
        self.has_servers = any(p.servers is not None for s in self.sites for p in s.pools)
        """Some pool is made of servers (docs/placement.md, "In a run")."""
        self._waiting_on: dict[int, ServerBooks] = {}
        """Per queued job metered for fragmentation: the pool of servers it is metered on."""

    def decision_signal(self, site: Site) -> CarbonSignal:
        """The carbon signal `site`'s decisions see: its `decision_carbon`, else the signal
        it is charged on."""
        return self.decision_signals[site.index] or site.signal

    def site(self, name: str, asker: object = None) -> Site:
        """The site called `name`; PolicyError naming the sites if there is none (and
        `asker`, the action or query, if given)."""
        site = self.by_name.get(name)
        if site is None:
            prefix = "" if asker is None else f"{asker}: "
            raise PolicyError(f"{prefix}unknown site {name!r} (sites: {self.names})")
        return site

    def pool(self, site: Site, model: str | None, asker: str) -> Pool:
        """`site`'s pool of `model` (None: its first); PolicyError naming `asker` if none."""
        pool = site.pools[0] if model is None else site.pool(model)
        if pool is None:
            raise PolicyError(f"{asker}: site {site.name} has no {model} GPUs")
        return pool

    @property
    def largest_pool(self) -> int:
        """GPUs of the largest pool a whole-GPU job can use (partitioned pools excluded)."""
        return max((p.count for s in self.sites for p in s.pools if p.mig is None), default=0)

    # --- timers ----------------------------------------------------------------------------

    def start(self) -> None:
        env = self._core.env
        for site in self.sites:
            if site.power_off is not None:  # every node is idle at the start
                self.switch_off_later(site)
        if any(s.pue.constant is None for s in self.sites):
            env.process(self._pue_steps())

    def _pue_steps(self):
        """Log facility power wherever a site's hourly PUE changes."""
        core = self._core
        steps = sorted(
            {(t, s.index) for s in self.sites for t in s.pue.steps_between(0.0, core.horizon_s)}
        )
        for t, i in steps:
            if t > core.env.now:
                yield core.env.timeout(t - core.env.now)
            self.sites[i].log_power(t)
            for component in core.hooked("pue_stepped"):
                component.pue_stepped(i, t)

    def release(self, site: Site, pool: Pool, gpus: int, draw_w: float, job: int = -1) -> None:
        """Free `gpus` GPUs of `pool` that drew `draw_w` W each (`job`'s, on a pool of
        servers); nodes left idle switch off after the site's `power_off.idle_s`."""
        if site.release(self._core.env.now, pool, gpus, draw_w, job):
            self.switch_off_later(site)

    def release_part(
        self, site: Site, pool: Pool, parts: GpuParts, j: Hashable, draw_w: float
    ) -> None:
        """Job `j` (or another holder: an LLM replica on a MIG slice), drawing its share of
        `draw_w` W, leaves its part of a GPU of `pool` in `parts` (a shared GPU or a MIG
        slice; the GPU is free again if it was the last holder there; see `release`)."""
        if site.release_part(self._core.env.now, pool, parts, j, draw_w):
            self.switch_off_later(site)

    # --- fragmentation waits ---------------------------------------------------------------

    def queued(self, j: int) -> None:
        """Job `j` joined the queue: a job on whole GPUs is metered for fragmentation on
        the first pool of servers of its origin site that it may run on (one pool per job,
        so no wait counts twice; docs/placement.md, "In a run")."""
        jobs = self._core.jobs
        if jobs.mig_profile[j]:
            return
        models = jobs.gpu_models_of(j)
        pools = self.sites[jobs.origin_site[j]].pools
        books = next(
            (
                p.servers
                for p in pools
                if p.servers is not None and (not models or p.model in models)
            ),
            None,
        )
        if books is not None:
            books.meter.wait(self._core.env.now, j, int(jobs.gpus[j]))
            self._waiting_on[j] = books

    def dequeued(self, j: int) -> None:
        """Job `j` left the queue (started, deferred or rejected)."""
        books = self._waiting_on.pop(j, None)
        if books is not None:
            books.meter.leave(self._core.env.now, j)

    def switch_off_later(self, site: Site) -> None:
        """Switch off the site's nodes still idle after its `power_off.idle_s`."""
        assert site.power_off is not None
        timer = self._core.env.timeout(site.power_off.idle_s)
        timer.callbacks.append(lambda _e: self._switch_off_check(site))

    def _switch_off_check(self, site: Site) -> None:
        now = self._core.env.now
        off = site.switch_off_idle(now)
        if off:
            self._core.events.append(now, "power_off", -1, site.index, value=off)

    @staticmethod
    def needs_wake(site: Site, pool: Pool, gpus: int) -> bool:
        """True if `gpus` more busy GPUs of `pool` need a powered-off node (booting, even
        for a `wake_s` of 0, holds them at idle power)."""
        return site.power_off is not None and pool.nodes_to_wake(gpus) > 0

    @classmethod
    def wake_s(cls, site: Site, pool: Pool, gpus: int) -> float:
        """Boot time before `gpus` more busy GPUs of `pool` can compute, s: the site's
        `power_off.wake_s` if they need a powered-off node, else 0."""
        if site.power_off is None or not cls.needs_wake(site, pool, gpus):
            return 0.0
        return site.power_off.wake_s

    def set_cap(self, site: Site, watts: float | None) -> None:
        """Cap every GPU of `site`, W (None: no cap): jobs without a cap of their own and
        later starts run under it."""
        site.cap_w = watts
        site.runtime_version += 1
        now = self._core.env.now
        self._core.events.append(
            now, "setcap", -1, site.index, math.nan if watts is None else watts
        )

    def mean_facility_kw(self, site: Site, t0_s: float, t1_s: float) -> float:
        """Mean facility power of `site` over [t0, t1] (t0 clipped at 0), kW; the current
        power if the window is empty."""
        t0_s = max(0.0, t0_s)
        if t1_s <= t0_s:
            return site.facility_w(t1_s) / 1000.0
        log = self.power_log
        energy_ws, t_next, i = 0.0, t1_s, len(log.time_s) - 1
        while i >= 0:
            if log.site[i] == site.index and log.time_s[i] < t1_s:
                t = max(log.time_s[i], t0_s)
                energy_ws += log.facility_w[i] * (t_next - t)
                t_next = t
                if t <= t0_s:
                    break
            i -= 1
        return energy_ws / (t1_s - t0_s) / 1000.0

    # --- results ---------------------------------------------------------------------------

    def close(self, now_s: float) -> None:
        """The jobs still queued at the horizon stop waiting."""
        for _, _, books in self._server_books():
            books.meter.close(now_s)
        self._waiting_on.clear()

    def _server_books(self) -> list[tuple[str, str, ServerBooks]]:
        """(site, GPU model, its servers) of every pool of servers, in scenario order."""
        return [(s.name, p.model, p.servers) for s in self.sites for p in s.pools if p.servers]

    def write_servers(self, out: ResultParts) -> None:
        """Summary `fragmentation_wait_h` (None without servers) and, in a run with servers,
        the `servers` table: free GPUs by server after each change (site, pool, time_s,
        server, free_gpus; every server starts with all its GPUs free at 0, no row)."""
        books = self._server_books()
        out.summary["fragmentation_wait_h"] = (
            math.fsum(b.meter.fragmentation_wait_h() for _, _, b in books) if books else None
        )
        if not books:
            return
        out.tables["servers"] = pd.concat(
            [
                pd.DataFrame(
                    {
                        "site": site,
                        "pool": model,
                        "time_s": np.frombuffer(b.log.time_s, dtype=np.float64),
                        "server": np.frombuffer(b.log.server, dtype=np.int32),
                        "free_gpus": np.frombuffer(b.log.free_gpus, dtype=np.int32),
                    }
                )
                for site, model, b in books
            ],
            ignore_index=True,
        )

    def write_results(self, out: ResultParts) -> None:
        """Site energy (IT, facility, idle), operational carbon and GPU utilisation, exact
        integrals of the power log; the `sites` table; installed embodied carbon; the
        servers' results (`write_servers`)."""
        self.write_servers(out)
        core, power, names = self._core, out.power, self.names
        horizon_s = core.horizon_s
        energy_it = site_energy_kwh(power, names, horizon_s, "it_w")
        energy_facility = site_energy_kwh(power, names, horizon_s, "facility_w")
        carbon = site_operational_carbon_kg(
            power, names, [s.facility_ci for s in self.sites], horizon_s
        )
        gpus = np.array([s.total_gpus for s in self.sites])
        busy = np.array([busy_gpu_s(power, [n], horizon_s) for n in names])
        energy = np.array([energy_facility[n] for n in names])
        carbon_kg = np.array([carbon[n] for n in names])
        decided = any(d is not None for d in self.decision_signals)
        if decided:  # the same integral under the signals the sites decided on
            decision_ci = [s.pue.times(self.decision_signal(s)) for s in self.sites]
            decision = site_operational_carbon_kg(power, names, decision_ci, horizon_s)
        with np.errstate(invalid="ignore", divide="ignore"):
            intensity = np.where(energy > 0, carbon_kg * 1000.0 / energy, np.nan)
        ran_at = out.job_columns["site"]
        sites = pd.DataFrame(
            {
                "site": names,
                "gpus": gpus,
                "gpu_utilization": busy / (gpus * horizon_s),
                "energy_facility_kwh": energy,
                "carbon_operational_kg": carbon_kg,
                "carbon_intensity_g_per_kwh": intensity,
                "jobs_run": [int((ran_at == n).sum()) for n in names],
            }
        )
        if decided:
            sites["carbon_operational_decision_kg"] = [decision[n] for n in names]
        self.write_costs(out, sites, out.power)
        out.tables["sites"] = sites
        out.summary["energy_it_kwh"] = float(sum(energy_it.values()))
        out.summary["energy_facility_kwh"] = float(sites["energy_facility_kwh"].sum())
        out.summary["energy_idle_kwh"] = float(
            sum(s.idle_energy_kwh(horizon_s) for s in self.sites)
        )
        out.summary["carbon_operational_kg"] = float(sites["carbon_operational_kg"].sum())
        out.summary["carbon_operational_decision_kg"] = (
            float(sites["carbon_operational_decision_kg"].sum()) if decided else None
        )
        out.summary["gpu_utilization"] = float(
            (sites["gpu_utilization"] * sites["gpus"]).sum() / sites["gpus"].sum()
        )
        server_kg = self.write_server_embodied(out, sites, horizon_s)
        self.write_server_power(sites, horizon_s)
        if core.scenario.embodied == "installed":
            gpus_kg = sum(
                p.embodied.kg(p.count * horizon_s, 0.0, horizon_s)
                for site in self.sites
                for p in site.pools
                if p.servers is None
            )
            out.summary["carbon_embodied_kg"] = float(gpus_kg + server_kg)

    def write_server_embodied(
        self, out: ResultParts, sites: pd.DataFrame, horizon_s: float
    ) -> float:
        """In a run with servers, the sites table's `embodied_<group>_kg` columns (group:
        cpu, dram, storage, gpu, other; `sim.models.servers.EMBODIED_GROUPS`): the
        embodied carbon, kgCO2e, that each site's servers carry over the horizon, each
        component amortised over its own lifetime (0 at a site without servers), and the
        summary's keys of the same names, their sums over the sites (None without
        servers). Returns the servers' total, kgCO2e: the sum of every site's columns (0
        without servers)."""
        for group in EMBODIED_GROUPS:
            out.summary[f"embodied_{group}_kg"] = None
        if not self.has_servers:
            return 0.0
        columns = {g: np.zeros(len(self.sites)) for g in EMBODIED_GROUPS}
        for i, config in enumerate(self._core.scenario.sites):
            for pool in config.gpus:
                if pool.servers is None:
                    continue
                by_group = pool_server_kg_by_group(pool, self._core.scenario.start, 0.0, horizon_s)
                for group, group_kg in by_group.items():
                    columns[group][i] += group_kg
        for group, column in columns.items():
            sites[f"embodied_{group}_kg"] = column
            out.summary[f"embodied_{group}_kg"] = math.fsum(float(kg) for kg in column)
        return math.fsum(float(kg) for column in columns.values() for kg in column)

    def write_server_power(self, sites: pd.DataFrame, horizon_s: float) -> None:
        """In a run with servers, the sites table's `energy_host_kwh` (the IT energy of its
        servers' hosts while powered, kWh) and `servers_off_h` (its servers' time switched
        off, server-hours) columns; 0 at a site without servers (docs/servers.md)."""
        if not self.has_servers:
            return
        host_kwh, off_h = np.zeros(len(self.sites)), np.zeros(len(self.sites))
        for i, site in enumerate(self.sites):
            for pool in site.pools:
                if pool.servers is not None:
                    host_kwh[i] += math.fsum(pool.servers.power.host_kwh(horizon_s))
                    off_h[i] += math.fsum(pool.servers.power.off_h(horizon_s))
        sites["energy_host_kwh"] = host_kwh
        sites["servers_off_h"] = off_h

    def write_costs(self, out: ResultParts, sites: pd.DataFrame, power: pd.DataFrame) -> None:
        """Electricity bills on the metered `power` (a power table's `time_s`, `site`,
        `facility_w`: here the facility power; a site with on-site energy is billed on its
        grid import, `OnsiteEnergy.metered_power`, which writes the bills again): per-site
        `cost_energy` and `cost_demand_charge` columns in a run with a tariff (NaN where a
        site has none), their sums over the tariffed sites as summary keys (None if no site
        has one), the tariffs in meta.json."""
        core, names = self._core, self.names
        billed = [i for i, t in enumerate(self.tariffs) if t is not None]
        energy = np.full(len(names), np.nan)
        demand = np.full(len(names), np.nan)
        if billed:
            horizon_s = core.horizon_s
            curves = [t.energy_price for t in self.tariffs if t is not None]
            costs = site_energy_cost(power, [names[i] for i in billed], curves, horizon_s)
            for i in billed:
                tariff = self.tariffs[i]
                assert tariff is not None
                rows = power[power["site"] == names[i]]
                energy[i] = costs[names[i]]
                demand[i] = demand_charge(
                    rows["time_s"].to_numpy(),
                    rows["facility_w"].to_numpy(),
                    horizon_s,
                    core.scenario.start,
                    tariff,
                )
        if billed:  # the columns exist only in billed runs: others keep their tables
            sites["cost_energy"] = energy
            sites["cost_demand_charge"] = demand
        out.summary["cost_energy"] = float(energy[billed].sum()) if billed else None
        out.summary["cost_demand_charge"] = float(demand[billed].sum()) if billed else None
        out.meta["electricity_tariffs"] = (
            {
                "currency": core.scenario.currency,
                "sites": {names[i]: t.meta for i, t in enumerate(self.tariffs) if t is not None},
                "sites_without_tariff": [names[i] for i, t in enumerate(self.tariffs) if t is None],
            }
            if billed
            else None
        )
