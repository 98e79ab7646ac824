"""Tests of sim.energy; `steady` builds the batteries several of them share."""

from sim.energy import Battery


def steady(capacity_kwh: float, power_kw: float, **settings: float) -> Battery:
    """A battery that neither self-discharges nor fades: only its efficiencies (defaults:
    lithium-ion's), ratings and bounds act."""
    return Battery(
        capacity_kwh=capacity_kwh,
        power_kw=power_kw,
        self_discharge_per_day=0.0,
        fade_per_cycle=0.0,
        **settings,
    )
