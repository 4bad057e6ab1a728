"""Prism as an ONNX backend: the standard ``onnx.backend.base.Backend`` interface.

``PrismBackend.prepare(model, device="CPU", pipeline="O2")`` checks the model and returns a
:class:`PrismRep`; ``rep.run(inputs)`` specializes the model to the shapes of ``inputs``, compiles
it with the real compiler (the staged driver, ``compiler.driver.compile_program``: ONNX-level
passes -> graph IR -> graph passes -> lowering and schedules -> LLVM codegen -> link) for the ``host`` target, executes it and returns the
outputs as a namedtuple (``onnx.backend.base.namedtupledict``), as the ONNX backend test runner
expects. A compiled program is cached per tuple of input shapes (and dtypes): a new shape compiles
again, the same shape does not.

Shape inputs: a graph input that a node reads in a slot that determines a shape or a compile-time
parameter (Reshape's ``shape``, Slice's ``starts``/``ends``/``axes``/``steps``, a Reduce op's
``axes``, TopK's ``K``, Resize's ``scales``/``sizes``, Pad's ``pads`` ...; see ``SHAPE_INPUTS``)
is specialized by value as well: the program is compiled with it bound as a constant, and its
value is part of the cache key (a new value compiles again). So is a small input (<= 64 elements)
that an ``If`` condition or a ``Loop`` trip count is computed from (``control_inputs``): the
branch is chosen, or the loop unrolled, at compile time. Every other input stays a runtime
input of the compiled code.

Data-dependent lengths: a NonZero, Compress, Unique or NonMaxSuppression whose results are graph outputs is
compiled as a padded result plus a count, and the output is trimmed to the count (``compiler.frontend.bounded``).
NonMaxSuppression's ``max_output_boxes_per_class`` sizes that bound, so it is bound by value; its thresholds stay
runtime inputs.

Sequences and optionals (a list of arrays; None, an array or a list): each element of a sequence
input is a tensor input of a model compiled for that length and presence, the sequence ops are
resolved at compile time, and sequence/optional outputs are rebuilt from their element outputs
(``compiler.frontend.sequence_io``, ``compiler.frontend.sequences``). Positions (SequenceAt/
Insert/Erase) and SplitToSequence's ``split`` are bound by value like shape inputs.

Narrow element types (float16, bfloat16, the float8 formats, float8e8m0, float4e2m1, int4, uint4,
int2, uint2) are storage types computed in a compute type (float32, int8, uint8): the model is
legalized by ``compiler.frontend.narrow_types`` (explicit ``prism.NarrowCast`` rounding steps
wherever the model produces a narrow value); narrow inputs (``ml_dtypes`` arrays, as
``onnx.numpy_helper.to_array`` gives them) are widened exactly, and narrow outputs are encoded back
to their declared type with ``ml_dtypes`` (exact: their values are on the format's grid).

Options (keyword arguments of ``prepare``/``run_model``/``run_node``):
    pipeline: pass pipeline text or preset (default ``"O2"``).
    target: compilation target (default ``"host"``; it must be runnable here).
    isolate: run generated code in a fresh child process (default True): a crash in a kernel
        raises ``CompileError(stage="run")`` naming it instead of killing the caller. The
        conformance runner, which isolates whole cases itself, passes ``isolate=False``.
    timeout_s: limit for one isolated run (default 300 s).

Errors: every failure is a :class:`compiler.errors.CompileError` with its stage (``import``,
``shape``, ``passes``, ``lowering``, ``codegen``, ``run``, ``request``).
Semantics of the interface: ``onnx/backend/base.py`` and ``onnx/backend/test/runner``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from .driver import compile_program
from .errors import CompileError
from .frontend.bounded import trim_outputs
from .frontend.narrow_types import legalize, narrow_outputs, uses_narrow_types, widen
from .frontend.sequence_io import flatten_inputs, rebuild_outputs
from .runtime.execute import Program, run_program, run_program_isolated

# (op type, input index) whose value determines an output shape or a compile-time parameter
_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "Squeeze": (1,),
    "Unsqueeze": (1,), "Resize": (1, 2, 3), "Upsample": (1,), "TopK": (1,), "Range": (0, 1, 2),
    "ConstantOfShape": (0,), "OneHot": (1,), "Split": (1,), "CumSum": (1,), "CumProd": (1,), "Trilu": (1,), "CenterCropPad": (1,),
    "Col2Im": (1, 2), "DFT": (1, 2), "STFT": (1, 3), "AffineGrid": (1,), "Dropout": (1, 2), "MaxUnpool": (2,),
    "NonMaxSuppression": (2,), "BlackmanWindow": (0,), "HannWindow": (0,), "HammingWindow": (0,), "MelWeightMatrix": (0, 1, 2, 3, 4),
    "SplitToSequence": (1,), "SequenceInsert": (2,), "SequenceAt": (1,), "SequenceErase": (1,),
    **{r: (1,) for r in _REDUCE},
}


def shape_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs read in a shape-determining slot (``SHAPE_INPUTS``: Reshape's shape, Slice's
    starts/ends/axes/steps, Reduce axes, TopK's K, Resize scales/sizes ...) by a top-level node."""
    inits = {t.name for t in model.graph.initializer}
    names = {i.name for i in model.graph.input if i.name not in inits}
    out: list[str] = []
    for n in model.graph.node:
        for k in SHAPE_INPUTS.get(n.op_type, ()) if n.domain in ("", "ai.onnx") else ():
            if k < len(n.input) and n.input[k] in names and n.input[k] not in out:
                out.append(n.input[k])
    return out


