"""Finding, building and calling a policy: a registry name, `module:Class`, or
`path/to/file.py:Class`.

Parameters come from the scenario's `[policy.params]`. A policy that is a dataclass gets
them validated field by field (unknown names and wrong types are errors naming the
parameter); any other class has them checked against its constructor's signature, then is
called with them as keyword arguments.

A user's policy that fails (its module does not import, its constructor, `decide` or a
hook raises, `decide` returns something other than actions) is a `PolicyError`: one line
naming the policy and what failed, then the innermost frames of the user's own files
(`user_frames`: never dcsim's, Python's or an installed package's). The same failure in a
built-in policy, with no frame of the user's in it, is a dcsim bug and keeps its traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import inspect
import os
import reprlib
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast, get_args

from pydantic import TypeAdapter, ValidationError

from sim.api import Action, Policy, SystemState
from sim.errors import DcsimError, PolicyError, ScenarioError

__all__ = [
    "build_policy",
    "call_policy",
    "decide",
    "not_an_action",
    "policy_class",
    "user_frames",
]

MAX_USER_FRAMES = 3
"""A failing policy's message shows at most this many of the user's frames, innermost last."""

ACTION_TYPES: tuple[type, ...] = get_args(Action)

T = TypeVar("T")


# --- finding and building ------------------------------------------------------------------


def policy_class(name: str, key: str = "policy") -> type[Policy]:
    """The class a policy name refers to. Raises ScenarioError naming `key`.name for a name
    that refers to nothing, PolicyError with the user's frames for a module that fails to
    import."""
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
    except SyntaxError as e:
        where = "".join(traceback.format_exception_only(e)[:-1]).rstrip()
        raise PolicyError(
            f"policy {_label(name, key)}: cannot import {module_name}: SyntaxError: {e.msg}\n"
            f"{where}"
        ) from e
    except Exception as e:
        if not user_frames(e):  # nothing of the user's ran: the name refers to nothing
            raise ScenarioError(f"{key}.name: cannot import {module_name!r}: {e}") from None
        raise _failure(_label(name, key), f"importing {module_name}", e) from e
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
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
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
    builds itself, calling `build(name, params, key)` for its members. A parameter the
    policy does not take, or a bad value, is a ScenarioError naming it; a ValueError the
    constructor (or `__post_init__`, `from_params`) raises is a ScenarioError with its
    message, followed by the user's frames if the error came from a user's file (`_refusal`);
    a constructor that raises anything else is a PolicyError with the user's frames."""
    cls = policy_class(name, key)
    if not isinstance(params, dict):
        raise ScenarioError(f"{key}.params: expected a table, got {params!r}")
    label = _label(name, key)
    # A `sim.api.Policy` subclass inherits from_params = None: built from its fields.
    from_params = getattr(cls, "from_params", None)
    if from_params is not None:
        try:
            return _building(label, from_params, params, build_policy)
        except ValueError as e:
            raise ScenarioError(_refusal(str(e), e)) from None
    if dataclasses.is_dataclass(cls):
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
        _check_names(name, key, params, fields)
        try:
            return _building(label, TypeAdapter(cls).validate_python, params)
        except ValidationError as e:
            err = e.errors()[0]
            if not err["loc"]:  # a check of the whole policy (its __post_init__)
                msg = err["msg"].removeprefix("Value error, ")
                msg = msg if msg.startswith(name) else f"{name}: {msg}"
                raised = err.get("ctx", {}).get("error")
                raise ScenarioError(_refusal(f"{key}.params: {msg}", raised)) from None
            loc = ".".join(str(p) for p in err["loc"])
            raise ScenarioError(
                f"{key}.params.{loc}: {err['msg']} (got {err.get('input')!r})"
            ) from None
    _check_signature(cls, name, key, params)
    try:
        return _building(label, lambda: cls(**params))
    except ValueError as e:
        raise ScenarioError(_refusal(f"{key}.params: {name}: {e}", e)) from None


def _refusal(message: str, error: object) -> str:
    """`message`, the one line of a parameter value a policy's constructor refused with
    `error` (a ValueError), followed by the user's frames of `error`'s traceback when it has
    any: a user's policy shows where its refusal (or an accidental ValueError, such as a
    failed `float(text)` in a helper) came from; a built-in's stays one line."""
    frames = user_frames(error) if isinstance(error, BaseException) else ""
    return f"{message}\n{frames}" if frames else message


def _check_names(name: str, key: str, params: dict[str, Any], accepted: set[str]) -> None:
    for param in params:
        if param not in accepted:
            raise ScenarioError(
                f"{key}.params.{param}: {name} has no parameter {param!r}; "
                f"its parameters: {', '.join(sorted(accepted)) or 'none'}"
            )


def _check_signature(cls: type, name: str, key: str, params: dict[str, Any]) -> None:
    """Params that `cls(**params)` would refuse: ScenarioError naming the first one."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no signature to read: the constructor will tell
        return
    named = [p for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL,)]
    if any(p.kind is p.VAR_KEYWORD for p in named):
        accepted = set(params)
    else:
        accepted = {p.name for p in named if p.kind is not p.POSITIONAL_ONLY}
    _check_names(name, key, params, accepted)
    missing = [
        p.name
        for p in named
        if p.default is p.empty and p.kind is not p.VAR_KEYWORD and p.name not in params
    ]
    if missing:
        raise ScenarioError(f"{key}.params.{missing[0]}: {name} needs this parameter")


def _building(label: str, build: Callable[..., T], *args: Any) -> T:
    """`build(*args)`; its ValueError and dcsim errors as they are, anything else a
    PolicyError with the user's frames."""
    try:
        return build(*args)
    except (ValueError, DcsimError):
        raise
    except Exception as e:
        raise _failure(label, "its constructor", e) from e


