"""Compile a model for concrete input shapes and execute it on given inputs, returning its outputs.

This is the runtime path behind :mod:`compiler.backend` (the ``onnx.backend.base.Backend``
interface) and the conformance runner. :func:`compile_program` runs the real compiler: import
(``compiler.frontend``), shape specialization from the given input shapes, the graph pipeline
(``compiler.passes``, ``O2`` by default), after statically resolvable If/Loop/Scan are inlined
or unrolled (``compiler.frontend.control_flow``), LSTM/GRU/RNN nodes are unrolled over their
static sequence length (``compiler.frontend.unroll_rnn``) and ONNX function ops without a
lowering are replaced by their schema's function body (``compiler.frontend.expand``), lowering and scheduling of every kernel
(``compiler.build.lower_graph``) and codegen to object code (``compiler.build.compile_all``). The
result is a :class:`~compiler.runtime.program.Program` (``compiler.runtime.program.link``, the same
linking the verifying runner uses): the kernel objects, the call list with every parameter's binding
and where each graph output comes from (a kernel-written value, a graph input, or a constant).

:func:`run_program` binds and runs it in this process (``compiler.runtime.program.Bound``);
:func:`run_program_isolated` does the same in a fresh interpreter (``compiler.runtime.child``, started
by ``compiler.runtime.process.run_child``) so that a crash of generated code becomes a
``CompileError(stage="run")`` naming the kernel, as it does for ``compiler.runtime.runner``.

Inputs are cast to the graph inputs' dtypes; outputs are numpy arrays of the graph outputs'
dtypes and shapes (``bool`` is one byte per element in memory, as numpy's). Dtypes the code
generator handles: f32, f64, i64, i32, i8, u8, bool.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError
from .process import run_child
from .program import NP_DTYPES, Bound, Program, check_inputs

__all__ = ["NP_DTYPES", "Program", "check_inputs", "compile_program", "has_lowering", "prepare_model",
           "run_program", "run_program_isolated", "upgrade_opset", "with_input_shapes"]


NO_EXPAND = {"Constant", "If", "Loop", "Scan", "Range"}  # folded, or run as control flow


def has_lowering(node: Any) -> bool:
    """True when ``node`` (a NodeProto) is compiled as it is: it has a lowering, is a control-flow or
    folded op, or is of another domain; else its function body (if any) replaces it."""
    from ..loops.lower import LOWERINGS

    return node.domain not in ("", "ai.onnx") or node.op_type in LOWERINGS or node.op_type in NO_EXPAND


def upgrade_opset(proto: Any, minimum: int = 7) -> Any:
    """A model of a default-domain opset below ``minimum`` converted with ONNX's version converter
    (``onnx.version_converter``: e.g. opset 6's ``broadcast``/``axis`` attributes become numpy-style
    broadcasting); other models as they are. Raises CompileError(stage="import") when it fails."""
    import onnx

    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), minimum)
    if version >= minimum:
        return proto
    try:
        out = onnx.version_converter.convert_version(proto, minimum)
    except Exception as e:
        raise CompileError("import", f"opset {version} could not be converted to {minimum}: {e}") from None
    return _legacy_prelu(out)


def _legacy_prelu(proto: Any) -> Any:
    """PRelu before opset 7 applied a 1-D slope of C elements along axis 1 (as Caffe and PyTorch
    export it); from opset 7 the slope broadcasts numpy-style. The converter keeps the slope as it
    is, so a constant slope of C > 1 elements is reshaped to ``[C, 1, ..., 1]`` here."""
    import onnx
    from onnx import numpy_helper

    try:
        shapes = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in
                  list(onnx.shape_inference.infer_shapes(proto).graph.value_info) + list(proto.graph.input)}
    except Exception:
        return proto
    inits = {t.name: t for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type != "PRelu" or len(n.input) < 2 or n.input[1] not in inits:
            continue
        slope = numpy_helper.to_array(inits[n.input[1]])
        rank = shapes.get(n.input[0], 0)
        if slope.ndim == 1 and slope.size > 1 and rank > 2:
            t = numpy_helper.from_array(slope.reshape((slope.size,) + (1,) * (rank - 2)), n.input[1])
            inits[n.input[1]].CopyFrom(t)
    return proto


def with_input_shapes(proto: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Any:
    """A copy of ``proto`` whose graph inputs named in ``input_shapes`` declare those static shapes."""
    if not input_shapes:
        return proto
    import onnx

    declared = {vi.name: [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
                for vi in proto.graph.input if vi.type.HasField("tensor_type")}
    if all(declared.get(n) == [int(d) for d in shape] for n, shape in input_shapes.items()):
        return proto  # already static and equal: no copy

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    for vi in out.graph.input:
        if vi.name in input_shapes and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for d in input_shapes[vi.name]:
                shape.dim.add().dim_value = int(d)
    return out


def prepare_model(proto: Any, input_shapes: Mapping[str, Sequence[int]] | None) -> Any:
    """The ONNX-level preparation before import (a new ModelProto; ``proto`` is not modified):
    models below opset 7 upgraded (:func:`upgrade_opset`), the input shapes written into the graph
    inputs, then, repeated while anything changes (bodies may hold more): statically resolvable
    If/Loop/Scan inlined or unrolled (``compiler.frontend.control_flow``), sequence and optional
    values resolved into tensors (``compiler.frontend.sequences``), LSTM/GRU/RNN unrolled
    (``compiler.frontend.unroll_rnn``), function ops without a lowering expanded
    (``compiler.frontend.expand``). A model without any of these comes back equivalent.
    Raises CompileError(stage="import") naming the node that cannot be prepared."""
    from ..frontend.control_flow import resolve_control_flow
    from ..frontend.expand import expand_functions
    from ..frontend.sequences import resolve_sequences
    from ..frontend.unroll_rnn import unroll_rnns

    proto = upgrade_opset(proto)
    proto = with_input_shapes(proto, input_shapes)
    for _ in range(8):  # each step returns its input object when it has nothing to do
        before = proto
        try:
            proto = unroll_rnns(resolve_control_flow(resolve_sequences(proto)))
        except ValueError as e:
            raise CompileError("import", str(e)) from None
        proto = expand_functions(proto, keep=has_lowering)
        if proto is before:
            break
    return resolve_sequences(proto, final=True)


def compile_program(model: Any, input_shapes: Mapping[str, Sequence[int]] | None, *, pipeline: str = "O2",
                    target: str = "host") -> Program:
    """Compile ``model`` (ModelProto, bytes or path) for ``input_shapes`` ({input: shape}).

    Raises CompileError with the failing stage (``import``, ``shape``, ``passes``, ``lowering``,
    ``codegen``); an unexpected internal error is wrapped as CompileError with its type and message.
    """
    from ..build import compile_all, link_program, lower_graph
    from ..events import EventStream
    from ..frontend import import_model, read_model, specialize
    from ..passes import PassContext
    from ..passes.manager import run_pipeline
    from ..passes.pipeline import parse_pipeline
    from ..targets import check_runnable, get_target

    stage = "import"
    try:
        proto, _ = read_model(model)
        proto = prepare_model(proto, input_shapes)
        graph = import_model(proto)
        stage = "shape"
        specialize(graph, input_shapes)
        stage = "passes"
        pipe = parse_pipeline(pipeline)
        ctx = PassContext(target=target)
        run_pipeline(graph, pipe, ctx, EventStream(None))
        stage = "lowering"
        tgt = get_target(target)
        check_runnable(tgt)
        kernels = lower_graph(graph, tgt)
        stage = "codegen"
        compiled = compile_all(kernels, tgt, threads=1)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError(stage, "internal error: recursion too deep") from None
    except Exception as e:
        raise CompileError(stage, f"internal error: {type(e).__name__}: {e}"[:500]) from e
    return link_program(graph, ctx, kernels, compiled, pipe.text())


def run_program(prog: Program, inputs: Sequence[np.ndarray], progress: Path | None = None) -> list[np.ndarray]:
    """Execute ``prog`` on ``inputs`` (one array per graph input, in order) in this process
    (``compiler.runtime.program.Bound``).

    Returns the graph outputs (fresh arrays). With ``progress``, appends ``start <kernel>`` before
    each kernel and ``done`` at the end (unbuffered), for crash attribution by a parent process.
    Raises CompileError(stage="request") when the inputs do not match what ``prog`` was compiled for.
    """
    bound = Bound(prog, inputs)
    bound.run(progress)
    return bound.outputs()


def run_program_isolated(prog: Program, inputs: Sequence[np.ndarray], timeout_s: float = 300.0) -> list[np.ndarray]:
    """:func:`run_program` in a fresh interpreter (``compiler.runtime.child``, the process that also
    verifies and times for ``compiler.runtime.runner``). A crash (signal, non-zero exit) or a timeout
    raises ``CompileError(stage="run")`` naming the kernel that was running; this process carries on."""
    check_inputs(prog, inputs)
    with tempfile.TemporaryDirectory(prefix="prism-exec-") as tmp:
        d = Path(tmp)
        with open(d / "job.pkl", "wb") as f:
            pickle.dump({"program": prog, "inputs": [np.asarray(x) for x in inputs], "measure": None}, f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        run_child(d, timeout_s, after="the executing process")
        with open(d / "outputs.pkl", "rb") as f:
            return pickle.load(f)
