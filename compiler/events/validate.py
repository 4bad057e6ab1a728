"""Checking an event payload against the schema (:mod:`compiler.events.schema`).

The check is structural and exact for closed structs: every required field present, no field the
schema does not declare, every value of its declared type. Numbers: an ``int`` field takes Python and
numpy integers (not bools); a ``float`` field takes any real number (NaN and infinities included: the
service turns them into null). The first mismatch raises :class:`EventSchemaError` with its path
(``pass.finished.remarks[2].nodes[0]``).

Two passes: :func:`matches` runs a predicate compiled once per annotation (closures, no paths: a
large ``graph.fused`` payload checks in about a millisecond); only when it fails does
:func:`check_struct` walk the value again to name the path and the mismatch.
"""

from __future__ import annotations

import functools
import numbers
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .spec import KeysOf, OneOf, fields, is_open, is_struct, strip


class EventSchemaError(ValueError):
    """An event or payload that does not match the schema; the message names the path and the mismatch."""


def check_value(value: Any, tp: Any, meta: tuple[Any, ...], path: str) -> None:
    """Check ``value`` against the annotation ``tp`` with ``Annotated`` metadata ``meta``.

    Raises EventSchemaError naming ``path``."""
    tp, more = strip(tp)
    meta = meta + more
    if tp is Any:
        return
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, tp, meta, path)
    if origin is typing.Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool):
            raise EventSchemaError(f"{path}: {value!r} is not one of {list(typing.get_args(tp))}")
        return
    if is_struct(tp):
        return check_struct(value, tp, path)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise EventSchemaError(f"{path}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp)
        for i, v in enumerate(value):
            check_value(v, item, (), f"{path}[{i}]")
        return
    if origin is dict:
        return _check_mapping(value, tp, meta, path)
    _check_scalar(value, tp, meta, path)


def _check_union(value: Any, tp: Any, meta: tuple[Any, ...], path: str) -> None:
    errors = []
    for option in typing.get_args(tp):
        try:
            check_value(value, option, meta, path)
            return
        except EventSchemaError as exc:
            errors.append(str(exc).removeprefix(f"{path}: "))
    raise EventSchemaError(f"{path}: {value!r} matches none of: {'; '.join(errors)}")


def _check_mapping(value: Any, tp: Any, meta: tuple[Any, ...], path: str) -> None:
    if not isinstance(value, Mapping):
        raise EventSchemaError(f"{path}: expected an object, got {type(value).__name__}")
    _, item = typing.get_args(tp)
    keys = next((m for m in meta if isinstance(m, KeysOf)), None)
    for k, v in value.items():
        if not isinstance(k, str):
            raise EventSchemaError(f"{path}: key {k!r} is not a string")
        if keys is not None and k not in keys.values:
            raise EventSchemaError(f"{path}: key {k!r} is not one of {list(keys.values)}")
        check_value(v, item, (), f"{path}.{k}")


def _check_scalar(value: Any, tp: Any, meta: tuple[Any, ...], path: str) -> None:
    if tp is None or tp is type(None):
        ok = value is None
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        raise TypeError(f"{path}: the schema uses {tp!r}, which the validator does not know")
    if not ok:
        want = "null" if tp in (None, type(None)) else tp.__name__
        raise EventSchemaError(f"{path}: expected {want}, got {type(value).__name__} {_short(value)}")
    one_of = next((m for m in meta if isinstance(m, OneOf)), None)
    if one_of is not None and value not in one_of.values:
        raise EventSchemaError(f"{path}: {value!r} is not one of {list(one_of.values)}")


Predicate = Callable[[Any], bool]

_NONE = type(None)
# the builtin types a union of scalars accepts as they are (bool is no int here, so it is never listed
# for an int or float member)
_EXACT: dict[frozenset[Any], frozenset[type]] = {
    frozenset({int, str, _NONE}): frozenset({int, str, _NONE}),
    frozenset({int, float}): frozenset({int, float}),
    frozenset({int, float, _NONE}): frozenset({int, float, _NONE}),
    frozenset({bool, _NONE}): frozenset({bool, _NONE}),
    frozenset({str, _NONE}): frozenset({str, _NONE}),
}


def matches(value: Any, cls: type) -> bool:
    """Whether ``value`` matches the struct ``cls`` (the fast pass; :func:`check_struct` explains a miss)."""
    return _compiled(cls, ())(value)


@functools.cache
def _compiled(tp: Any, meta: tuple[Any, ...]) -> Predicate:
    tp, more = strip(tp)
    meta = meta + more
    origin = typing.get_origin(tp)
    if tp is Any:
        return lambda v: True
    if origin in (typing.Union, types.UnionType):
        options = [_compiled(a, meta) for a in typing.get_args(tp)]
        exact = _EXACT.get(frozenset(typing.get_args(tp))) if not any(isinstance(m, OneOf) for m in meta) else None
        if exact is not None:  # a union of plain scalars (Dim, Number | None): one type lookup first
            return lambda v: type(v) in exact or any(o(v) for o in options)
        return lambda v: any(o(v) for o in options)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        return lambda v: not isinstance(v, bool) and v in allowed
    if is_struct(tp):
        return _compiled_struct(tp)
    if origin is list:
        item = _compiled(typing.get_args(tp)[0], ())
        return lambda v: isinstance(v, (list, tuple)) and all(item(x) for x in v)
    if origin is dict:
        value = _compiled(typing.get_args(tp)[1], ())
        keys = next((m for m in meta if isinstance(m, KeysOf)), None)
        allowed_keys = keys.values if keys is not None else None
        return lambda v: (type(v) is dict or isinstance(v, Mapping)) and all(
            isinstance(k, str) and (allowed_keys is None or k in allowed_keys) and value(x) for k, x in v.items())
    one_of = next((m for m in meta if isinstance(m, OneOf)), None)
    scalar = _scalar(tp)
    if one_of is not None:
        return lambda v: scalar(v) and v in one_of.values
    return scalar


def _scalar(tp: Any) -> Predicate:
    if tp is None or tp is type(None):
        return lambda v: v is None
    if tp is bool:
        return lambda v: isinstance(v, bool)
    # exact builtin types first: the numbers ABCs (numpy scalars) are slow to ask
    if tp is int:
        return lambda v: type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, bool))
    if tp is float:
        return lambda v: type(v) in (float, int) or (isinstance(v, numbers.Real) and not isinstance(v, bool))
    if tp is str:
        return lambda v: type(v) is str or isinstance(v, str)
    raise TypeError(f"the schema uses {tp!r}, which the validator does not know")


