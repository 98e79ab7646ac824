"""`--set key.path=value` overrides of a parsed scenario dict, before it is validated
(`apply_override`); `set_value` also places the values of a sweep's `--grid`.
"""

from __future__ import annotations

import tomllib
from typing import Any

from sim.errors import ScenarioError


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Apply one `key.path=value` override to a parsed scenario dict, in place.

    The value is parsed with `parse_value`. List items are addressed as `sites[0].pue` or
    `sites.0.pue`.
    """
    key, sep, value_text = item.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {item!r}: expected key.path=value")
    set_value(raw, key, parse_value(value_text))


def parse_value(text: str) -> Any:
    """A value as written on the command line: a TOML value (`3`, `1.5`, `true`, `"x"`,
    `[1, 2]`, `{name = "x"}`), or else the plain string."""
    try:
        return tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def set_value(raw: dict[str, Any], key: str, value: Any, origin: str = "--set") -> None:
    """Set `key` (a path like `sites[0].pue` or `policy.params.watts`) in a parsed scenario
    dict, in place, creating tables on the way. Raises ScenarioError naming `origin` (where
    the key was given, e.g. "--set" or "--grid") and the key."""
    parts = key.strip().replace("[", ".").replace("]", "").split(".")
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError(
                    f"{origin} {key}: no list item {part!r} at {where} (length {len(node)})"
                )
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise ScenarioError(f"{origin} {key}: {'.'.join(parts[:i])} is a value, not a table")
