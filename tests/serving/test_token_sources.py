"""Request sources with token laws and a daily peak at a local hour: the scenario's
`requests.tokens` (a preset, a law per direction, a histogram file), what the services'
replica models make of a law, and the synthetic daily cycle in a time zone
(docs/request-format.md "Token lengths" and "The synthetic generator")."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from sim.engine.build import build_sources
from sim.errors import ScenarioError
from sim.models.llm_replica import replica_model
from sim.models.token_laws import FixedLaw, HistogramLaw, LogNormalLaw
from sim.serving.requests import (
    LocalPeak,
    RequestTable,
    rate_at,
    request_presets,
    write_requests,
)
from sim.serving.sources import SyntheticSource
from sim.testing import PolicyHarness
from sim.util.streams import seed_sequences
from tests.conftest import one_line_cli_error
from tests.engine.test_services import CHAT, serving_scenario

HISTOGRAM = "min_tokens,max_tokens,count\n1,99,50\n100,999,30\n1000,8000,20\n"
HISTOGRAM_LAW = HistogramLaw((1, 100, 1000), (99, 999, 8000), (50, 30, 20))


def _source(tmp_path, requests: dict, sites=None):
    """The request source of the chat service with `requests`, and its scenario."""
    overrides = {"duration_h": 24.0} if sites is None else {"sites": sites, "duration_h": 24.0}
    scenario = serving_scenario(tmp_path, services=[{**CHAT, "requests": requests}], **overrides)
    return build_sources(scenario, seed_sequences(scenario.seed)["services"])[0], scenario


def test_a_histogram_file_is_the_output_law_of_the_requests(tmp_path):
    (tmp_path / "out.csv").write_text(HISTOGRAM)
    tokens = {"output": {"law": "histogram", "file": "out.csv"}}
    source, _ = _source(tmp_path, {"rate_per_s": 5.0, "tokens": tokens})
    assert source.tokens.output_law == HISTOGRAM_LAW
    assert source.tokens.input_law == request_presets()["azure-conv"].input_tokens
    out = source.requests_between(0.0, 7200.0).output_tokens
    assert out.min() >= 1 and out.max() <= 8000
    assert np.mean(out < 100) == pytest.approx(0.5, abs=0.03)


def test_a_preset_is_its_fitted_laws_and_a_fixed_count_a_fixed_law(tmp_path):
    """The generator draws a preset's lengths from its log-normals, so those are the
    source's laws (and kappa the output law's, not the calibrated constant)."""
    source, _ = _source(tmp_path, {"rate_per_s": 5.0, "tokens": "azure-conv"})
    preset = request_presets()["azure-conv"]
    assert source.tokens.input_law == preset.input_tokens
    assert source.tokens.output_law == preset.output_tokens
    tokens = {"input": {"law": "fixed", "tokens": 512}, "output": {"law": "fixed", "tokens": 64}}
    source, _ = _source(tmp_path, {"rate_per_s": 5.0, "tokens": tokens})
    assert source.tokens.output_law == FixedLaw(64)
    assert source.tokens.output_law.in_flight_share == 0.5


def test_a_request_files_own_answers_are_its_output_law(tmp_path):
    """A request file's answers are the user's data: their exact histogram is the output
    law, and the replica model takes its kappa (here E[L^2] / (2 E[L]^2) = 1.89 for three
    answers of 10 tokens and one of 1,000), not the calibrated constant."""
    out = np.array([10, 1000, 10, 10])
    write_requests(RequestTable(np.arange(4.0), np.full(4, 100), out), tmp_path / "r.parquet")
    source, scenario = _source(tmp_path, {"file": "r.parquet"})
    law = source.tokens.output_law
    assert law == HistogramLaw((10, 1000), (10, 1000), (3, 1))
    assert law.in_flight_share == pytest.approx(np.mean(out**2.0) / (2 * np.mean(out) ** 2))
    assert law.in_flight_share == pytest.approx(1.886, rel=1e-3)
    h = PolicyHarness(scenario)
    h.advance(0.0)
    point = h.state.service("chat").replica_point("a")
    args = (CHAT["model"], CHAT["gpu"], CHAT["gpus_per_replica"], CHAT["max_batch"], 100.0)
    with_law = replica_model(*args, law)
    assert point.capacity_rps == pytest.approx(
        with_law.slots / (law.mean * float(with_law.iter_s[with_law.slots])), rel=1e-12
    )
    assert with_law.iter_s[-1] > replica_model(*args, law.mean).iter_s[-1]


def test_a_lognormal_and_a_fixed_law_per_direction(tmp_path):
    tokens = {
        "input": {"law": "fixed", "tokens": 512},
        "output": {"law": "lognormal", "median": 300, "sigma": 0.7, "min": 5, "max": 4000},
    }
    source, _ = _source(tmp_path, {"rate_per_s": 5.0, "tokens": tokens})
    table = source.requests_between(0.0, 3600.0)
    assert set(table.input_tokens.tolist()) == {512}
    assert source.tokens.output_law == LogNormalLaw.from_median(300.0, 0.7, 5, 4000)
    assert np.median(table.output_tokens) == pytest.approx(300, rel=0.05)


def test_the_services_replica_model_takes_the_output_laws_kappa(tmp_path):
    """With a law the replica model is the law's (scaled to the source's mean output), not
    the calibrated kappa's at the same mean: a wide law puts more context in flight, so a
    full batch reads more KV cache per iteration."""
    tokens = {"output": {"law": "lognormal", "median": 400, "sigma": 1.5, "max": 30000}}
    source, scenario = _source(tmp_path, {"rate_per_s": 2.0, "tokens": tokens})
    law, mean_in, mean_out = (
        source.tokens.output_law,
        source.tokens.mean_input,
        source.tokens.mean_output,
    )
    h = PolicyHarness(scenario)
    h.advance(0.0)
    point = h.state.service("chat").replica_point("a")
    args = (CHAT["model"], CHAT["gpu"], CHAT["gpus_per_replica"], CHAT["max_batch"], mean_in)
    with_law = replica_model(*args, law.scaled(mean_out / law.mean))
    with_mean = replica_model(*args, mean_out)
    capacity = with_law.slots / (mean_out * float(with_law.iter_s[with_law.slots]))
    assert point.capacity_rps == pytest.approx(capacity, rel=1e-12)
    assert law.in_flight_share > 2.0
    assert with_law.iter_s[-1] > 1.2 * with_mean.iter_s[-1]


def test_under_a_directive_the_replica_model_takes_the_law_scaled_by_its_factor(tmp_path):
    tokens = {"output": {"law": "lognormal", "median": 400, "sigma": 1.5, "max": 30000}}
    levels = [
        {"name": "normal", "output_factor": 1.0},
        {"name": "brief", "output_factor": 0.5},
    ]
    service = {**CHAT, "requests": {"rate_per_s": 2.0, "tokens": tokens}, "directives": levels}
    scenario = serving_scenario(tmp_path, services=[service], duration_h=1.0)
    h = PolicyHarness(scenario)
    h.advance(0.0)
    point = h.state.service("chat").replica_point("a", directive="brief")
    source = h.engine.services.sources[0]
    law, mean_out = source.tokens.output_law, 0.5 * source.tokens.mean_output
    args = (CHAT["model"], CHAT["gpu"], CHAT["gpus_per_replica"], CHAT["max_batch"])
    model = replica_model(*args, source.tokens.mean_input, law.scaled(mean_out / law.mean))
    assert point.mean_output_tokens == pytest.approx(mean_out)
    assert point.capacity_rps == pytest.approx(
        model.slots / (mean_out * float(model.iter_s[model.slots])), rel=1e-12
    )


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ({"output": {"law": "weibull"}}, ["services[0].requests.tokens.output", "weibull"]),
        (
            {"output": {"law": "lognormal", "median": 0, "sigma": 1}},
            ["services[0].requests.tokens.output", "median", "greater than 0", "0"],
        ),
        (
            {"output": {"law": "lognormal", "median": 100, "sigma": 1, "min": 50, "max": 10}},
            ["services[0].requests.tokens.output", "min (50) must not exceed max (10)"],
        ),
        (
            {"output": {"law": "fixed", "tokens": 0}},
            ["services[0].requests.tokens", "at least one token", "gives 0"],
        ),
        (
            {"output": {"law": "histogram", "file": "missing.csv"}},
            ["services[0].requests.tokens.output", "missing.csv", "cannot read token histogram"],
        ),
        (
            {"output": {"law": "histogram", "file": "bad.csv"}},
            ["services[0].requests.tokens.output", "bad.csv:3", "count", "'many'"],
        ),
        (
            {"output": {"law": "histogram", "file": "overlap.csv"}},
            ["bad", "overlap.csv:3", "must increase and not overlap"],
        ),
        ({"input": "azure-chat"}, ["services[0].requests", "tokens.input", "'azure-chat'"]),
    ],
)
def test_bad_tokens_are_one_line_errors_naming_the_key_and_value(
    tmp_path, capsys, tokens, expected
):
    files = {
        "bad.csv": "min_tokens,max_tokens,count\n1,10,5\n11,20,many\n",
        "overlap.csv": "min_tokens,max_tokens,count\n1,10,5\n10,20,5\n",
    }
    requests = "{ rate_per_s = 1.0, tokens = " + _toml(tokens) + " }"
    line = one_line_cli_error(tmp_path, capsys, files, _service(requests))
    for part in expected:
        if part == "bad":
            continue
        assert part in line, line


def _service(requests: str) -> str:
    return f"""
