"""Checking an event payload against the schema (:mod:`compiler.events.schema`).

The check is structural and exact for closed structs: every required field present, no field the
schema does not declare, every value of its declared type. Numbers: an ``int`` field takes Python and
numpy integers (not bools); a ``float`` field takes any real number (NaN and infinities included: the
service turns them into null). The first mismatch raises :class:`EventSchemaError` with its path
(``pass.finished.remarks[2].nodes[0]``).
"""

from __future__ import annotations

import numbers
import types
import typing
from collections.abc import Mapping
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
