"""Prefill/decode disaggregation (`sim.serving.iteration_level.disaggregated`): a request
is prefilled on a prefill replica, its KV cache crosses the link once, and a decode
replica generates the rest; the link's time is in its time per output token and its
energy in the site's energy exactly; at equal GPUs, under a prefill-heavy load, decodes no
longer share iterations with prompts (lower TPOT) but the prompts have half the GPUs
(higher TTFT); a policy
scales the pools apart; a bad setting is a one-line error; the same seed gives the same
run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.api import Scale
from sim.config.services import SchedulerConfig
from sim.errors import ScenarioError
from sim.models import kv_transfer
from sim.models.kv_transfer import kv_link
from sim.models.llm_iteration import iteration_cost
from sim.serving.iteration_level import IterationLevel
from sim.serving.iteration_level.disaggregated import DisaggregatedLevel
from sim.serving.service_sim import ServiceContext
from tests.conftest import site
from tests.engine.test_service_levers import At
from tests.engine.test_services import CHAT, serving_scenario
from tests.serving.test_iteration_level import SLO, Power, model, poisson_chat
from tests.serving.test_request_level import NEVER_S, TableSource

LINK = kv_link("IB-NDR", 1)


def disaggregated(source, prefill=None, decode=None, replicas=(1, 1), horizon_s=1e6):
    """A disaggregated iteration level over `source`: `replicas` prefill and decode
    replicas (H100s by default) at one site, the KV over one NDR InfiniBand link."""
    prefill, decode = prefill or model(), decode or model()
    sched = [SchedulerConfig().resolved(m.gpu, None, 256) for m in (prefill, decode)]
    pools = [("prefill", 0), ("decode", 0)]
    ctx = ServiceContext("chat", source, np.zeros(2), SLO, NEVER_S, 60.0, horizon_s, Power())
    sim_ = DisaggregatedLevel(ctx, sched, pools, LINK)
    sim_.configure(0.0, 0, replicas[0], prefill)
    sim_.configure(0.0, 1, replicas[1], decode)
    sim_.close(horizon_s)
    return sim_


def co_located(source, replicas=2, horizon_s=1e6):
    m = model()
    sched = SchedulerConfig().resolved(m.gpu, None, 256)
    ctx = ServiceContext("chat", source, np.zeros(1), SLO, NEVER_S, 60.0, horizon_s, Power())
    sim_ = IterationLevel(ctx, [sched])
    sim_.configure(0.0, 0, replicas, m)
    sim_.close(horizon_s)
    return sim_


def test_a_request_is_prefilled_then_its_kv_crosses_the_link_then_it_decodes():
    """100 prompt tokens, 3 output tokens: the prefill replica's iteration gives the first
    token; the KV (100 tokens' worth) arrives after the link's latency + bytes / bandwidth;
    the idle decode replica then runs two decode iterations over 100 and 101 tokens."""
    m = model()
    cost = iteration_cost(m, 8192)
    t = disaggregated(TableSource([0.0], [3], [100])).request_table()
    first = cost.step(0, 0, 100)[0]
    nbytes = 100 * cost.kv.bytes_per_token
    arrive = first + LINK.latency_s + nbytes / LINK.bytes_per_s
    d1, g, _ = cost.decode(1, 100)
    assert t["first_token_s"].tolist() == pytest.approx([first], rel=1e-12)
    assert t["ttft_ms"].tolist() == pytest.approx([1e3 * first], rel=1e-12)
    assert t["end_s"].tolist() == pytest.approx([arrive + d1 + (d1 + g)], rel=1e-12)
    assert t["tpot_ms"].tolist() == pytest.approx([1e3 * (arrive + 2 * d1 + g - first) / 2])
    assert t["kv_transfer_bytes"].tolist() == [nbytes]


def test_every_served_requests_kv_cache_crosses_the_link_exactly_once():
    """Count and bytes: a served request's prompt tokens x the prefill replica's KV bytes
    per token, once; a one-token answer is done at the prefill replica and crosses nothing;
    the summary's totals are the requests'."""
    arrival, out, inp = poisson_chat(4.0, 3000, seed=3)
    out[::10] = 1
    sim_ = disaggregated(TableSource(arrival, out, inp))
    t = sim_.request_table()
    served = (t["state"] == "served").to_numpy()
    assert served.sum() == len(t)
    many = t["output_tokens"].to_numpy() > 1
    per_token = iteration_cost(model(), 8192).kv.bytes_per_token
    assert (t["kv_transfers"][many] == 1).all() and (t["kv_transfers"][~many] == 0).all()
    assert np.array_equal(
        t["kv_transfer_bytes"].to_numpy(), np.where(many, t["input_tokens"] * per_token, 0.0)
    )
    s = sim_.summary()
    assert s["kv_transfer_gb"] == pytest.approx(t["kv_transfer_bytes"].sum() / 1e9, rel=1e-12)
    assert s["kv_transfer_energy_kwh"] == pytest.approx(
        t["kv_transfer_bytes"].sum() * 8 * kv_transfer.JOULES_PER_BIT["network"] / 3.6e6,
        rel=1e-12,
    )


def test_at_equal_gpus_a_prefill_heavy_load_decodes_faster_and_prefills_slower_disaggregated():
    """Two H100s, 4,000-token prompts with 100-token answers at 4 per second. Co-located,
    a decode's iterations also carry the chunks of the prompts arriving meanwhile, each
    lengthening them; disaggregated, the decode replica runs decodes only, its time per
    output token that of a decode iteration (plus the transfer once over 99 tokens): TPOT
    p99 is far lower. The price: every prompt on one GPU instead of two, so TTFT p99 is
    higher (Splitwise and DistServe provision the prefill pool for it)."""
    rng = np.random.default_rng(5)
    n = 3000
    arrival = np.cumsum(rng.exponential(1 / 4.0, n))
    inp, out = np.full(n, 4000), np.full(n, 100)
    p99 = {}
    for name, run in (("co-located", co_located), ("disaggregated", disaggregated)):
        t = run(TableSource(arrival, out, inp)).request_table()
        assert (t["state"] == "served").all()
        p99[name] = {k: float(np.percentile(t[k], 99)) for k in ("ttft_ms", "tpot_ms")}
    assert p99["disaggregated"]["tpot_ms"] < 0.7 * p99["co-located"]["tpot_ms"]
    assert p99["disaggregated"]["ttft_ms"] > 1.5 * p99["co-located"]["ttft_ms"]


@pytest.mark.parametrize("pool", [0, 1], ids=["prefill", "decode"])
def test_a_pool_scaled_down_drains_by_the_time_it_returned_and_serves_every_request(pool):
    """Two replicas of the pool, one taken away at 150 s: every request is still served,
    each KV cache crossing once, and the replica taken away is empty by the time
    `configure` returned (its look-ahead hands nothing to the link twice)."""
    arrival, out, inp = poisson_chat(4.0, 1500, seed=2)
    # a burst of long prompts just before 150 s keeps both replicas of either pool busy
    order = np.argsort(np.r_[arrival, np.full(20, 149.9)], kind="stable")
    arrival = np.r_[arrival, np.full(20, 149.9)][order]
    out, inp = np.r_[out, np.full(20, 300)][order], np.r_[inp, np.full(20, 8000)][order]
    m = model()
    sched = [SchedulerConfig().resolved(m.gpu, None, 256)] * 2
    pools = [("prefill", 0), ("decode", 0)]
    source = TableSource(arrival, out, inp)
    ctx = ServiceContext("chat", source, np.zeros(2), SLO, NEVER_S, 60.0, 1e6, Power())
    sim_ = DisaggregatedLevel(ctx, sched, pools, LINK)
    sim_.configure(0.0, 0, 2 if pool == 0 else 1, m)
    sim_.configure(0.0, 1, 2 if pool == 1 else 1, m)
    free_s = sim_.configure(150.0, pool, 1, m)
    assert free_s >= 150.0
    fleet = sim_._fleet if pool == 0 else sim_._decode
    (leaving,) = fleet.sites[pool].draining
    assert free_s > 150.0
    sim_.advance_to(free_s)
    assert leaving.mode == 0 and not leaving.waiting and not leaving.pf
    sim_.close(1e6)
    t = sim_.request_table()
    assert (t["state"] == "served").all()
    assert (t["kv_transfers"] == (t["output_tokens"] > 1)).all()


# --- from a scenario ----------------------------------------------------------------------

DISAGG = {
    **CHAT,
    "replicas": {},
    "gpus_per_replica": 1,
    "sites": ["a"],
    "disaggregation": {
        "link": "IB-NDR",
        "prefill": {"replicas": {"a": 1}},
        "decode": {"gpu": "A100-80GB", "cap_w": 300.0, "replicas": {"a": 2}},
    },
}
MIXED_SITE = site(
    pue=1.2, gpus=[{"model": "H100-SXM", "count": 4}, {"model": "A100-80GB", "count": 4}]
)


def _scenario(tmp_path, service=DISAGG, fidelity="iteration", **overrides):
    return serving_scenario(
        tmp_path, fidelity, services=[service], sites=[MIXED_SITE], duration_h=1.0, **overrides
    )


def _request_file(tmp_path, n=1500, seed=1):
    """Requests arriving over the first 40 minutes of the hour (all done by its end)."""
    arrival, out, inp = poisson_chat(n / 2400.0, n, seed)
    path = tmp_path / "requests.parquet"
    pd.DataFrame({"arrival_s": arrival, "input_tokens": inp, "output_tokens": out}).to_parquet(path)
    return str(path)


def test_the_transfers_energy_is_in_the_sites_energy_exactly(tmp_path, monkeypatch):
    """The same run with the link's energy per bit at 0: the site's facility energy is
    less by the requests' transfer energies x the site's PUE (1.2), to 1e-9; the summary's
    `kv_transfer_energy_kwh` is their sum."""
    service = {**DISAGG, "requests": {"file": _request_file(tmp_path)}}
    with_link = sim.simulate(_scenario(tmp_path, service))
    monkeypatch.setitem(kv_transfer.JOULES_PER_BIT, "network", 0.0)
    without = sim.simulate(_scenario(tmp_path, service))
    req = with_link.requests
    assert (req["state"] == "served").all()
    transfers_kwh = req["kv_transfer_j"].sum() / 3.6e6
    assert transfers_kwh > 0
    assert with_link.summary["kv_transfer_energy_kwh"] == pytest.approx(transfers_kwh, rel=1e-12)
    assert without.summary["kv_transfer_energy_kwh"] == 0.0
    extra_kwh = with_link.summary["energy_facility_kwh"] - without.summary["energy_facility_kwh"]
    assert extra_kwh == pytest.approx(1.2 * transfers_kwh, rel=1e-9)
    extra_it = with_link.summary["energy_it_kwh"] - without.summary["energy_it_kwh"]
    assert extra_it == pytest.approx(transfers_kwh, rel=1e-9)
    assert with_link.summary["kv_transfer_gb"] == pytest.approx(
        req["kv_transfer_bytes"].sum() / 1e9, rel=1e-12
    )


def test_a_service_that_is_not_disaggregated_reports_no_kv_transfer(tmp_path):
    s = sim.simulate(_scenario(tmp_path, {**CHAT, "sites": ["a"]})).summary
    assert s["kv_transfer_gb"] is None and s["kv_transfer_energy_kwh"] is None


def test_a_policy_scales_the_prefill_and_decode_pools_apart(tmp_path):
    """The pools are the variants "prefill" and "decode": a policy adds a decode replica
    and takes a prefill one away (of two); the events say so, and the decode pool's GPUs
    (A100s) are held accordingly."""
    service = {
        **DISAGG,
        "disaggregation": {
            **DISAGG["disaggregation"],
            "prefill": {"replicas": {"a": 2}},
            "decode": {"gpu": "A100-80GB", "replicas": {"a": 1}},
        },
    }

    def ratio(state):
        chat = state.service("chat")
        return [Scale(chat, "a", 1, variant="prefill"), Scale(chat, "a", 3, variant="decode")]

    r = sim.simulate(_scenario(tmp_path, service), At(600.0, ratio))
    scales = r.events[r.events["kind"] == "scale"]
    assert sorted(zip(scales["detail"], scales["value"], strict=True)) == [
        ("chat/decode", 3.0),
        ("chat/prefill", 1.0),
    ]
    assert r.summary["requests_served"] > 0
    assert (r.requests["kv_transfers"] <= 1).all()


def test_the_same_seed_gives_the_same_run(tmp_path):
    a = sim.simulate(_scenario(tmp_path)).requests
    b = sim.simulate(_scenario(tmp_path)).requests
    pd.testing.assert_frame_equal(a, b)
    c = sim.simulate(_scenario(tmp_path, seed=2)).requests
    assert len(c) != len(a) or not c["arrival_s"].equals(a["arrival_s"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"fidelity": "request"},
            'services[0].disaggregation: needs [serving] fidelity = "iteration"',
        ),
        (
            {"fidelity": "fluid"},
            'services[0].disaggregation: needs [serving] fidelity = "iteration"',
        ),
        ({"link": "IB-XDR"}, "services[0].disaggregation.link: unknown interconnect 'IB-XDR'"),
        (
            {"decode": {"scheduler": {"preemption": "swap"}}},
            "disaggregation.decode.scheduler.preemption",
        ),
        ({"decode": {"replicas": {"nowhere": 1}}}, "disaggregation.decode.replicas.nowhere"),
        ({"decode": {"gpu": "B200"}}, "services[0].disaggregation.decode.gpu"),
        ({"decode": {"replicas": {"a": 5}}}, "services[0].disaggregation.decode.replicas.a"),
        ({"prefill": {"cap_w": 5.0}}, "services[0].disaggregation.prefill"),
        ({"variants": [{"model": "Llama-3.1-8B-Instruct"}]}, "disaggregation: not with variants"),
    ],
)
def test_a_bad_disaggregation_setting_is_a_one_line_error_naming_it(tmp_path, change, message):
    d = {
        **DISAGG["disaggregation"],
        **{k: v for k, v in change.items() if k in ("link", "prefill", "decode")},
    }
    service = {**DISAGG, "disaggregation": d}
    if "variants" in change:
        service["variants"] = change["variants"]
    with pytest.raises(ScenarioError) as err:
        _scenario(tmp_path, service, change.get("fidelity", "iteration"))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_a_bad_setting_exits_2_from_the_cli_with_one_line(tmp_path, capsys):
    from tests.conftest import run_cli

    scenario = _scenario(tmp_path)
    path = tmp_path / "s.toml"
    path.write_text(scenario.to_toml().replace('link = "IB-NDR"', 'link = "nope"'))
    code, out = run_cli(["run", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    lines = [ln for ln in out.err.strip().splitlines() if ln]
    assert len(lines) == 1 and "disaggregation.link" in lines[0]