[[services]]
name = "chat"
model = "Llama-3.1-8B-Instruct"
gpu = "A100-80GB"
sites = ["a"]
slo = {{ ttft_ms = 1000, tpot_ms = 100 }}
requests = {requests}
"""


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return f'"{value}"' if isinstance(value, str) else repr(value)


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ("{ rate_per_s = 1.0, timezone = 'Mars/Olympus' }", ["requests.timezone", "Mars/Olympus"]),
        ("{ rate_per_s = 1.0, daily_peak_hour = 24 }", ["daily_peak_hour", "24"]),
        (
            "{ file = 'r.parquet', daily_peak_hour = 9 }",
            ["daily_peak_hour applies to rate_per_s", "9"],
        ),
    ],
)
def test_a_bad_daily_peak_is_a_one_line_error(tmp_path, capsys, requests, expected):
    line = one_line_cli_error(tmp_path, capsys, {}, _service(requests))
    for part in expected:
        assert part in line, line


# --- the daily peak at a local hour -----------------------------------------------------------


def _peak_hours_utc(source, days: int) -> list[float]:
    """The UTC hour (from the run's midnight start) of the expected arrivals' maximum, each
    day: the middle of the one-minute step with the most."""
    edges = np.arange(0.0, days * 86400.0 + 1, 60.0)
    counts = source.step_sums(edges)[0].reshape(days, -1)
    return [(float(np.argmax(day)) + 0.5) / 60.0 for day in counts]


def test_the_daily_peak_lands_at_the_local_hour_across_a_dst_switch():
    """Berlin switches to summer time on 2024-03-31 at 01:00 UTC: a 14:00 local peak is at
    13:00 UTC until then, at 12:00 UTC after."""
    start = datetime(2024, 3, 28, tzinfo=UTC)
    source = SyntheticSource(
        3.0,
        6 * 86400.0,
        np.random.SeedSequence(2),
        0.5,
        0.0,
        "azure-conv",
        start=start,
        timezone="Europe/Berlin",
    )
    hours = _peak_hours_utc(source, 6)
    assert hours == pytest.approx([13.0, 13.0, 13.0, 12.0, 12.0, 12.0], abs=1 / 60)
    # the draws too: arrivals by local hour peak at 14:00 (within an hour's bin)
    arrivals = source.requests_between(0.0, 6 * 86400.0).arrival_s
    local_h = (arrivals / 3600.0 + 1 + (arrivals >= 3 * 86400 + 3600)) % 24
    assert int(np.argmax(np.bincount(local_h.astype(int), minlength=24))) in (13, 14)


def test_the_peak_offset_jumps_at_the_switch_instant():
    peak = LocalPeak(datetime(2024, 3, 31, tzinfo=UTC), 14.0, "Europe/Berlin")
    t = np.array([3599.0, 3600.0, 3601.0])  # 00:59:59, 01:00:00, 01:00:01 UTC
    assert peak.utc_offsets_s(t).tolist() == [3600.0, 7200.0, 7200.0]
    assert peak.peak_s(t).tolist() == [13 * 3600.0, 12 * 3600.0, 12 * 3600.0]
    # the rate's maximum on that day is at 12:00 UTC = 14:00 CEST
    grid = np.arange(0.0, 86400.0, 60.0)
    assert grid[np.argmax(rate_at(grid, 1.0, daily_amplitude=0.5, daily_peak_s=peak))] == 12 * 3600


def test_the_origin_sites_time_zone_is_the_default_and_requests_may_name_another(tmp_path):
    """Site a in New York (EDT, UTC-4 in June): the 14:00 local peak is at 18:00 UTC; the
    requests' own timezone (Tokyo, UTC+9) puts it at 05:00 UTC; a daily_peak_hour of 9
    in Tokyo at 00:00 UTC."""
    from tests.engine.test_services import TWO_SITES

    sites = [{**TWO_SITES[0], "timezone": "America/New_York"}, TWO_SITES[1]]
    cycle = {"rate_per_s": 10.0, "daily_amplitude": 0.5}
    ny, _ = _source(tmp_path, cycle, sites)
    tokyo, _ = _source(tmp_path, {**cycle, "timezone": "Asia/Tokyo"}, sites)
    nine, _ = _source(tmp_path, {**cycle, "timezone": "Asia/Tokyo", "daily_peak_hour": 9}, sites)
    assert _peak_hours_utc(ny, 1) == pytest.approx([18.0], abs=1 / 60)
    assert _peak_hours_utc(tokyo, 1) == pytest.approx([5.0], abs=1 / 60)
    assert _peak_hours_utc(nine, 1) == pytest.approx([0.0], abs=1 / 60)


def test_without_a_start_the_peak_stays_14_hours_after_the_run_start():
    source = SyntheticSource(10.0, 86400.0, np.random.SeedSequence(1), 0.5, 0.0, "azure-conv")
    assert _peak_hours_utc(source, 1) == pytest.approx([14.0], abs=1 / 60)


def test_a_bad_local_peak_names_the_value():
    with pytest.raises(ValueError, match="start must carry a UTC offset"):
        LocalPeak(datetime(2024, 1, 1), 14.0)
    with pytest.raises(ValueError, match="unknown IANA time zone 'Nowhere'"):
        LocalPeak(datetime(2024, 1, 1, tzinfo=UTC), 14.0, "Nowhere")
    with pytest.raises(ValueError, match=r"daily_peak_hour must be in \[0, 24\), got 25"):
        LocalPeak(datetime(2024, 1, 1, tzinfo=UTC), 25.0)


def test_a_scenario_toml_names_the_histogram_file_relative_to_itself(tmp_path):
    """The file of a histogram law is found next to the scenario file, as a request file is."""
    from sim.config.loading import load_scenario

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "out.csv").write_text(HISTOGRAM)
    from tests.conftest import SMALL_SCENARIO_TOML

    requests = "{ rate_per_s = 1.0, tokens = { output = { law = 'histogram', file = 'out.csv' } } }"
    path = tmp_path / "sub" / "study.toml"
    path.write_text(SMALL_SCENARIO_TOML + _service(requests))
    scenario = load_scenario(path)
    spec = scenario.services[0].requests.tokens
    assert not isinstance(spec, str) and spec.specs()[1] == HISTOGRAM_LAW
    with pytest.raises(ScenarioError):
        load_scenario(path, ["services[0].requests.tokens.output.file='nope.csv'"])
