"""Name tables of the graph IR: :class:`Scope` (the base of :class:`compiler.ir.Graph`) and
:class:`IRError`.

A scope owns two tables: value names (``%x``) and node names. ``If``/``Loop``/``Scan`` bodies share
their outer graph's tables (they read outer values by name, as ONNX scopes them); a fused group's
body is a function with tables of its own. Rewrites name things only through these methods
(:meth:`Scope.fresh_name`, :meth:`Scope.bind_name`, :meth:`Scope.release_name`,
:meth:`Scope.claim_node_name`, :meth:`Scope.release_node_name`, :meth:`Scope.rename`), never through
the tables themselves, so that the IR keeps them consistent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from .graph import Graph, Value


class IRError(Exception):
    """An IR invariant is broken (raised by the verifier and by IR mutations)."""


class Scope:
    """Value and node name tables; ``parent`` given: share the parent's tables."""

    def __init__(self, parent: Scope | None = None) -> None:
        self._names: dict[str, Value] = parent._names if parent is not None else {}
        self._node_names: set[str] = parent._node_names if parent is not None else set()

    def fresh_name(self, base: str) -> str:
        """A value name not yet used in this scope: ``base``, else ``base_1``, ``base_2`` ..."""
        if base and base not in self._names:
            return base
        base = base or "v"
        i = 1
        while f"{base}_{i}" in self._names:
            i += 1
        return f"{base}_{i}"

    def fresh_node_name(self, base: str) -> str:
        """A node name not yet used in this scope, derived from ``base`` as :meth:`fresh_name`."""
        if base and base not in self._node_names:
            return base
        i = 1
        while f"{base}_{i}" in self._node_names:
            i += 1
        return f"{base}_{i}"

    def claim_node_name(self, base: str) -> str:
        """:meth:`fresh_node_name`, taken: later calls do not return it again."""
        name = self.fresh_node_name(base)
        self._node_names.add(name)
        return name

    def release_node_name(self, name: str) -> None:
        """Free a node name (its node left the scope)."""
        self._node_names.discard(name)

    def lookup(self, name: str) -> Value | None:
        """The value of that name in this scope (including outer scopes of subgraphs)."""
        return self._names.get(name)

    def define(self, v: Value, exact: bool = False) -> Value:
        """Enter ``v`` in this scope under its name, or under a fresh name derived from it when the name
        is taken by another value (``exact``: raise IRError instead). Sets ``v.graph``. Returns ``v``."""
        if v.name in self._names and self._names[v.name] is not v:
            if exact:
                raise IRError(f"duplicate value name %{v.name}")
            v.name = self.fresh_name(v.name)
        self._names[v.name] = v
        v.graph = cast("Graph", self)  # a Scope is always a Graph (its one subclass)
        return v

    def bind_name(self, v: Value) -> None:
        """Make ``v`` the value named ``v.name`` in this scope (a value that becomes visible here again,
        e.g. a folded constant or a fused group's output); sets ``v.graph``."""
        self._names[v.name] = v
        v.graph = cast("Graph", self)

    def release_name(self, v: Value) -> None:
        """Free ``v.name`` when it names ``v`` (``v`` is about to leave the scope or be renamed)."""
        if self._names.get(v.name) is v:
            del self._names[v.name]

    def rename(self, v: Value, new_name: str) -> None:
        """Rename ``v``; raises IRError if ``new_name`` is taken."""
        if new_name == v.name:
            return
        if new_name in self._names:
            raise IRError(f"cannot rename %{v.name} to %{new_name}: name in use")
        del self._names[v.name]
        v.name = new_name
        self._names[new_name] = v
