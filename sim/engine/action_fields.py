"""The types of an action's fields, checked before the engine carries it out.

Every action of `sim.api` is a dataclass whose fields declare their types; a policy that
gives a field a value of another type (a list where a site is due, a number where the
capacity kinds are) gets a one-line PolicyError naming the policy, the action and the
field, instead of a Python error deep in the engine. The checks are derived once per action
class from its annotations (`field_check`), so a new action or field is checked without
code here; per action they cost one attribute fetch and one `isinstance` per field, plus a
walk over the items of a tuple or dict field that is set.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable

import numpy as np

__all__ = ["FieldCheck", "field_check"]

_NUMBER_TYPES: dict[type, tuple[type, ...]] = {
    float: (int, float, np.integer, np.floating),
    int: (int, np.integer),
}
"""A field declared float or int also takes numpy's scalars (and a float field an int)."""

_Items = Callable[[object], bool]
"""Whether a container value's items are of the declared types."""


def _words(kinds: list[str]) -> str:
    return kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"


def _option(hint: object) -> tuple[tuple[type, ...], _Items | None, str]:
    """One member of a field's declared union: (the types a value may have, a check of a
    container's items or None, how the message names it)."""
    if hint is type(None):
        return (type(None),), None, "None"
    origin = typing.get_origin(hint)
    if origin is tuple:  # tuple[X, ...]: a tuple (or list) of X
        item = typing.get_args(hint)[0]
        word = f"a tuple of {item.__name__}"
        return (tuple, list), lambda v: all(isinstance(x, item) for x in v), word
    if origin is dict:  # dict[K, V]
        key, value = typing.get_args(hint)
        values = _NUMBER_TYPES.get(value, (value,))
        return (
            (dict,),
            lambda v: all(isinstance(k, key) and isinstance(x, values) for k, x in v.items()),
            f"a dict of {key.__name__} to {value.__name__}",
        )
    assert isinstance(hint, type), f"an action field of an unchecked type: {hint!r}"
    return _NUMBER_TYPES.get(hint, (hint,)), None, hint.__name__


class FieldCheck:
    """The declared types of one action class's fields, in their order."""

    __slots__ = ("_get", "_names", "_types", "_items", "_expected")

    def __init__(self, kind: type):
        hints = typing.get_type_hints(kind)
        names = [f.name for f in dataclasses.fields(kind)]
        self._names = tuple(names)
        self._get = operator.attrgetter(*names) if len(names) > 1 else None
        self._types: list[tuple[type, ...]] = []
        """Per field, the types its value may have."""
        self._items: list[tuple[int, tuple[type, ...], _Items]] = []
        """(field index, container types, check of its items) of the container fields."""
        self._expected: list[str] = []
        """Per field, the types as the message names them."""
        for i, name in enumerate(names):
            hint = hints[name]
            union = typing.get_origin(hint) in (types.UnionType, typing.Union)
            members = typing.get_args(hint) if union else (hint,)
            allowed: list[type] = []
            words: list[str] = []
            for member in members:
                kinds, items, word = _option(member)
                allowed += kinds
                words.append(word)
                if items is not None:
                    self._items.append((i, kinds, items))
            allowed.sort(key=lambda t: t is not type(None))  # most optional fields are None
            self._types.append(tuple(allowed))
            self._expected.append(_words(words))

    def wrong(self, action: object) -> tuple[str, str, object] | None:
        """(field, the types it should have, its value) of the first field of `action` whose
        value is not of its declared type; None if all are."""
        get = self._get
        values = get(action) if get is not None else (getattr(action, self._names[0]),)
        if all(map(isinstance, values, self._types)):  # the common case: one pass in C
            for i, kinds, items in self._items:
                value = values[i]
                if isinstance(value, kinds) and not items(value):
                    return self._names[i], self._expected[i], value
            return None
        i = next(i for i, ok in enumerate(map(isinstance, values, self._types)) if not ok)
        return self._names[i], self._expected[i], values[i]


_CHECKS: dict[type, FieldCheck] = {}


def field_check(kind: type) -> FieldCheck:
    """The `FieldCheck` of action class `kind` (made once per class)."""
    check = _CHECKS.get(kind)
    if check is None:
        check = _CHECKS[kind] = FieldCheck(kind)
    return check
