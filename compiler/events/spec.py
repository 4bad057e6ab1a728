"""The vocabulary the event schema (:mod:`compiler.events.schema`) is written in.

A payload is a ``TypedDict``: its annotations are the fields (``NotRequired[...]`` for one that may be
absent), its docstring the description. A field's annotation may carry metadata with ``Annotated``:

- :class:`Doc`: the field's one-line description (it becomes the TypeScript doc comment);
- :class:`Named`: a named type alias (``Dim``), printed by name in TypeScript;
- :class:`OneOf`: a string restricted to a tuple of values (validated; the TypeScript type stays
  ``string`` unless ``alias`` names a generated union);
- :class:`KeysOf`: a ``dict[str, T]`` whose keys are restricted to a tuple of values
  (``Partial<Record<Alias, T>>`` in TypeScript).

:func:`open_struct` marks a payload type whose dict may carry keys beyond its declared fields (a
pass's ``stats``, a remark's ``data``): every other struct and every event payload is closed, so a
field the schema does not declare is an error at emit. :class:`EventSpec` binds an event type to its
payload, the stage it belongs to and whether it ends the stream.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_OPEN: set[type] = set()


@dataclass(frozen=True)
class Doc:
    """A field's description."""

    text: str


@dataclass(frozen=True)
class Named:
    """A type alias's name (TypeScript ``export type <name> = ...``) and its description."""

    name: str
    doc: str = ""


@dataclass(frozen=True)
class OneOf:
    """A string field restricted to ``values``; ``alias``: the generated TypeScript union, if any."""

    values: tuple[str, ...]
    alias: str | None = None


@dataclass(frozen=True)
class KeysOf:
    """A mapping whose keys are restricted to ``values`` (TypeScript ``Partial<Record<alias, T>>``)."""

    values: tuple[str, ...]
    alias: str


def open_struct(cls: T) -> T:
    """Mark a payload TypedDict as open: keys beyond its declared fields are allowed (any JSON)."""
    _OPEN.add(cls)  # type: ignore[arg-type]
    return cls


def is_open(cls: type) -> bool:
    """Whether :func:`open_struct` marked ``cls``."""
    return cls in _OPEN


def is_struct(tp: Any) -> bool:
    """Whether ``tp`` is a TypedDict class (a payload struct)."""
    return isinstance(tp, type) and typing.is_typeddict(tp)


@dataclass(frozen=True)
class Field:
    """One declared field of a struct: its name, bare type, metadata and whether it must be present."""

    name: str
    type: Any
    meta: tuple[Any, ...]
    required: bool

    def meta_of(self, kind: type[T]) -> T | None:
        """The first metadata item of class ``kind``, or None."""
        return next((m for m in self.meta if isinstance(m, kind)), None)

    @property
    def doc(self) -> str:
        d = self.meta_of(Doc)
        return d.text if d is not None else ""


def strip(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(bare type, Annotated metadata)`` of an annotation (``NotRequired`` removed)."""
    meta: tuple[Any, ...] = ()
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            meta = meta + tuple(tp.__metadata__)
            tp = tp.__origin__
        elif origin in (typing.NotRequired, typing.Required):
            tp = typing.get_args(tp)[0]
        else:
            return tp, meta


@functools.cache
def fields(cls: type) -> tuple[Field, ...]:
    """The declared fields of a TypedDict ``cls``, in declaration order (base classes first)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    required = cls.__required_keys__  # type: ignore[attr-defined]
    out = []
    for name, ann in hints.items():
        bare, meta = strip(ann)
        out.append(Field(name, bare, meta, name in required))
    return tuple(out)


Struct = type  # a payload TypedDict class (an alias: EventSpec's field ``type`` shadows the builtin)


@dataclass(frozen=True)
class EventSpec:
    """One event type of the stream.

    Attributes:
        type: the event type, ``area.verb`` (``"pass.finished"``).
        payload: its TypedDict (the fields besides ``seq``, ``type``, ``ts``); its name is the
            TypeScript interface name.
        stage: the ``stage_ms`` key of the stage the event is emitted in (None for a terminal event).
        terminal: whether the event ends the stream (exactly one terminal event per compilation).
    """

    type: str
    payload: Struct
    stage: str | None
    terminal: bool = False
