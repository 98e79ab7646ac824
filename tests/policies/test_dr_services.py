"""dr_services: during a demand-response event the jobs take the cut first; a service is
cut (here: moved to its smaller variant before the event) only when the jobs alone cannot
meet the limit, and it keeps its SLO while the site complies.

The site: 20 H100-SXM (PUE 1.2, host 50 W/GPU), two 4-GPU compute-bound jobs and a chat
service of two Llama-3.1-70B replicas (4 GPUs each) at 5 requests/s, with a Llama-3.1-8B
variant (1 GPU); fluid fidelity. Uncapped it draws 13.7 kW facility (measured: the event's
peak under RunNow); with the jobs at their lowest caps 9.2 kW (under DrComplementary). An
event from 1 h to 2 h asks for 10 kW (the jobs suffice) or 6 kW (the service must move
too). A busier chat (below) needs the in-event levers: a shorter directive, then a cap on
its GPUs."""

from __future__ import annotations

import pytest

import sim
from policies.demand_response import DrComplementary
from policies.demand_response.services import DrServices
from policies.run_now import RunNow
from sim.api import ServiceView, SetCap
from tests.conftest import make_scenario, site

H100 = "H100-SXM"
EVENT_STEPS = slice(60, 120)  # the services table's 60 s steps inside the event
JOBS_SUFFICE_KW, SERVICE_NEEDED_KW = 10.0, 6.0
CHAT = {
    "name": "chat",
    "model": "Llama-3.1-70B-Instruct",
    "gpu": H100,
    "gpus_per_replica": 4,
    "sites": ["a"],
    "replicas": {"a": 2},
    "slo": {"ttft_ms": 2000, "tpot_ms": 150, "percentile": 99},
    "requests": {"rate_per_s": 5.0},
    "variants": [{"model": "Llama-3.1-8B-Instruct", "gpus_per_replica": 1}],
    "directives": "default",
}


def scenario(tmp_path, limit_kw, gpus=20, chat=CHAT):
    jobs = [
        {
            "job_id": f"j{i}",
            "submit_time": 0,
            "gpus": 4,
            "work_gpu_h": 40.0,
            "profile": "compute-bound",
        }
        for i in range(2)
    ]
    return make_scenario(
        tmp_path,
        jobs,
        sites=[site(gpus=[{"model": H100, "count": gpus}], pue=1.2, host_w_per_gpu=50.0)],
        services=[chat],
        duration_h=3.0,
        serving={"fidelity": "fluid"},
        demand_response=[
            {
                "site": "a",
                "start": "2020-06-01T01:00:00Z",
                "duration_h": 1.0,
                "limit_kw": limit_kw,
                "notice_h": 1.0,
            }
        ],
    )


def in_event_slo(results) -> float:
    steps = results.services.iloc[EVENT_STEPS]
    return float(steps["slo_met"].sum() / steps["arrived"].sum())


@pytest.mark.parametrize("limit_kw", [JOBS_SUFFICE_KW, SERVICE_NEEDED_KW])
def test_a_naive_policy_breaks_both_limits(tmp_path, limit_kw):
    assert sim.simulate(scenario(tmp_path, limit_kw), RunNow()).summary["dr_compliance"] < 0.5


def test_when_the_jobs_suffice_the_service_is_untouched(tmp_path):
    r = sim.simulate(scenario(tmp_path, JOBS_SUFFICE_KW), DrServices())
    assert r.summary["dr_compliance"] == 1.0
    assert r.summary["dr_throughput_loss_gpu_h"] > 0  # the jobs took the cut
    chat = r.services
    assert (chat["replicas"] == 2).all() and (chat["quality_mean"] == 66.4).all()
    assert in_event_slo(r) >= CHAT["slo"]["percentile"] / 100


def test_when_the_jobs_do_not_suffice_the_service_moves_to_its_smaller_variant_and_keeps_its_slo(
    tmp_path,
):
    sc = scenario(tmp_path, SERVICE_NEEDED_KW)
    assert sim.simulate(sc, DrComplementary()).summary["dr_compliance"] < 0.5  # jobs alone
    r = sim.simulate(sc, DrServices())
    assert r.summary["dr_compliance"] == 1.0
    assert in_event_slo(r) >= CHAT["slo"]["percentile"] / 100
    during = r.services.iloc[EVENT_STEPS]
    assert (during["quality_mean"] == 48.3).all()  # Llama-3.1-8B's MMLU-Pro, every step
    after = r.services.iloc[-1]
    assert after["quality_mean"] == 66.4 and after["replicas"] == 2  # restored