def _backward_slice(model: onnx.ModelProto, seeds: list[str]) -> list[str]:
    """Graph inputs that the values ``seeds`` are computed from (through top-level nodes)."""
    inits = {t.name for t in model.graph.initializer}
    names = {i.name for i in model.graph.input if i.name not in inits}
    producer = {o: n for n in model.graph.node for o in n.output}
    stack, seen, out = list(seeds), set(), []
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in names:
            out.append(v)
        elif v in producer and producer[v].op_type not in ("Shape", "Size"):  # those read shapes, not values
            stack.extend(i for i in producer[v].input if i)
            stack.extend(_subgraph_reads(producer[v]))
    return sorted(out)


def _subgraph_reads(node: onnx.NodeProto) -> list[str]:
    """Names the subgraphs of ``node`` (If branches, Loop/Scan bodies) read, outer ones included."""
    out: list[str] = []
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in graphs:
            for n in g.node:
                out.extend(i for i in n.input if i)
                out.extend(_subgraph_reads(n))
    return out


def control_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs an ``If`` condition, a ``Loop`` trip count / condition, or a shape-determining
    input slot (``SHAPE_INPUTS``) is computed from, through other nodes (the backward slice).
    Specializing on their (small) values lets the compiler pick the branch, unroll the loop or
    know the shape (``compiler.frontend.control_flow``)."""
    seeds = [n.input[0] for n in model.graph.node if n.op_type == "If" and n.input] + \
        [i for n in model.graph.node if n.op_type == "Loop" for i in list(n.input)[:2] if i]
    for n in model.graph.node:
        for k in SHAPE_INPUTS.get(n.op_type, ()) if n.domain in ("", "ai.onnx") else ():
            if k < len(n.input) and n.input[k]:
                seeds.append(n.input[k])
    return _backward_slice(model, seeds)


def bind_values(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` whose inputs named in ``values`` are initializers holding them, in the
    input's declared element type (a float16 array bound into a model promoted to float32 becomes a
    float32 initializer, as the input would have been widened at the boundary)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    declared = {i.name: i.type.tensor_type.elem_type for i in m.graph.input if i.type.HasField("tensor_type")}
    keep = [i for i in m.graph.input if i.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for k, v in values.items():
        arr = np.asarray(v)
        if declared.get(k):
            arr = arr.astype(onnx.helper.tensor_dtype_to_np_dtype(declared[k]), copy=False)
        m.graph.initializer.append(onnx.numpy_helper.from_array(arr, k))
    return m


class PrismRep(BackendRep):
    """A prepared model: compiles per input-shape tuple on first use, then executes.

    ``programs`` maps ``((name, shape, dtype), ...)`` to the compiled :class:`Program`.
    """

    def __init__(self, model: onnx.ModelProto, *, pipeline: str = "O2", target: str = "host",
                 isolate: bool = True, timeout_s: float = 300.0) -> None:
        self.narrow_outputs = narrow_outputs(model)  # {output index: storage dtype}
        if uses_narrow_types(model):  # narrow storage, wider compute (compiler.frontend.narrow_types)
            model = legalize(model)
        self.model = model
        self.pipeline = pipeline
        self.target = target
        self.isolate = isolate
        self.timeout_s = timeout_s
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        self.output_names = [o.name for o in model.graph.output]
        self.programs: dict[tuple[Any, ...], Program] = {}
        self.trims: dict[int, list[tuple[int, str, int]]] = {}  # per program: bounded outputs to trim
        self.value_inputs = shape_inputs(model)
        self.control_inputs = [n for n in control_inputs(model) if n not in self.value_inputs]
        # sequence/optional inputs: one child model per length and presence; sequence/optional
        # outputs: rebuilt from their element outputs (compiler.frontend.sequence_io)
        self.sequence_inputs = any(i.type.WhichOneof("value") != "tensor_type" for i in model.graph.input
                                   if i.name not in inits)
        self.sequence_outputs = any(o.type.WhichOneof("value") != "tensor_type" for o in model.graph.output)
        self.children: dict[tuple[str, ...], PrismRep] = {}
        self.layouts: dict[int, tuple[list[str], dict[str, Any]] | None] = {}  # per program: element outputs

    def _inputs(self, inputs: Any) -> list[np.ndarray]:
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise CompileError("request", f"missing inputs: {', '.join(missing)}")
            return [_as_input(inputs[n]) for n in self.input_names]
        if isinstance(inputs, np.ndarray | np.generic):
            inputs = [inputs]
        arrs = [_as_input(x) for x in inputs]
        if len(arrs) != len(self.input_names):
            raise CompileError("request", f"the model takes {len(self.input_names)} inputs "
                               f"({', '.join(self.input_names)}), {len(arrs)} were given")
        return arrs

    def program_for(self, arrays: Sequence[np.ndarray]) -> tuple[Program, list[np.ndarray]]:
        """The program compiled for the shapes of ``arrays`` (compiling it on first use), and the
        arrays it takes (those of the inputs not bound as values)."""
        named = dict(zip(self.input_names, arrays, strict=True))
        vals = {n: named[n] for n in self.value_inputs}
        vals.update({n: named[n] for n in self.control_inputs if named[n].size <= 64})
        key = tuple((n, tuple(a.shape), a.dtype.str) for n, a in named.items()) + \
            tuple((n, v.tobytes()) for n, v in vals.items())
        prog = self.programs.get(key)
        if prog is None:
            model = bind_values(self.model, vals) if vals else self.model
            shapes = {n: list(a.shape) for n, a in named.items() if n not in vals}
            comp = compile_program(model, shapes, pipeline=self.pipeline, target=self.target)
            assert comp.program is not None
            prog = comp.program
            self.programs[key] = prog
            self.trims[id(prog)] = comp.trims
            self.layouts[id(prog)] = (comp.flat_outputs, comp.sequence_layout) if self.sequence_outputs else None
        return prog, [a for n, a in named.items() if n not in vals]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on ``inputs`` (a list in graph-input order, a single array, or ``{name: array}``).

        Returns a namedtuple of the outputs in graph-output order (a sequence as a list of arrays, an
        absent optional as None). Raises CompileError.
        """
        if self.sequence_inputs:
            return self._run_flattened(inputs)
        prog, arrays = self.program_for([widen(a) for a in self._inputs(inputs)])
        if self.isolate:
            outs = run_program_isolated(prog, arrays, timeout_s=self.timeout_s)
        else:
            outs = run_program(prog, arrays)
        trims = self.trims.get(id(prog), [])
        layout = self.layouts.get(id(prog))
        n_out = len(layout[0]) if layout is not None else len(self.output_names)
        if trims:  # bounded outputs (compiler.frontend.bounded): keep the valid prefix, drop the counts
            outs = trim_outputs(outs, trims, n_out)
        if layout is not None:
            outs = rebuild_outputs(self.output_names, layout[0], outs, layout[1])
        return namedtupledict("Outputs", self.output_names)(*self._narrowed(outs))

    def _narrowed(self, outs: list[Any]) -> list[Any]:
        """``outs`` with the narrow-typed outputs encoded back to their storage dtype (each element
        of a sequence; an absent optional stays None)."""
        outs = list(outs)
        for k, dt in self.narrow_outputs.items():
            v = outs[k]
            outs[k] = None if v is None else [np.asarray(e).astype(dt) for e in v] if isinstance(v, list) \
                else np.asarray(v).astype(dt)
        return outs

    def _run_flattened(self, inputs: Any) -> tuple[Any, ...]:
        """Run with sequence/optional inputs given as lists/None: each element becomes a tensor input
        of a child model compiled for that structure (``compiler.frontend.sequence_io``)."""
        model, flat = flatten_inputs(self.model, dict(zip(self.input_names, self._inputs(inputs), strict=True)))
        key = tuple(flat)
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = PrismRep(model, pipeline=self.pipeline, target=self.target,
                                                  isolate=self.isolate, timeout_s=self.timeout_s)
        return namedtupledict("Outputs", self.output_names)(*self._narrowed(list(child.run(flat))))


