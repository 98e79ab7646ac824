"""What the jobs' runs cost: per job, the facility energy, operational and embodied carbon,
GPU time and price of the GPUs it held, charged per segment of constant power (power x the
exact integral of PUE, and of PUE x carbon intensity, over the segment)."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim.engine.ledger import Pool, Site
from sim.results import ResultParts

if TYPE_CHECKING:
    from sim.engine.component import Core

__all__ = ["GS_PER_KGH", "RunCharges", "WS_PER_KWH"]

WS_PER_KWH = 3.6e6
GS_PER_KGH = 3.6e9  # (g/kWh x W x s) -> kg


class RunCharges:
    """The jobs' charges, columns indexed by job (typed arrays), for the GPUs each job is
    charged for (`gpu_share`: `Runs`' column, which `Runs` changes in place)."""

    __slots__ = (
        "_core",
        "gpu_share",
        "energy_kwh",
        "carbon_kg",
        "embodied_kg",
        "gpu_s",
        "cost",
        "spot_gpu_s",
    )

    def __init__(self, core: Core, gpu_share: array):
        self._core = core
        self.gpu_share = gpu_share
        n = len(gpu_share)
        self.energy_kwh = array("d", [0.0]) * n
        """Facility energy of the job's GPUs and their host share, kWh."""
        self.carbon_kg = array("d", [0.0]) * n
        """Operational carbon of that energy, kg."""
        self.embodied_kg = array("d", [0.0]) * n
        """Embodied carbon of the GPU-hours the job held (allocated accounting), kg."""
        self.gpu_s = array("d", [0.0]) * n
        """GPU-seconds the job held (computing, held, or writing a checkpoint), s."""
        self.cost = array("d", [0.0]) * n
        """Each job's compute cost, the scenario's currency (NaN: a GPU model without price)."""
        self.spot_gpu_s: dict[int, float] = {}
        """Spot GPU time held per job that held spot GPUs, GPU-s."""

    def charge(
        self,
        j: int,
        site: Site,
        pool: Pool,
        draw_w: float,
        t0: float,
        t1: float,
        *,
        write: bool = False,
    ) -> float:
        """Charge `j` for its GPUs (a fractional job: its share of one; a MIG job: its
        slice's SM share of one) on `pool` drawing `draw_w` W each over [t0, t1] s, with their
        host share: energy, carbon, GPU time, its price, embodied carbon. Returns the facility
        energy, kWh. With `write`, the GPUs its checkpoint write holds (of a split pool: the
        set it took first, priced by kind with `GpuPrices.cost_per_h`), else its run's (the set it
        took last; `CapacityKinds.holding`)."""
        # a MIG job writing its checkpoint on a pool it left: its slice there, not the next
        gpus = pool.mig.share_of(j) if pool.mig is not None and j in pool.mig else self.gpu_share[j]
        it_w = gpus * (draw_w + pool.host_w)
        energy_kwh = it_w * site.pue.integral(t0, t1) / WS_PER_KWH
        self.energy_kwh[j] += energy_kwh
        self.carbon_kg[j] += it_w * site.facility_ci.integral(t0, t1) / GS_PER_KGH
        self.gpu_s[j] += gpus * (t1 - t0)
        if t1 > t0 and pool.capacity is None:
            self.cost[j] += gpus * (t1 - t0) / 3600.0 * self._core.prices.charged(pool.model)
        elif t1 > t0:  # reserved, on-demand and spot GPUs: each kind at its price
            assert pool.capacity is not None
            held = pool.capacity.holding(j, newest=not write)
            self.cost[j] += (t1 - t0) / 3600.0 * self._core.prices.cost_per_h(pool, held)
            spot = held.get("spot", 0)
            if spot:
                self.spot_gpu_s[j] = self.spot_gpu_s.get(j, 0.0) + spot * (t1 - t0)
        self.embodied_kg[j] += float(pool.embodied.kg(gpus * (t1 - t0), t0, t1))
        return energy_kwh

    def write_results(self, out: ResultParts) -> None:
        """Columns `gpu_h`, `cost`, `energy_kwh`, `carbon_kg`, `embodied_kg`; summary keys
        `energy_jobs_kwh`, `cost_compute` (the jobs' part) and, with allocated embodied
        carbon, `carbon_embodied_kg`."""
        energy = np.asarray(self.energy_kwh)
        embodied = np.asarray(self.embodied_kg)
        out.job_columns.update(
            gpu_h=np.asarray(self.gpu_s) / 3600.0,
            cost=np.asarray(self.cost),
            energy_kwh=energy,
            carbon_kg=np.asarray(self.carbon_kg),
            embodied_kg=embodied,
        )
        out.summary["energy_jobs_kwh"] = float(pd.Series(energy).sum())
        out.summary["cost_compute"] = float(np.sum(self.cost))  # NaN: a model without price
        if self._core.scenario.embodied == "allocated":
            out.summary["carbon_embodied_kg"] = float(pd.Series(embodied).sum())
