"""Hardware generations a serverless function can run and be kept warm on: cold-start time
and energy, execution speed and power, and the power an idle warm instance holds.

The two shipped generations are EcoLife's measured pair (Jiang et al., "EcoLife:
Carbon-Aware Serverless Function Scheduling for Sustainable Computing", SC 2024), from
the paper's artifact (github.com/LukeJYK/SC24_eco-life): `data/avg_data/*_{i3,m5zn}.metal.json`
(per benchmark function: cold-start seconds `cs`, execution seconds `exe`, and the RAPL
CPU-package and DRAM energy of each, joules) and `server_info.json` (cores, memory, and the
CPU and DRAM idle energy per 10 minutes, and the embodied carbon of the CPU and of the
DRAM). docs/functions.md shows the arithmetic.

Embodied carbon is charged as the artifact's `utils.py` charges it (`compute_exe`,
`compute_kat`), over a lifetime of 4 x 12 x 30 x 24 x 3600 s (four years of 360 days, as
it writes it), with q = the function's memory over the server's: a cold start and
execution (or a warm execution) of t seconds holds the whole CPU's embodied carbon and
its share q of the DRAM's for t; an idle warm instance holds one core's share of the
CPU's and its share q of the DRAM's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ECOLIFE_GENERATIONS", "ECOLIFE_LIFETIME_S", "Generation"]

ECOLIFE_LIFETIME_S = 4 * 12 * 30 * 24 * 3600.0
"""A server's lifetime over which its embodied carbon is spread, s: four years of twelve
30-day months, as EcoLife's artifact writes it (`utils.py`: `4*12*30*24*3600`)."""
_G_PER_KG = 1000.0


@dataclass(frozen=True)
class Generation:
    """One hardware generation.

    name: its label. cold_start_s: seconds from a cold invocation's arrival to the start
    of its execution. cold_start_energy_j: the energy of that cold start, joules.
    exec_time_factor: execution time on this generation over the time on the reference
    hardware (the generator's `exec_s`). exec_power_w: power while a function executes,
    watts. idle_power_w: power an idle warm instance holds whatever its memory (its share
    of the idle CPU), watts. idle_power_w_per_gb: the idle DRAM power per GB the
    instance holds warm, watts per GB. cores: the server's cores; memory_gb: its memory,
    GB. embodied_cpu_kg and embodied_dram_kg: the embodied carbon of its CPU and of its
    DRAM, kg CO2e, spread over `lifetime_s` seconds (the module docstring).
    """

    name: str
    cold_start_s: float
    cold_start_energy_j: float
    exec_time_factor: float
    exec_power_w: float
    idle_power_w: float
    idle_power_w_per_gb: float
    cores: int
    memory_gb: float
    embodied_cpu_kg: float
    embodied_dram_kg: float
    lifetime_s: float = ECOLIFE_LIFETIME_S

    def __post_init__(self) -> None:
        for key in (
            "cold_start_s",
            "cold_start_energy_j",
            "exec_time_factor",
            "exec_power_w",
            "idle_power_w",
            "idle_power_w_per_gb",
            "cores",
            "memory_gb",
            "embodied_cpu_kg",
            "embodied_dram_kg",
            "lifetime_s",
        ):
            value = getattr(self, key)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"Generation {self.name!r}: {key} must be >= 0, got {value}")
        for key in ("exec_time_factor", "cores", "memory_gb", "lifetime_s"):
            if getattr(self, key) <= 0:
                raise ValueError(
                    f"Generation {self.name!r}: {key} must be > 0, got {getattr(self, key)}"
                )

    def exec_s(self, reference_exec_s: float) -> float:
        """Execution time on this generation, seconds, of one that takes
        `reference_exec_s` seconds on the reference hardware."""
        return reference_exec_s * self.exec_time_factor

    def keep_alive_power_w(self, memory_gb: float) -> float:
        """Power of one idle warm instance holding `memory_gb` GB, watts."""
        return self.idle_power_w + self.idle_power_w_per_gb * memory_gb

    def busy_embodied_g_per_s(self, memory_gb: float) -> float:
        """Embodied carbon per second of a cold start or an execution holding `memory_gb`
        GB, g/s: the whole CPU's and the share memory_gb / `self.memory_gb` of the DRAM's,
        over the lifetime (EcoLife's `compute_exe`)."""
        q = memory_gb / self.memory_gb
        return (self.embodied_cpu_kg + q * self.embodied_dram_kg) * _G_PER_KG / self.lifetime_s

    def keep_alive_embodied_g_per_s(self, memory_gb: float) -> float:
        """Embodied carbon per second of one idle warm instance holding `memory_gb` GB, g/s:
        one core's share of the CPU's and the share memory_gb / `self.memory_gb` of the
        DRAM's, over the lifetime (EcoLife's `compute_kat`)."""
        q = memory_gb / self.memory_gb
        return (
            (self.embodied_cpu_kg / self.cores + q * self.embodied_dram_kg)
            * _G_PER_KG
            / self.lifetime_s
        )


ECOLIFE_GENERATIONS: dict[str, Generation] = {
    # AWS i3.metal (Intel Xeon E5-2686 v4, Broadwell, 2016): EcoLife's old generation and
    # the reference hardware (factor 1). Means over EcoLife's ten benchmark functions:
    # cold start 3.493 s and 236.8 J (CPU + DRAM); execution 99.61 W (sum of energies over
    # sum of times); idle: 18,233.65 J per 10 min over 36 cores, 1,543.392 J per 10 min
    # over 512 GB. Embodied (server_info.json): 36 cores, CPU 34.7 kg, 512 GB, DRAM 1,584 kg.
    "i3": Generation(
        name="i3",
        cold_start_s=3.4934,
        cold_start_energy_j=236.81,
        exec_time_factor=1.0,
        exec_power_w=99.611,
        idle_power_w=18233.65 / 600.0 / 36.0,
        idle_power_w_per_gb=1543.392 / 600.0 / 512.0,
        cores=36,
        memory_gb=512.0,
        embodied_cpu_kg=34.7,
        embodied_dram_kg=1584.0,
    ),
    # AWS m5zn.metal (Intel Xeon Platinum 8252C, Cascade Lake, 2020): the new generation.
    # Cold start 3.143 s and 241.2 J; execution 0.7948 x the i3 time (mean of the ten
    # per-function ratios) at 114.94 W; idle: 15,000 J per 10 min over 24 cores, 2,450 J
    # per 10 min over 192 GB. Embodied: 24 cores, CPU 36 kg, 192 GB, DRAM 744 kg.
    "m5zn": Generation(
        name="m5zn",
        cold_start_s=3.1432,
        cold_start_energy_j=241.24,
        exec_time_factor=0.7948,
        exec_power_w=114.940,
        idle_power_w=15000.0 / 600.0 / 24.0,
        idle_power_w_per_gb=2450.0 / 600.0 / 192.0,
        cores=24,
        memory_gb=192.0,
        embodied_cpu_kg=36.0,
        embodied_dram_kg=744.0,
    ),
}
"""EcoLife's measured pair of generations, by name (docs/functions.md)."""
