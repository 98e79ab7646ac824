"""Keys whose bad values used to be reported as something else: each is one line naming
the key and the value, exit status 2 (issue 37)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, SMALL_SCENARIO_TOML, run_cli

SERVING = REPO / "scenarios" / "serving_only.toml"
CARBON = "carbon = { constant_g_per_kwh = 300 }"

CASES = {
    "an unknown decision_carbon zone is unknown, not 'without a marginal series'": (
        SMALL_SCENARIO_TOML.replace(
            CARBON, CARBON + '\ndecision_carbon = { zone = "XX", kind = "marginal" }'
        ),
        [],
        "sites[0].decision_carbon.zone: unknown zone 'XX'; zones: AT, ",
    ),
    "a zone of the catalog without a marginal series says so": (
        SMALL_SCENARIO_TOML.replace(
            CARBON, CARBON + '\ndecision_carbon = { zone = "US-CAL", kind = "marginal" }'
        ),
        [],
        "sites[0].decision_carbon.zone: zone 'US-CAL' has no marginal series; zones with one: ",
    ),
    "a directives word other than default": (
        None,
        ["--set", 'services[0].directives="short"'],
        'services[0].directives: must be "default" or a list of levels [{ name, '
        "output_factor, quality_penalty }, ...], got 'short'",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_value_is_one_line_naming_its_key(tmp_path, capsys, case):
    text, options, message = CASES[case]
    path = SERVING
    if text is not None:
        path = tmp_path / "study.toml"
        path.write_text(text)
    code, out = run_cli(["validate", str(path), *options], capsys)
    assert code == 2
    (line,) = out.err.strip().splitlines()
    assert line.startswith("error: ") and message in line