def test_it_is_deterministic(tmp_path):
    sc = scenario(tmp_path, SERVICE_NEEDED_KW)
    a = sim.simulate(sc, DrServices()).summary
    b = sim.simulate(sc, DrServices()).summary
    assert {k: v for k, v in a.items() if k != "sim_wall_s"} == {
        k: v for k, v in b.items() if k != "sim_wall_s"
    }


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="headroom must be in"):
        DrServices(headroom=-0.1)
    with pytest.raises(ValueError, match=r"tick_s must be in \(0, lead_s\]"):
        DrServices(tick_s=900.0, lead_s=600.0)
    with pytest.raises(ValueError, match="service_cap_step_w must be in"):
        DrServices(service_cap_step_w=0.0)
    with pytest.raises(ValueError, match="margin_pct must be in"):
        DrServices(margin_pct=60.0)


# ---- the in-event levers: directives, then caps ----
#
# A busier chat: 40 requests/s on 6 x Llama-3.1-70B (24 GPUs) with the Llama-3.1-8B variant,
# on 36 H100-SXM (4 free for the move), the same two jobs. Before the event chat moves to
# 4 x 8B; with the jobs at their lowest caps the site then draws 9.23 kW facility (measured:
# the event's peak under VariantsOnly below). Under `brief` (0.75 x the tokens) 3 x 8B keep
# the policy's need (1.25 x 40 requests/s) within 9 kW; at 8.4 kW the shorter directive
# leaves 3 x 8B over the limit until their GPUs are capped.

BUSY_CHAT = {**CHAT, "replicas": {"a": 6}, "requests": {"rate_per_s": 40.0}}
DIRECTIVE_NEEDED_KW, CAP_NEEDED_KW = 9.0, 8.4
BRIEF_8B = 48.3 - 1.0  # MMLU-Pro of Llama-3.1-8B less brief's penalty


def busy_scenario(tmp_path, limit_kw):
    return scenario(tmp_path, limit_kw, gpus=36, chat=BUSY_CHAT)


class VariantsOnly(DrServices):
    """The jobs and the variant move; no directive or cap in the event."""

    def _cut_in_event(self, state, site, short_w):
        return 0.0


class NoServiceCap(DrServices):
    """Everything but the cap step."""

    def _cap(self, state, svc, site, short_w):
        return 0.0


class RecordingServiceCaps(DrServices):
    """DrServices, recording (time s, watts) of each SetCap it gives a service."""

    def __post_init__(self):
        super().__post_init__()
        self.service_caps = []

    def amend(self, state, actions):
        out = super().amend(state, actions)
        self.service_caps += [
            (state.now_s, a.watts)
            for a in out
            if isinstance(a, SetCap) and isinstance(a.target, ServiceView)
        ]
        return out


def test_when_jobs_and_variants_do_not_suffice_a_shorter_directive_does_and_is_undone(tmp_path):
    sc = busy_scenario(tmp_path, DIRECTIVE_NEEDED_KW)
    assert sim.simulate(sc, VariantsOnly()).summary["dr_compliance"] < 0.5
    r = sim.simulate(sc, DrServices())
    assert r.summary["dr_compliance"] == 1.0
    assert in_event_slo(r) >= CHAT["slo"]["percentile"] / 100
    during = r.services.iloc[EVENT_STEPS]
    assert (during["quality_mean"] == BRIEF_8B).all() and (during["replicas"] == 3).all()
    after = r.services.iloc[-1]
    assert after["quality_mean"] == 66.4 and after["replicas"] == 6  # normal, 70B: restored


def test_when_even_directives_do_not_suffice_the_service_is_capped_and_keeps_its_slo(tmp_path):
    sc = busy_scenario(tmp_path, CAP_NEEDED_KW)
    assert sim.simulate(sc, NoServiceCap()).summary["dr_compliance"] < 0.5
    policy = RecordingServiceCaps()
    r = sim.simulate(sc, policy)
    assert r.summary["dr_compliance"] == 1.0
    assert in_event_slo(r) >= CHAT["slo"]["percentile"] / 100
    event_s = (3600.0, 7200.0)
    caps = [w for t, w in policy.service_caps if event_s[0] <= t < event_s[1]]
    assert caps and all(w is not None and w < 700.0 for w in caps)  # H100-SXM: 700 W uncapped
    assert policy.service_caps[-1] == (event_s[1], None)  # lifted when the event ends
