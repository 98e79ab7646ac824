"""Finding and building a policy: a registry name, `module:Class`, or `path/to/file.py:Class`.

Parameters come from the scenario's `[policy.params]`. A policy that is a dataclass gets
them validated field by field (unknown names and wrong types are errors naming the
parameter); any other class is called with them as keyword arguments.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError

from sim.api import Policy
from sim.errors import ScenarioError


def policy_class(name: str, key: str = "policy") -> type[Policy]:
    """The class a policy name refers to. Raises ScenarioError naming `key`.name."""
    from policies import REGISTRY

    if name in REGISTRY:
        return REGISTRY[name]
    module_name, sep, class_name = name.rpartition(":")
    if not sep:
        raise ScenarioError(
            f"{key}.name: unknown policy {name!r}; registered: {', '.join(sorted(REGISTRY))}, "
            "or give module:Class or path/to/file.py:Class"
        )
    try:
        if module_name.endswith(".py"):
            module = _import_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except (ImportError, OSError, SyntaxError) as e:
        raise ScenarioError(f"{key}.name: cannot import {module_name!r}: {e}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ScenarioError(f"{key}.name: {module_name!r} has no class {class_name!r}")
    if not callable(getattr(cls, "decide", None)):
        raise ScenarioError(f"{key}.name: {name} has no decide(state) method")
    # A class with decide() is a policy, a `Policy` subclass or not (its hooks are read by
    # name: `PolicyHooks.of`).
    return cast(type[Policy], cls)


def _import_file(path: Path):
    path = path.resolve()
    key = f"dcsim_user_policy_{abs(hash(str(path)))}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module


def build_policy(name: str, params: dict[str, Any], key: str = "policy") -> Policy:
    """Instantiate policy `name` with `params`, validating them; errors name `key`.params.

    A class with a `from_params(params, build)` classmethod (a composite such as `chain`)
    builds itself, calling `build(name, params, key)` for its members."""
    cls = policy_class(name, key)
    if not isinstance(params, dict):
        raise ScenarioError(f"{key}.params: expected a table, got {params!r}")
    # A `sim.api.Policy` subclass inherits from_params = None: built from its fields.
    from_params = getattr(cls, "from_params", None)
    if from_params is not None:
        try:
            return from_params(params, build_policy)
        except ValueError as e:
            raise ScenarioError(str(e)) from None
    if dataclasses.is_dataclass(cls):
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
        for param in params:
            if param not in fields:
                raise ScenarioError(
                    f"{key}.params.{param}: {name} has no parameter {param!r}; "
                    f"its parameters: {', '.join(sorted(fields)) or 'none'}"
                )
        try:
            return TypeAdapter(cls).validate_python(params)
        except ValidationError as e:
            err = e.errors()[0]
            if not err["loc"]:  # a check of the whole policy (its __post_init__)
                msg = err["msg"].removeprefix("Value error, ")
                msg = msg if msg.startswith(name) else f"{name}: {msg}"
                raise ScenarioError(f"{key}.params: {msg}") from None
            loc = ".".join(str(p) for p in err["loc"])
            raise ScenarioError(
                f"{key}.params.{loc}: {err['msg']} (got {err.get('input')!r})"
            ) from None
    try:
        return cls(**params)
    except (TypeError, ValueError) as e:
        raise ScenarioError(f"{key}.params: {name}: {e}") from None