def _label(name: str, key: str) -> str:
    return name if key == "policy" else f"{name} ({key})"


# --- calling -------------------------------------------------------------------------------


def decide(policy: Policy, state: SystemState) -> list[Action]:
    """`policy.decide(state)` as a list (a generator runs to its end here). PolicyError
    naming the policy if it raises or returns something that is not a sequence; the
    actions themselves are checked when applied (`not_an_action`)."""
    return call_policy(policy, "decide(state)", _actions, policy, state)


def _actions(policy: Policy, state: SystemState) -> list[Action]:
    actions = policy.decide(state)
    if type(actions) is list:  # the common answer, taken as it is (no ABC checks, no copy)
        return actions
    if isinstance(actions, str | bytes | Mapping) or not isinstance(actions, Iterable):
        raise PolicyError(
            f"policy {_name(policy)}: decide(state) returned {reprlib.repr(actions)} "
            f"({type(actions).__name__}), not a list of actions{_where_decide(policy)}"
        )
    return list(actions)


def not_an_action(policy: object, action: object) -> PolicyError:
    """The error for `action`, returned by `policy` among its actions but not one."""
    kind = type(action)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    names = ", ".join(t.__name__ for t in ACTION_TYPES)
    return PolicyError(
        f"policy {_name(policy)}: decide(state) returned {reprlib.repr(action)} (a "
        f"{module}{kind.__qualname__}), not an action (sim.api: {names})"
        f"{_where_decide(policy)}"
    )


def wrong_field(
    policy: object, action: object, field: str, expected: str, value: object
) -> PolicyError:
    """The error for `action`, returned by `policy` with `value` in `field`, which is
    declared of the types `expected` names (one line)."""
    message = (
        f"policy {_name(policy)}: {action!r}: {field} must be {expected}, got "
        f"{reprlib.repr(value)} ({type(value).__name__})"
    )
    return PolicyError(" ".join(message.splitlines()))


def call_policy(policy: object, what: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, a call into `policy` (`what` names it: "decide(state)"). What it
    raises from a user's code becomes a PolicyError naming the policy and `what`, with the
    user's frames; a dcsim error keeps its message. An exception of a built-in policy's
    with no user frame in it is a dcsim bug: raised as it is."""
    try:
        return call(*args)
    except DcsimError as e:
        frames = user_frames(e)
        if not frames:
            raise
        raise PolicyError(f"policy {_name(policy)}: {what}: {e}\n{frames}") from e
    except Exception as e:
        if _is_builtin(policy) and not user_frames(e):
            raise
        raise _failure(_name(policy), what, e) from e


def _failure(label: str, what: str, e: BaseException) -> PolicyError:
    message = str(e).splitlines()[0] if str(e) else ""
    head = f"policy {label}: {what} raised {type(e).__name__}" + (f": {message}" if message else "")
    frames = user_frames(e)
    return PolicyError(f"{head}\n{frames}" if frames else head)


def _is_builtin(policy: object) -> bool:
    """Whether `policy` is one of dcsim's own (its class is defined in sim or policies)."""
    return type(policy).__module__.partition(".")[0] in ("sim", "policies")


def _name(policy: object) -> str:
    return type(policy).__qualname__


def _where_decide(policy: object) -> str:
    """The line where the user's `decide` is defined, as a traceback line; "" for dcsim's."""
    method = getattr(type(policy), "decide", None)
    code = getattr(inspect.unwrap(method), "__code__", None) if callable(method) else None
    if code is None or not _is_users(code.co_filename):
        return ""
    return "\n" + _frame_line(code.co_filename, code.co_firstlineno, "decide")


# --- the user's frames ---------------------------------------------------------------------


def user_frames(error: BaseException) -> str:
    """The innermost `MAX_USER_FRAMES` frames of `error`'s traceback that lie in the user's
    own files, formatted as Python prints them (without the column markers); "" if none
    does."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _is_users(f.filename)]
    return "\n".join(
        _frame_line(f.filename, f.lineno, f.name) + (f"\n    {f.line}" if f.line else "")
        for f in frames[-MAX_USER_FRAMES:]
    )


def _frame_line(filename: str, lineno: int | None, function: str) -> str:
    return f'  File "{filename}", line {lineno}, in {function}'


def _is_users(filename: str) -> bool:
    """Whether `filename` is the user's: not dcsim's (sim/, policies/), not Python's own
    library, not an installed package (site-packages: SimPy, pydantic, numpy...)."""
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    path = os.path.realpath(filename)
    parts = Path(path).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not path.startswith(_not_users_dirs())


@functools.cache
def _not_users_dirs() -> tuple[str, ...]:
    """dcsim's packages and Python's standard library, as folder prefixes."""
    dirs = [Path(__file__).resolve().parent, Path(sysconfig.get_paths()["stdlib"]).resolve()]
    spec = importlib.util.find_spec("policies")
    dirs += [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
    return tuple(f"{d}{os.sep}" for d in dirs)
