"""What a policy reads of a site's battery mid-run (`state.onsite`) is the run's own
balance at that time: the state of charge and stored energy are those of the site's
balance integrated over the results' power table (training jobs and inference services
alike) up to the time of the reading, and the load is the table's facility power then."""

from __future__ import annotations

import numpy as np
import pytest

from policies.kit import first_come_first_served
from sim.api import Action, OnsiteReading, Policy, SetBattery, SystemState
from sim.config.loading import load_scenario
from sim.energy.dispatch import SiteEnergy
from sim.engine.build import simulate
from sim.engine.onsite import site_equipment

SCENARIO = """
name = "onsite-live"
seed = 5
start = 2019-06-01T08:20:00Z
duration_h = 2

[[sites]]
name = "a"
lat = 50.1
lon = 8.7
pue = 1.25
carbon = { zone = "DE", year = 2019 }
gpus = [{ model = "H100-SXM", count = 16 }]
onsite = { pv_kwp = 30 }
battery = { capacity_kwh = 20, power_kw = 8, soc_min = 0.1, soc_max = 0.9, initial_soc = 0.5 }

[workload.synthetic]
arrival_rate_per_h = 4
gpus = { 1 = 0.5, 2 = 0.3, 4 = 0.2 }
duration = { dist = "exponential", mean_h = 1 }

[[services]]
name = "chat"
model = "Llama-3.1-8B-Instruct"
gpu = "H100-SXM"
gpus_per_replica = 1
max_batch = 64
sites = ["a"]
replicas = { a = 2 }
slo = { ttft_ms = 1000, tpot_ms = 100 }
requests = { rate_per_s = {rate}, daily_amplitude = 0.6 }

[serving]
fidelity = "{fidelity}"
step_s = 60
"""

TICK_S = 247.0
"""Prime to the 60 s serving step over the run: most readings fall inside a fluid step."""

SETPOINTS = {4 * TICK_S: -3.0, 20 * TICK_S: None}
"""The battery setpoints (kW; None: self-consumption) the probe sets, by decision time."""


class Probe(Policy):
    """Starts the jobs first come, first served; reads site a's on-site state at every
    decision (every job event and every `TICK_S`), setting the battery at `SETPOINTS`."""

    tick_s = TICK_S

    def __init__(self) -> None:
        self.readings: list[tuple[float, OnsiteReading]] = []
        self.acted: set[float] = set()

    def decide(self, state: SystemState) -> list[Action]:
        reading = state.onsite("a")
        assert reading is not None
        self.readings.append((state.now_s, reading))
        out = first_come_first_served(state)
        if state.now_s in SETPOINTS:
            out.append(SetBattery("a", SETPOINTS[state.now_s]))
        if out:
            self.acted.add(state.now_s)
        return out


@pytest.mark.parametrize(("fidelity", "rate"), [("fluid", "3.0"), ("request", "0.2")])
def test_the_battery_a_policy_reads_is_the_balance_of_the_results_at_that_time(
    tmp_path, fidelity, rate
):
    """At the request level every request is two rows of the power table, each an interval
    of the balance: a low rate keeps the reference (from the start at every reading) quick."""
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.replace("{fidelity}", fidelity).replace("{rate}", rate))
    scenario = load_scenario(path)
    probe = Probe()
    results = simulate(scenario, probe)
    power = results.power[results.power["site"] == "a"]
    times, load_kw = power["time_s"].to_numpy(), power["facility_w"].to_numpy() / 1000.0
    assets = site_equipment(scenario)[0]
    assert assets is not None and assets.battery is not None
    set_times = np.array(list(SETPOINTS))
    set_kw = np.array([np.nan if kw is None else kw for kw in SETPOINTS.values()])

    def balance(until_s: float) -> SiteEnergy:
        """Site a's balance over the results' power table up to `until_s`."""
        battery = assets.battery
        assert battery is not None
        energy = SiteEnergy(assets.connection, battery, battery.new(0.5), sink=lambda _: None)
        energy.run(times, load_kw, assets.edges_s, assets.generation_kw, until_s, set_times, set_kw)
        return energy

    # the table's balance is the run's own (its last hour's state of charge)
    assert balance(scenario.horizon_s).state.soc == results.onsite["soc"].iloc[-1]
    assert results.services["energy_kwh"].sum() > 0
    quiet = 0
    for now, reading in probe.readings:
        state = balance(now).state
        assert (reading.battery_soc, reading.battery_kwh) == (state.soc, state.stored_kwh), now
        if 0 < now and now % TICK_S == 0 and now not in probe.acted:
            # at a tick the probe lets pass, nothing changes at its instant but the power the
            # services report from it on, after the reading: the load read is the table's
            # just before
            k = np.searchsorted(times, now, side="left") - 1
            assert reading.load_kw == pytest.approx(load_kw[k], rel=1e-12), now
            quiet += 1
    assert len(probe.readings) > 40
    assert quiet > 10
