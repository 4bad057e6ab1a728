"""A Loop that appends one tensor per iteration to a sequence, stacked after it: a scan output.

The form exporters write for a Python list grown in a loop (``torch.onnx`` of ``out.append(x)``
then ``torch.stack(out)``)::

    s0 = SequenceEmpty()
    sf = Loop(M, cond, s0, ...)        body: s2 = SequenceInsert(s, v)  (at the end)
    y  = ConcatFromSequence(sf, axis=0, new_axis=1)

is, by the ONNX specs of Loop, SequenceInsert and ConcatFromSequence, the Loop with ``v`` as a scan
output (scan outputs are the per-iteration values stacked along a new axis 0)::

    y = Loop(M, cond, ...)             body: ..., scan output v

:func:`sequence_loops_to_scans` rewrites it so, before ``resolve-sequences``: a sequence whose length is
the run-time trip count is not a static list, but the scan output is a tensor the runtime sizes
(``compiler.driver.control``). Only this exact form is rewritten: the carried sequence starts as
``SequenceEmpty``, enters the body only into one ``SequenceInsert`` without a position whose result
is only that carried output, and leaves the Loop only into one ``ConcatFromSequence`` with
``new_axis=1`` and ``axis=0`` (not a graph output). Anything else is left as it was. For zero
iterations the stack is empty (its shape ``[0, ...]``), where ``ConcatFromSequence`` of an empty
sequence is not defined.
"""

from __future__ import annotations

from onnx import ModelProto, NodeProto, TensorProto, TypeProto, helper

from .control_flow import _attr


def _consumers(nodes: list[NodeProto], name: str) -> list[NodeProto]:
    return [n for n in nodes if name in n.input]


def _scan_form(model: ModelProto, loop: NodeProto, k: int) -> tuple[NodeProto, NodeProto, NodeProto] | None:
    """``(SequenceEmpty, SequenceInsert in the body, ConcatFromSequence)`` when carried value ``k`` of
    ``loop`` is the form of the module docstring, else None."""
    body = loop.attribute[[a.name for a in loop.attribute].index("body")].g
    nodes, init = list(model.graph.node), loop.input[2 + k]
    empty = next((n for n in nodes if init in n.output), None)
    if empty is None or empty.op_type != "SequenceEmpty":
        return None
    s_in, s_out = body.input[2 + k].name, body.output[1 + k].name
    uses = _consumers(list(body.node), s_in)
    ins = uses[0] if len(uses) == 1 else None
    if ins is None or ins.op_type != "SequenceInsert" or list(ins.input[:1]) != [s_in] or len(ins.input) != 2 \
            or list(ins.output) != [s_out] or _consumers(list(body.node), s_out) or s_in in ins.input[1:]:
        return None
    final = loop.output[k] if k < len(loop.output) else ""
    if not final or final in {o.name for o in model.graph.output}:
        return None
    users = _consumers(nodes, final)
    cat = users[0] if len(users) == 1 else None
    if cat is None or cat.op_type != "ConcatFromSequence" or int(_attr(cat, "new_axis", 0)) != 1 \
            or int(_attr(cat, "axis", 0)) != 0:
        return None
    return empty, ins, cat


def _rewrite(loop: NodeProto, k: int, empty: NodeProto, ins: NodeProto, cat: NodeProto) -> NodeProto:
    """``loop`` without carried value ``k``, with ``ins``'s element as its last scan output, written to
    ``cat``'s output (its type the sequence's element type, else a tensor of ``empty``'s dtype)."""
    body = loop.attribute[[a.name for a in loop.attribute].index("body")].g
    n_c = len(loop.input) - 2
    elem = TypeProto()
    elem.CopyFrom(body.output[1 + k].type.sequence_type.elem_type)
    if not elem.HasField("tensor_type"):
        elem.tensor_type.elem_type = int(_attr(empty, "dtype", TensorProto.FLOAT))
    v = ins.input[1]
    new_body = helper.make_graph([n for n in body.node if n is not ins], body.name,
                                 [x for i, x in enumerate(body.input) if i != 2 + k],
                                 [x for i, x in enumerate(body.output) if i != 1 + k], list(body.initializer),
                                 value_info=list(body.value_info))
    if v in {x.name for x in body.input} or v not in {o for n in body.node for o in n.output}:
        v_out = f"{v}__scan_elem"  # a scan output is a value the body computes
        new_body.node.append(helper.make_node("Identity", [v], [v_out]))
        v = v_out
    out_vi = new_body.output.add()
    out_vi.name = v
    out_vi.type.CopyFrom(elem)
    outs = [o for i, o in enumerate(loop.output) if i != k]
    while len(outs) < n_c - 1 + (len(body.output) - 1 - n_c):  # unnamed trailing outputs kept as positions
        outs.append("")
    new = helper.make_node("Loop", [x for i, x in enumerate(loop.input) if i != 2 + k], [*outs, cat.output[0]],
                           name=loop.name, body=new_body)
    for a in loop.attribute:
        if a.name != "body":
            new.attribute.append(a)
    return new


def sequence_loops_to_scans(model: ModelProto) -> tuple[ModelProto, list[str]]:
    """A copy of ``model`` with every top-level Loop of the module docstring's form given a scan output
    instead of its carried sequence (``model`` itself when there is none), and the Loops' labels."""
    done: list[str] = []
    out = model
    for _ in range(16):  # one carried sequence a round
        hit = next(((i, k, f) for i, n in enumerate(out.graph.node) if n.op_type == "Loop" and n.domain in ("", "ai.onnx")
                    for k in range(len(n.input) - 2) if (f := _scan_form(out, n, k)) is not None), None)
        if hit is None:
            break
        i, k, (empty, ins, cat) = hit
        loop = out.graph.node[i]
        done.append(loop.name or f"Loop->{loop.output[0] if loop.output else ''}")
        new = _rewrite(loop, k, empty, ins, cat)
        kept = []
        for n in out.graph.node:
            if n is not cat:
                c = NodeProto()
                c.CopyFrom(new if n is loop else n)
                kept.append(c)
        if out is model:
            out = ModelProto()
            out.CopyFrom(model)
        del out.graph.node[:]
        out.graph.node.extend(kept)
    return out, done
