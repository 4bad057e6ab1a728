"""Where a node inlined from a control-flow body came from, as the user wrote it (issue 13).

``inline-control-flow`` copies an If branch or a Loop/Scan body once per step into the top-level
graph under prefixed names (``body__cf3_Squeeze``). Each copy records in its
``NodeProto.metadata_props`` the control node, the step or branch and the body node
(:func:`control_place`, written by ``compiler.frontend.control_flow.inline_body``); a function
expanded from such a node keeps it (``compiler.frontend.expand``). :func:`place_error` re-says a
CompileError about such a node with those names (``compiler.driver.stages.run_stages`` calls it),
so that an error names the Scan and its body node, not the copy.
"""

from __future__ import annotations

from typing import Any

from onnx import ModelProto, NodeProto

ORIGIN = "prism.inlined_from"  # NodeProto.metadata_props key: "<control node> (<op>, <where>): body node <label> (<op>)"
ORIGIN_NODE = "prism.inlined_node"  # ... and the outermost control node's label and op, tab-separated


def meta(node: NodeProto, key: str) -> str | None:
    """The value of ``node``'s metadata property ``key`` (None when it has none)."""
    return next((p.value for p in node.metadata_props if p.key == key), None)


def set_meta(node: NodeProto, key: str, value: str) -> None:
    """Set ``node``'s metadata property ``key`` to ``value`` (in place)."""
    for p in node.metadata_props:
        if p.key == key:
            p.value = value
            return
    node.metadata_props.add(key=key, value=value)


def body_label(n: NodeProto) -> str:
    """A body node as the user wrote it: its name, or op type and first output (``Graph`` labels)."""
    return n.name or f"{n.op_type}:{n.output[0] if n.output else '?'}"


def control_place(node: NodeProto, where: str) -> tuple[str, str, str]:
    """``(place, outermost label, its op)`` for the body of control node ``node`` inlined ``where``
    ("step 2 of 3, unrolled", "then_branch inlined"): ``"rnn (Scan, step 2 of 3, unrolled)"``;
    a control node itself inlined from a body continues its chain
    (``"rnn (Scan, step 0 of 3, unrolled): body node br (If), then_branch inlined"``)."""
    outer, top = meta(node, ORIGIN), meta(node, ORIGIN_NODE)
    if outer is not None and top is not None:
        label, _, op = top.partition("\t")
        return f"{outer}, {where}", label, op
    return f"{body_label(node)} ({node.op_type}, {where})", body_label(node), node.op_type


def inlined_from(node: NodeProto) -> tuple[str, str, str] | None:
    """``(where, control node label, its op)`` for a node inlined from a control-flow body (None for
    any other): ``where`` names the control node, step or branch and the body node as written."""
    where, top = meta(node, ORIGIN), meta(node, ORIGIN_NODE)
    if where is None or top is None:
        return None
    label, _, op = top.partition("\t")
    return where, label, op


def place_error(model: ModelProto | None, err: Any) -> Any:
    """``err`` (a CompileError) about a node of ``model`` inlined from a control-flow body, re-said
    with the control node and body node as the user wrote them (``node``/``op`` the outermost
    control node's); ``err`` itself for any other node."""
    if model is None or not getattr(err, "node", None):
        return err
    found = next((inlined_from(n) for n in model.graph.node
                  if err.node in (n.name, f"{n.op_type}:{n.output[0] if n.output else '?'}")), None)
    if found is None:
        return err
    where, label, op = found
    said = f"{err.node} ({err.op})" if err.op else err.node
    if said in err.message:
        msg = err.message.replace(said, where, 1)
    else:  # "no lowering for op X (node <copy>)": the place first, the copy's name dropped
        msg = f"{where}: {err.message.replace(f' (node {err.node})', '')}"
    return type(err)(err.stage, msg, node=label, op=op, pass_name=err.pass_name, kernel=err.kernel,
                     attribute=err.attribute)


def carry_origin(src: NodeProto, nodes: list[NodeProto], how: str) -> None:
    """Nodes that replace ``src`` (its function body, ``how`` e.g. "expanded to") keep where ``src`` came
    from, with ``how`` and their own op added; nothing when ``src`` was not inlined."""
    where, top = meta(src, ORIGIN), meta(src, ORIGIN_NODE)
    if where is None or top is None:
        return
    for n in nodes:
        set_meta(n, ORIGIN, f"{where}, {how} {n.op_type}")
        set_meta(n, ORIGIN_NODE, top)
