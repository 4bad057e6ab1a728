"""The round loop of the ONNX-level rewrites that repeat until nothing changes.

Function expansion (:mod:`.expand`) and control-flow inlining (:mod:`.inline_control`) rewrite the
top-level nodes of a model in rounds, since a rewrite may expose nodes (a function body's, a
branch's) that the next round rewrites in turn. :func:`rewrite_rounds` owns that loop: the copy,
the round limit, the replacement of the node list and "the model itself when nothing changed".
"""

from __future__ import annotations

from collections.abc import Callable

from onnx import ModelProto, NodeProto


def rewrite_rounds(model: ModelProto, max_rounds: int,
                   step: Callable[[ModelProto, int], list[NodeProto] | None]) -> ModelProto:
    """``model`` rewritten by ``step`` at most ``max_rounds`` times, on a copy.

    ``step(out, round)`` (round from 0) reads the copy ``out`` and returns its new top-level node
    list, or None when it changes nothing (the loop ends); it may also add to ``out``'s
    initializers and opset imports. Returns the copy, or ``model`` itself (never modified) when the
    first round changes nothing.
    """
    out = ModelProto()
    out.CopyFrom(model)
    any_change = False
    for rnd in range(max_rounds):
        new_nodes = step(out, rnd)
        if new_nodes is None:
            break
        any_change = True
        del out.graph.node[:]
        out.graph.node.extend(new_nodes)
    return out if any_change else model
