"""The docs name only APIs that exist: every dotted name `sim.x.y` or `policies.x.y` in a
code span of docs/*.md or README.md imports (its modules) and resolves (its attributes).
A name ending in `*` names the attributes it prefixes: one must exist."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
NAME = re.compile(r"^((?:sim|policies)(?:\.[A-Za-z_][A-Za-z0-9_]*)+\*?)")
FILE_SUFFIXES = {"py", "md", "toml", "csv", "json", "parquet"}  # `policies.py` is a file


def dotted_names(page: Path) -> set[str]:
    """The dotted names that open a code span of `page` (its fenced blocks left out)."""
    text = FENCED.sub("", page.read_text())
    names = {m.group(1) for span in SPAN.findall(text) if (m := NAME.match(span))}
    return {name for name in names if name.rsplit(".", 1)[1] not in FILE_SUFFIXES}


def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute path from the longest importable one."""
    parts = name.rstrip("*").split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for i, attribute in enumerate(parts[cut:], start=cut + 1):
            if name.endswith("*") and i == len(parts):
                return any(a.startswith(attribute) for a in dir(obj))
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_dotted_name_a_page_mentions_exists(page):
    missing = sorted(name for name in dotted_names(page) if not resolves(name))
    assert not missing, f"{page.relative_to(REPO)} names APIs that do not exist: {missing}"


def test_a_stale_name_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "`sim.simulate(scenario)`, `sim.study.stats.BOOTSTRAP_*`, `policies.py`,\n"
        "`sim.dr_programs.currency_factor` and `sim.models.pricing.no_such_function`\n"
    )
    names = dotted_names(page)
    assert names == {
        "sim.simulate",
        "sim.study.stats.BOOTSTRAP_*",
        "sim.dr_programs.currency_factor",
        "sim.models.pricing.no_such_function",
    }
    assert sorted(n for n in names if not resolves(n)) == [
        "sim.dr_programs.currency_factor",
        "sim.models.pricing.no_such_function",
    ]