def _compiled_struct(cls: type) -> Predicate:
    declared = fields(cls)
    required = [f.name for f in declared if f.required]
    checks = {f.name: _compiled(f.type, f.meta) for f in declared}
    open_ = is_open(cls)

    def check(v: Any) -> bool:
        if not (type(v) is dict or isinstance(v, Mapping)) or any(name not in v for name in required):
            return False
        for k, x in v.items():
            c = checks.get(k)
            if c is None:
                if not open_:
                    return False
            elif not c(x):
                return False
        return True

    return check


def check_struct(value: Any, cls: type, path: str) -> None:
    """Check a dict against the TypedDict ``cls``: required fields present, no undeclared field unless
    ``cls`` is open, each field's type. Raises EventSchemaError naming ``path``."""
    if not isinstance(value, Mapping):
        raise EventSchemaError(f"{path}: expected an object ({cls.__name__}), got {type(value).__name__}")
    declared = fields(cls)
    names = {f.name for f in declared}
    missing = [f.name for f in declared if f.required and f.name not in value]
    if missing:
        raise EventSchemaError(f"{path}: missing field(s) {missing} of {cls.__name__}")
    extra = [k for k in value if k not in names]
    if extra and not is_open(cls):
        raise EventSchemaError(f"{path}: field(s) {extra} are not in the schema of {cls.__name__}; declare them in "
                               "compiler/events/schema.py and regenerate frontend/src/events.generated.ts")
    for f in declared:
        if f.name in value:
            check_value(value[f.name], f.type, f.meta, f"{path}.{f.name}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