def _as_input(x: Any) -> Any:
    """An input value as the interface gives it: an array, or a list of arrays / None (a sequence or
    an optional, see ``compiler.frontend.sequence_io``)."""
    return x if x is None or isinstance(x, list | tuple) else np.asarray(x)


class PrismBackend(Backend):
    """``onnx.backend.base.Backend`` for Prism on the CPU (target ``host``)."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> PrismRep:
        """Check ``model`` (``onnx.checker``) and return a :class:`PrismRep`. Raises CompileError
        (stage ``request``) for a device other than CPU, (stage ``import``) for an invalid model."""
        if not cls.supports_device(device):
            raise CompileError("request", f"device {device!r} is not supported (CPU only)")
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load_model_from_string(bytes(model)) if isinstance(model, bytes | bytearray) \
                else onnx.load(model)
        opts = {k: kwargs[k] for k in ("pipeline", "target", "isolate", "timeout_s") if k in kwargs}
        return PrismRep(model, **opts)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, ...]] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        """Run one node: it is wrapped in a model (default opset of the installed onnx) whose inputs
        take the dtypes and shapes of ``inputs``."""
        arrays = [np.asarray(x) for x in (inputs.values() if isinstance(inputs, dict) else inputs)]
        names = list(node.input)
        vis = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for n, a in zip(names, arrays, strict=False) if n]
        outs = [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output]
        if outputs_info:
            outs = [onnx.helper.make_tensor_value_info(o, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shp)
                    for o, (dt, shp) in zip(node.output, outputs_info, strict=False)]
        graph = onnx.helper.make_graph([node], "run_node", vis, outs)
        model = onnx.helper.make_model(graph)
        return cls.prepare(model, device, **kwargs).run([a for n, a in zip(names, arrays, strict=False) if n])

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except Exception:
            return False


prepare = PrismBackend.prepare
run_model = PrismBackend.run_model
run_node = PrismBackend.run_node
supports_device = PrismBackend.supports_device
