"""The driver's ``control-flow`` stage: a model whose If/Loop/Scan are decided at run time.

After the ONNX-level passes (``compiler.driver.prepare``) have resolved every ``If`` whose condition
and every ``Loop``/``Scan`` whose control is known at compile time (inlined, or unrolled when short:
``compiler.frontend.control_flow``), the top-level control-flow nodes left are run by the runtime
(``compiler.runtime.control``). The model is partitioned at them, as ONNX Runtime partitions a graph
between execution providers: each run of other nodes between them becomes a part compiled by the
whole driver as a model of its own (its inputs the values it reads from before, its outputs the
values read after it or graph outputs); each ``If`` branch and each ``Loop``/``Scan`` body becomes
a part too (its inputs the body's inputs and the outer values it reads), compiled once, nested
control flow in it handled the same way. Values that cross a part boundary must have static shapes;
one that does not (an ``If`` whose branches give different shapes, a ``Loop`` scan output whose
length is the run-time trip count) may only be a graph output, else a CompileError names the node.
A ``Loop`` body that is one Program with an entry function also gets a loop function in generated
code (``compiler.codegen.loop_entry``: a native loop calling the body's entry, carried values copied
between its buffers); its decision says so, or why its iterations are dispatched from Python.

The stage emits ``kernel.lowered``/``kernel.compiled`` for every part's kernels (named
``<part>/<kernel>``) and one ``graph.fused`` for the whole model: every part's nodes and groups, the
control-flow nodes with ``control`` {``decision``, ``bodies`` [{``name``, ``kernels``}]}, and the
``control`` list of decisions (:attr:`Compilation.control`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, helper, numpy_helper

from ..codegen.loop_entry import compile_loop
from ..errors import CompileError, syntax
from ..events import EventStream
from ..frontend.input_values import input_uses, value_inputs
from ..frontend.value_types import value_types
from ..runtime.control import ControlProgram, InvalidBranch, Part, Step
from ..runtime.native_loop import loop_plan, scan_plan
from ..runtime.pool import check_threads
from ..targets import get_target
from .stages import run_stages
from .state import Compilation

CONTROL = ("If", "Loop", "Scan")


def is_control(n: NodeProto) -> bool:
    return n.op_type in CONTROL and n.domain in ("", "ai.onnx")


def free_names(g: GraphProto) -> list[str]:
    """Names ``g``'s nodes (and their nested bodies) read, and its outputs name, that ``g`` does not
    define, in order (a branch may return an outer value as it is: ONNX's scoping rules)."""
    own = {i.name for i in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    out: dict[str, None] = {}
    for n in g.node:
        for name in [*n.input, *(x for sg in _bodies(n) for x in free_names(sg))]:
            if name and name not in own:
                out[name] = None
    for o in g.output:
        if o.name and o.name not in own:
            out[o.name] = None
    return list(out)


def _bodies(n: NodeProto) -> list[GraphProto]:
    return [a.g for a in n.attribute if a.type == a.GRAPH] + [g for a in n.attribute if a.type == a.GRAPHS for g in a.graphs]


def reads(n: NodeProto) -> list[str]:
    """The names node ``n`` reads: its inputs and the outer names its bodies read."""
    return [i for i in n.input if i] + [x for g in _bodies(n) for x in free_names(g)]


class _Planner:
    def __init__(self, comp: Compilation) -> None:
        assert comp.proto is not None
        self.comp, self.proto = comp, comp.proto
        self.types: dict[str, tuple[Any, Any]] = value_types(self.proto)
        self.inits = {t.name: t for t in self.proto.graph.initializer}
        self.fused: list[tuple[str, dict[str, Any]]] = []  # (part label, graph.fused payload)
        self.decisions: list[dict[str, Any]] = []
        self.kernels: list[Any] = []  # every part's LoweredKernel, named <part>/<kernel>
        bindable = {v["name"] for v in value_inputs(self.proto)}  # small integer inputs a request may bind
        self.uses = {(n.name, pos): name for name, n, pos in input_uses(self.proto) if name in bindable}

    # building parts ---------------------------------------------------------------------------
    def vi(self, name: str, types: dict[str, tuple[list[Any], Any]], *, static: bool, label: str,
           reader: tuple[str, str] | None = None) -> Any:
        """``name``'s value info; with ``static``, CompileError(stage="shape") naming ``reader`` (words,
        node: ``_reader``) or the part ``label`` when its shape is not static."""
        shape, dtype = types.get(name, (None, None))
        if static and (shape is None or not all(isinstance(d, int) for d in shape)):
            who, node = reader or (label, label)
            raise CompileError("shape", f"{who} reads %{name}, whose shape is known only at run time "
                               f"({shape if shape is not None else 'unknown'}); a value crossing a run-time "
                               "control-flow boundary needs a static shape", node=node)
        elem = helper.np_dtype_to_tensor_dtype(dtype) if dtype is not None else TensorProto.UNDEFINED
        return helper.make_tensor_value_info(name, elem, shape)

    def _reader(self, value: str, nodes: list[NodeProto]) -> tuple[str, str] | None:
        """``(words, node label)`` for who reads ``value`` among a part's ``nodes``: the first reading node
        and, where a control-flow node makes it, that node ("Relu:y (Relu), after Loop 'grow',")."""
        node = next((n for n in nodes if value in n.input), None)
        if node is None:
            return None
        label = node.name or f"{node.op_type}:{node.output[0]}"
        maker = next((n for n in self.proto.graph.node if value in n.output), None)
        after = f", after {maker.op_type} {(maker.name or maker.output[0])!r}," if maker is not None \
            and maker.op_type in ("If", "Loop", "Scan") else ""
        return f"{label} ({node.op_type}){after}", label

    def model(self, name: str, nodes: list[NodeProto], inputs: list[str], in_types: dict[str, Any],
              outputs: list[str], inits: list[TensorProto]) -> ModelProto:
        nodes = list(nodes)
        made = {o for n in nodes for o in n.output}
        outs = []
        for k, o in enumerate(outputs):  # an output that is an input or a constant: through an Identity
            if o in made:
                outs.append(o)
            else:
                outs.append(f"{name}__out{k}")
                nodes.append(helper.make_node("Identity", [o], [outs[-1]]))
        used = {x for n in nodes for x in reads(n)}
        inits = list(inits) + [self.inits[x] for x in used if x in self.inits and x not in inputs]
        g = helper.make_graph(nodes, name, [self.vi(i, in_types, static=True, label=name, reader=self._reader(i, nodes))
                                            for i in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
                              list({t.name: t for t in inits}.values()))
        m = helper.make_model(g, opset_imports=list(self.proto.opset_import), ir_version=self.proto.ir_version)
        m.functions.extend(self.proto.functions)
        return m

    def compile(self, model: ModelProto, label: str) -> Part:
        """``model`` through every stage of the driver (nested control flow too)."""
        parent = self.comp
        req = dataclasses.replace(parent.request, model=model, input_shapes=None, input_values=None, verify=False,
                                  benchmark=False, check_passes=False, link=True, calibration_data=None)

        def forward(e: dict[str, Any]) -> None:
            if e["type"] in ("kernel.lowered", "kernel.compiled") and parent.request.kernel_events:
                parent.events.emit(e["type"], **{k: v for k, v in e.items() if k not in ("seq", "type", "ts")}
                                   | {"kernel": f"{label}/{e['kernel']}"})
            elif e["type"] == "graph.fused":
                self.fused.append((label, e))

        sub = Compilation(req, EventStream(forward), stage_ms={})
        try:
            run_stages(sub)
        except CompileError as e:
            raise CompileError(e.stage, f"{label}: {e.message}", node=e.node or label, op=e.op, pass_name=e.pass_name,
                               kernel=e.kernel, attribute=e.attribute) from None
        if sub.trims or sub.sequence_layout:
            raise CompileError("shape", f"{label}: a data-dependent output length or a sequence inside a part of a "
                               "model with run-time control flow is not supported", node=label)
        for k, v in sub.stage_ms.items():  # the parts' stage times are the model's
            parent.stage_ms[k] = parent.stage_ms.get(k, 0.0) + v
        self.kernels += [dataclasses.replace(lk, name=f"{label}/{lk.name}") for lk in sub.kernels]  # for kernel.timed
        return Part(sub.program, [i.name for i in model.graph.input], [o.name for o in model.graph.output], label)

    def body_part(self, body: GraphProto, label: str, head: list[tuple[str, tuple[Any, Any]]]
                  ) -> tuple[Part, list[str], dict[str, tuple[Any, Any]]]:
        """A branch or body as a part: ``head`` its own inputs with their types, then the outer values
        it reads. Returns the part, the outer names it reads and the body's value types."""
        own = [name for name, _ in head]
        captured = [x for x in free_names(body) if x not in self.inits and x not in own]
        types: dict[str, tuple[Any, Any]] = dict(self.types) | dict(head)
        m = self.model(label, list(body.node), own + captured, types, [o.name for o in body.output],
                       list(body.initializer))
        part = self.compile(m, label)
        part.outputs = [o.name for o in body.output]
        return part, captured, value_types(m)

    # steps ----------------------------------------------------------------------------------
    def step(self, node: NodeProto, later: set[str]) -> Step:
        label = node.name or node.output[0]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "If":
            return self.if_step(node, label, attrs, later)
        if node.op_type == "Loop":
            return self.loop_step(node, label, attrs)
        return self.scan_step(node, label, attrs)

    def if_step(self, node: NodeProto, label: str, attrs: dict[str, Any], later: set[str]) -> Step:
        parts, shapes, errors = [], [], []
        for key in ("then_branch", "else_branch"):
            try:
                part, captured, types = self.body_part(attrs[key], f"{label}.{key}", [])
            except CompileError as e:  # invalid at these shapes; the condition may never choose it
                errors.append(e)
                msg = f"If {label!r} took its {key}, which does not compile at the compiled shapes: {e.message}"
                parts.append(Part(InvalidBranch(msg), [], [o.name for o in attrs[key].output], f"{label}.{key}"))
                continue
            part.inputs = captured
            parts.append(part)
            shapes.append([types.get(o.name, (None, None))[0] for o in attrs[key].output])
        if len(errors) == 2:
            raise errors[0]
        if errors:
            self.decide(node, label, f"the condition is evaluated at run time; one branch does not compile at these "
                        f"shapes ({errors[0].message}): taking it is a run-time error", [p.label for p in parts])
            return Step("If", label, parts, [node.input[0]], list(node.output))
        for k, (a, b) in enumerate(zip(*shapes, strict=True)):
            if a != b and node.output[k] in later:
                raise CompileError("shape", f"If {label!r}: its branches give output {k} (%{node.output[k]}) the shapes "
                                   f"{a} and {b}, and the nodes after it are compiled for one shape; only a graph "
                                   "output may differ in shape between the branches", node=label, op="If")
        self.decide(node, label, "both branches compiled; the condition is evaluated at run time and one branch runs",
                    [p.label for p in parts])
        return Step("If", label, parts, [node.input[0]], list(node.output))

    def loop_step(self, node: NodeProto, label: str, attrs: dict[str, Any]) -> Step:
        body: GraphProto = attrs["body"]
        ins = list(node.input) + [""] * (2 - len(node.input))
        carried = ins[2:]
        head: list[tuple[str, tuple[Any, Any]]] = [(body.input[0].name, ([], "int64")), (body.input[1].name, ([], "bool"))]
        head += [(b.name, self.types.get(c, (None, None))) for b, c in zip(body.input[2:], carried, strict=True)]
        head = [(n, (s, _np(d))) for n, (s, d) in head]
        n_c = len(carried)
        try:
            part, captured, types = self.body_part(body, f"{label}.body", head)
        except CompileError as e:  # invalid at these shapes; a zero-trip loop never runs it
            return self.invalid_loop(node, label, body, ins[:2] + carried, n_c, e)
        for k, (o, (name, (shape, _))) in enumerate(zip(body.output[1:1 + n_c], head[2:], strict=True)):
            got = types.get(o.name, (None, None))[0]
            if got is not None and got != shape:
                raise CompileError("shape", f"Loop {label!r}: loop-carried value {k} (%{name}) enters the body as "
                                   f"{shape} and leaves it as {got}; Prism runs loops whose carried values keep "
                                   "their shape", node=label, op="Loop")
        scan_shapes = [self.static(types, o.name, f"Loop {label!r}: scan output") for o in body.output[1 + n_c:]]
        attrs = {"n_carried": n_c, "scan_shapes": scan_shapes, "captured": captured}
        how = self.native_loop(part, n_c, attrs)
        self.decide(node, label, "run at run time: the body compiled once, called once per iteration with its "
                    "loop-carried values (the trip count or condition is known only at run time, or the loop is "
                    f"too long to unroll); {how}", [part.label])
        return Step("Loop", label, [part], ins[:2] + carried, list(node.output), attrs)

    def invalid_loop(self, node: NodeProto, label: str, body: GraphProto, ins: list[str], n_c: int,
                     err: CompileError) -> Step:
        """A Loop whose body does not compile at the compiled shapes: zero iterations give the initial
        values (and empty scan outputs, of the body's declared shapes); entering the body is a
        CompileError(stage="run") naming the Loop. Raises ``err`` when a scan output's shape is not
        declared (an empty result could not be shaped)."""
        scan_shapes = []
        for o in body.output[1 + n_c:]:
            tt = o.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] if tt.HasField("shape") else None
            if dims is None or None in dims:
                raise err
            scan_shapes.append((dims, helper.tensor_dtype_to_np_dtype(tt.elem_type)))
        msg = f"Loop {label!r} ran its body, which does not compile at the compiled shapes: {err.message}"
        part = Part(InvalidBranch(msg, "Loop"), [], [o.name for o in body.output], f"{label}.body")
        self.decide(node, label, f"the trip count and condition are known only at run time; the body does not compile "
                    f"at these shapes ({err.message}): a loop that runs no iteration returns its initial values, "
                    "entering the body is a run-time error", [part.label])
        return Step("Loop", label, [part], ins, list(node.output), {"n_carried": n_c, "scan_shapes": scan_shapes,
                                                                    "captured": []})

    def native_loop(self, part: Part, n_c: int, attrs: dict[str, Any], scan: bool = False) -> str:
        """Compile the loop function of ``part`` (``compiler.codegen.loop_entry``) into its objects and
        ``attrs["native"]``; returns the decision's words (why the iterations stay in Python if so)."""
        if part.program is None:  # no back end
            return "no code generated"
        plan = scan_plan(part.program, n_c, attrs) if scan else loop_plan(part.program, n_c)
        if isinstance(plan, str):
            return f"the iterations are dispatched from Python because {plan}"
        sym, obj = compile_loop(part.program.entry, plan["carried"], plan["scans"], plan["cond_out"],
                                self.comp.target or get_target("host"), plan.get("scan_ins", ()),
                                plan.get("reverse_out", ()))
        part.program.objects[sym] = obj
        attrs["native"] = {**plan, "symbol": sym}
        return ("the iterations run in generated code (a native loop calls the body's entry function, loop-carried "
                "values copied between its buffers; from Python only when scan outputs have no trip count to size them)")

    def scan_step(self, node: NodeProto, label: str, attrs: dict[str, Any]) -> Step:
        if next((o.version for o in self.proto.opset_import if o.domain in ("", "ai.onnx")), 9) < 9:
            raise CompileError("lowering", f"Scan {label!r}: opset 8's batched Scan is run only unrolled",
                               node=label, op="Scan")
        body: GraphProto = attrs["body"]
        m = int(attrs["num_scan_inputs"])
        n = len(node.input) - m
        k = len(body.output) - n
        in_axes = [int(a) for a in attrs.get("scan_input_axes", [0] * m)]
        head = [(b.name, self.types.get(x, (None, None))) for b, x in zip(body.input[:n], node.input[:n], strict=True)]
        for j, (b, x) in enumerate(zip(body.input[n:], node.input[n:], strict=True)):
            shape, dtype = self.types.get(x, (None, None))
            if shape is None:
                raise CompileError("shape", f"Scan {label!r}: scan input %{x} has no static shape", node=label, op="Scan")
            in_axes[j] %= len(shape)
            head.append((b.name, ([d for i, d in enumerate(shape) if i != in_axes[j]], dtype)))
        part, captured, types = self.body_part(body, f"{label}.body", head)
        shapes = [self.static(types, o.name, f"Scan {label!r}: scan output") for o in body.output[n:]]
        out_axes = [int(a) % (len(s) + 1) for a, s in zip(attrs.get("scan_output_axes", [0] * k), (x[0] for x in shapes),
                                                            strict=True)]
        step_attrs = {"n_state": n, "in_axes": in_axes, "in_dirs": list(attrs.get("scan_input_directions", [0] * m)),
                      "out_axes": out_axes, "out_dirs": list(attrs.get("scan_output_directions", [0] * k)),
                      "scan_shapes": shapes, "captured": captured}
        how = self.native_loop(part, n, step_attrs, scan=True)
        self.decide(node, label, f"run at run time: the body compiled once, called once per slice (too long to unroll); "
                    f"{how}", [part.label])
        return Step("Scan", label, [part], list(node.input), list(node.output), step_attrs)

    def static(self, types: dict[str, Any], name: str, what: str) -> tuple[list[int], Any]:
        shape, dtype = types.get(name, (None, None))
        if shape is None or not all(isinstance(d, int) for d in shape):
            raise CompileError("shape", f"{what} %{name} has no static shape per iteration ({shape})")
        return list(shape), dtype

    def decide(self, node: NodeProto, label: str, decision: str, bodies: list[str]) -> None:
        why = ""
        for pos in range(len(node.input)):
            name = self.uses.get((node.name, pos))
            if name is not None:
                how = syntax(f"--input-value {name}=V", f"input_values={{{name!r}: [V]}}")
                why = f"; it depends on input {name!r}: bind it with {how} to decide it at compile time"
                break
        self.decisions.append({"node": label, "op": node.op_type, "decision": decision + why, "bodies": bodies})

    # the whole model -------------------------------------------------------------------------
    def build(self) -> ControlProgram | None:
        """The program (None without a back end: the parts then stop after the graph passes)."""
        groups: list[list[NodeProto]] = [[]]
        for n in self.proto.graph.node:
            if is_control(n):
                groups += [[n], []]
            else:
                groups[-1].append(n)
        groups = [g for g in groups if g]
        outs = [o.name for o in self.proto.graph.output]
        later_reads: list[set[str]] = [set()]  # per group: what the nodes after it read
        for g in reversed(groups[1:]):
            later_reads.insert(0, later_reads[0] | {x for n in g for x in reads(n)})
        steps = []
        for k, (g, read_after) in enumerate(zip(groups, later_reads, strict=True)):
            later = read_after | set(outs)
            if is_control(g[0]):
                steps.append(self.step(g[0], read_after))
                continue
            made = [o for n in g for o in n.output if o]
            inside = set(made)
            ins = list(dict.fromkeys(x for n in g for x in reads(n) if x not in inside and x not in self.inits))
            label = f"part{k}"
            m = self.model(label, g, ins, self.types, [o for o in made if o in later], [])
            part = self.compile(m, label)
            part.outputs = [o for o in made if o in later]
            steps.append(Step("part", label, [part], ins, part.outputs))
        if not self.comp.request.backend:
            return None
        inputs = [(vi.name, str(self.types[vi.name][1]), tuple(self.types[vi.name][0])) for vi in self.proto.graph.input
                  if vi.name not in self.inits]
        read = {x for s in steps if s.kind != "part" for x in s.inputs}  # a Loop's M, an initial carried value ...
        constants = {x: numpy_helper.to_array(self.inits[x]) for x in read if x in self.inits}
        return ControlProgram(inputs=inputs, outputs=[(o, "value", o) for o in outs], steps=steps, constants=constants,
                              pipeline=self.comp.pipeline.text() if self.comp.pipeline is not None else "",
                              threads=check_threads(self.comp.request.threads))


def _np(d: Any) -> Any:
    return np.dtype(d) if d is not None else None


def compile_control(comp: Compilation) -> None:
    """Stage ``control-flow``: for a model with top-level If/Loop/Scan left after the ONNX-level passes,
    ``comp.program`` (a :class:`~compiler.runtime.control.ControlProgram`) and ``comp.control`` (one
    decision per control-flow node: {node, op, decision, bodies}); a ``graph.fused`` event for the whole
    model. Without a back end (``Request.backend`` False) the parts run through the graph passes only and
    ``comp.program`` stays None. Nothing for other models (the import ... link stages compile them). Raises CompileError
    naming the node or part that cannot be compiled (see the module docstring)."""
    assert comp.proto is not None
    if not any(is_control(n) for n in comp.proto.graph.node):
        return
    planner = _Planner(comp)
    comp.program = planner.build()
    comp.control = planner.decisions
    comp.kernels = planner.kernels
    comp.events.emit("graph.fused", **fused_payload(planner))


def fused_payload(planner: _Planner) -> dict[str, Any]:
    """The ``graph.fused`` payload of the whole model: the parts' nodes and groups (group ids and
    kernels prefixed with their part), the control-flow nodes with their decision and bodies."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    kernels: dict[str, list[str]] = {}
    for label, e in planner.fused:
        top = "." not in label
        for g in e["groups"]:
            kernels.setdefault(label, []).append(f"{label}/{g['kernel']}")
            if top:
                groups.append({**g, "id": f"{label}/{g['id']}", "kernel": f"{label}/{g['kernel']}"})
        if top:
            nodes += [{**n, "group": f"{label}/{n['group']}" if n.get("group") else None} for n in e["nodes"]]
            edges += e["edges"]
    for d in planner.decisions:
        nodes.append({"id": d["node"], "name": d["node"], "op_type": d["op"], "group": None,
                      "control": {"decision": d["decision"],
                                  "bodies": [{"name": b, "kernels": kernels.get(b, [])} for b in d["bodies"]]}})
    return {"nodes": nodes, "edges": edges, "groups": groups, "control": planner.decisions}
