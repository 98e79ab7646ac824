"""Scenario files: TOML -> validated, frozen `Scenario`.

Reads the file (UTF-8 TOML), applies `--set` overrides, resolves the file paths it names
against its folder, adds its own GPU models to the catalog, and validates it. Files a
scenario names (carbon traces, job files) are read by `sim.grid` and `sim.workload`, which
raise `ScenarioError`/`TraceError` naming the key path or the file and line.

Errors name the file, the key path and the bad value, on one line:
``study.toml: sites[1].gpus[0].count: Input should be greater than 0 (got -4)``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.config.base import check_numbers
from sim.config.overrides import apply_override
from sim.config.scenario import Scenario
from sim.errors import ScenarioError
from sim.models.hardware import GpuFieldError, gpu_spec_from_dict, register_gpu
from sim.util.text import not_utf8


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read a TOML scenario, apply `key.path=value` overrides, validate.

    Relative file paths in the scenario are resolved against the scenario's folder.
    Raises `ScenarioError` naming the file, the key path and the bad value.
    """
    path = Path(path)
    raw = read_scenario_toml(path)
    for item in overrides:
        apply_override(raw, item)
    return scenario_from_dict(raw, source=path)


def read_scenario_toml(path: Path) -> dict[str, Any]:
    """The parsed TOML of a scenario file, not yet validated; ScenarioError naming the file
    if it cannot be read, is not UTF-8 text or is not TOML."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario file ({e.strerror})") from None
    try:
        return tomllib.loads(_scenario_text(path, data))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: invalid TOML: {e}") from None


def _scenario_text(path: Path, data: bytes) -> str:
    """The text of a scenario file: UTF-8, with or without a byte-order mark (TOML is
    UTF-8); ScenarioError naming the file and what it looks like for anything else
    (`sim.util.text.not_utf8`, the check of every text file a user gives)."""
    why = not_utf8(data)
    if why is not None:
        raise ScenarioError(f"{path}: scenario files are UTF-8 text; {why}")
    return data.decode("utf-8-sig")


def scenario_from_dict(raw: dict[str, Any], source: str | Path = "<scenario>") -> Scenario:
    """Validate a scenario given as a dict (as parsed from TOML)."""
    source = Path(source)
    _resolve_paths(raw, source.parent.resolve())
    _register_gpu_models(raw.get("gpu_models"), source)
    try:
        return Scenario.model_validate(raw)
    except ValidationError as e:
        raise ScenarioError(f"{source}: {_first_error(e)}") from None


def _register_gpu_models(models: Any, source: Path) -> None:
    """Add the scenario's own GPU models to the catalog before its pools are validated."""
    if not isinstance(models, dict):
        return  # the schema reports a wrong type
    for gid, fields in models.items():
        try:
            check_numbers(fields, "")
            register_gpu(gpu_spec_from_dict(gid, fields))
        except GpuFieldError as e:
            raise ScenarioError(f"{source}: gpu_models.{gid}.{e.field}: {e.reason}") from None
        except (ValueError, TypeError, KeyError) as e:
            raise ScenarioError(f"{source}: gpu_models.{gid}: {e}") from None


_FILE_KEYS = (
    ("workload", "file"),
    ("wan", "topology_file"),
    ("failures", "trace"),
    ("spot", "trace"),
    ("throughput", "file"),
)
"""(table, key) of the top-level tables' file names."""
_LISTED_FILE_KEYS = (
    ("sites", "carbon", "file"),
    ("sites", "decision_carbon", "file"),
    ("sites", "forecast", "file"),
    ("services", "requests", "file"),
)
"""(list, table, key) of the file names in each entry of a list of tables."""


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    """Makes every file name the scenario gives relative to its own folder (`base`)."""
    tables: list[Any] = [raw.get(table) for table, _ in _FILE_KEYS]
    keys = [key for _, key in _FILE_KEYS]
    for entries, table, key in _LISTED_FILE_KEYS:
        listed = raw.get(entries)
        for entry in listed if isinstance(listed, list) else []:
            tables.append(entry.get(table) if isinstance(entry, dict) else None)
            keys.append(key)
    services = raw.get("services")
    for service in services if isinstance(services, list) else []:
        requests = service.get("requests") if isinstance(service, dict) else None
        tokens = requests.get("tokens") if isinstance(requests, dict) else None
        for direction in ("input", "output"):
            if isinstance(tokens, dict):
                tables.append(tokens.get(direction))  # a token histogram's file
                keys.append("file")
    for table, key in zip(tables, keys, strict=True):
        if isinstance(table, dict) and isinstance(table.get(key), str):
            table[key] = str(base / table[key])
    _resolve_policy_file(raw.get("policy"), base)


def _resolve_policy_file(policy: Any, base: Path) -> None:
    """A policy `path/to/file.py:Class` is found next to the scenario file when it is there
    (else relative to the working directory), and so are a chain's members'."""
    if not isinstance(policy, dict):
        return
    name = policy.get("name")
    if isinstance(name, str) and ".py:" in name:
        path, _, cls = name.rpartition(":")
        if (base / path).is_file():
            policy["name"] = f"{base / path}:{cls}"
    params = policy.get("params")
    members = params.get("policies") if isinstance(params, dict) else None
    for member in members if isinstance(members, list) else []:
        _resolve_policy_file(member, base)


def _first_error(e: ValidationError) -> str:
    errs = e.errors()
    err = _most_telling(errs)
    loc = _loc_to_path(err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    text = f"{loc}: {msg}" if loc else msg
    if err["type"] not in ("missing", "value_error") and "input" in err:
        text += f" (got {err['input']!r})"
    if len(errs) > 1:
        text += f" [and {len(errs) - 1} more error(s)]"
    return text


def _most_telling(errs: list[Any]) -> Any:
    """The error to report: the first, unless it only says a value did not match one member
    of a union (`pue = [1, nan]` is "not a number" and "item 1 not finite"): then the first
    error about the same key that says what is wrong with the value."""
    first = errs[0]
    if not first["type"].endswith("_type"):
        return first
    key = _loc_to_path(first["loc"][:1])
    same_key = (e for e in errs if _loc_to_path(e["loc"][:1]) == key)
    return next((e for e in same_key if not e["type"].endswith("_type")), first)


_UNION_MEMBER = re.compile(r"^(float|int|str|bool|(list|dict|tuple)\[.*\])$")
"""How pydantic names the member of a union (`float | list[float]`) in an error's location."""


def _loc_to_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union")) or _UNION_MEMBER.match(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out
