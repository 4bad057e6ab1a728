"""``--check-passes``: after every pass, export the IR to ONNX, run it in ONNX Runtime and compare
with the original model's outputs on the same seeded random inputs (rtol 1e-4, atol 1e-5, as
``numpy.allclose``: |a - b| <= atol + rtol * |b|). A mismatch raises CompileError naming the pass.

Inputs: float inputs standard-normal (seed 0), integer inputs 0, bool inputs False, shapes as
specialized. ONNX Runtime runs with one intra-op thread and its default graph optimizations.

Bounded outputs (``compiler.frontend.bounded``): the IR computes them padded, followed by their
counts; each run of the exported model is cut to the counts (``trim_outputs``) before the
comparison with the original model. A bounded NonMaxSuppression (ONNX's op plus a count output,
which ONNX has not) is exported for ONNX Runtime as ONNX's NonMaxSuppression, its count read from
the shape of its result (:func:`ort_form`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import CompileError
from ..export import export_model
from ..frontend.bounded import trim_outputs
from ..ir import Graph, print_graph
from .pipeline import PassSpec

RTOL, ATOL = 1e-4, 1e-5


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every runtime input of a specialized graph (see module docstring)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        assert v.type is not None and v.type.is_static
        shape = tuple(int(d) for d in v.type.shape)  # type: ignore[union-attr]
        dt = v.type.dtype
        if dt.kind == "f":
            feeds[v.name] = rng.standard_normal(shape).astype(dt)
        else:
            feeds[v.name] = np.zeros(shape, dtype=dt)
    return feeds


def run_ort(model: onnx.ModelProto | bytes, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run ``model`` (a ModelProto or its serialized bytes) in ONNX Runtime (CPU, 1 intra-op
    thread); returns the outputs in order."""
    import onnxruntime as ort  # deferred: ~0.5 s and 100 MB that only --check-passes needs

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    data = model if isinstance(model, bytes) else model.SerializeToString()
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return [np.asarray(o) for o in sess.run(None, {k: v for k, v in feeds.items() if k in names})]


def compare(got: Sequence[np.ndarray], want: Sequence[np.ndarray], names: Sequence[str]) -> str | None:
    """None when every output matches within RTOL/ATOL, else a one-line description of the worst."""
    if len(got) != len(want):
        return f"{len(got)} outputs instead of {len(want)}"
    for name, a, b in zip(names, got, want, strict=True):
        if a.shape != b.shape:
            return f"output {name!r} has shape {list(a.shape)} instead of {list(b.shape)}"
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            if not np.allclose(a64, b64, rtol=RTOL, atol=ATOL, equal_nan=True):
                err = np.abs(a64 - b64)
                i = int(np.nanargmax(err - RTOL * np.abs(b64)))
                return (f"output {name!r} differs: max abs error {float(np.nanmax(err)):.3g} at flat index {i} "
                        f"({a64.reshape(-1)[i]:.6g} vs {b64.reshape(-1)[i]:.6g}; rtol {RTOL}, atol {ATOL})")
        elif not np.array_equal(a, b):
            return f"output {name!r} differs (exact comparison of {a.dtype})"
    return None


def ort_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (changed in place) with every NonMaxSuppression that has a second, count output
    (the bounded form) turned into ONNX's NonMaxSuppression followed by ``Shape`` and ``Gather`` of
    its first dim into that count, in the graph and in function bodies. Returns ``model``."""
    bodies = [model.graph.node] + [f.node for f in model.functions]
    exact: set[str] = set()
    for nodes in bodies:
        for i in reversed(range(len(nodes))):
            n = nodes[i]
            if n.op_type != "NonMaxSuppression" or n.domain not in ("", "ai.onnx") or len(n.output) < 2:
                continue
            sel, count = n.output[0], n.output[1]
            exact.add(sel)
            del n.output[1:]
            zero = onnx.helper.make_tensor(f"{count}__zero", onnx.TensorProto.INT64, [], [0])
            extra = [onnx.helper.make_node("Shape", [sel], [f"{count}__shape"]),
                     onnx.helper.make_node("Constant", [], [f"{count}__zero"], value=zero),
                     onnx.helper.make_node("Gather", [f"{count}__shape", f"{count}__zero"], [count], axis=0)]
            for k, e in enumerate(extra):
                nodes.insert(i + 1 + k, e)
    infos = [model.graph.value_info, model.graph.output] + [f.value_info for f in model.functions]
    for vi in (vi for group in infos for vi in group if vi.name in exact):
        dims = vi.type.tensor_type.shape.dim  # the padded length, which ONNX Runtime would fold Shape to
        if dims:
            dims[0].Clear()
            dims[0].dim_param = f"{vi.name}_selected"
    return model


class PassChecker:
    """Holds the original model's outputs; :meth:`after_pass` checks the IR after a pass."""

    def __init__(self, proto: onnx.ModelProto, graph: Graph, input_shapes: Any = None, seed: int = 0,
                 records: list[dict[str, Any]] | None = None, trims: list[tuple[int, str, int]] | None = None
                 ) -> None:
        self.feeds = random_inputs(graph, seed)
        self.trims = list(trims or [])  # graph's bounded outputs: proto has them exact, graph padded
        self.names = [v.name for v in graph.outputs][:len(proto.graph.output)]
        try:
            self.want = run_ort(proto, self.feeds)
        except Exception as exc:
            raise CompileError("verify", f"--check-passes: ONNX Runtime cannot run the original model: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        self.records: list[dict[str, Any]] = records if records is not None else []
        self._last_ir: str | None = None
        self.check("import", graph)

    def check(self, name: str, graph: Graph) -> None:
        ir = print_graph(graph)
        if ir == self._last_ir:  # the same IR text (constants by digest) was checked already
            self.records.append({"after": name, "passed": True, "problem": None, "skipped": "IR unchanged"})
            return
        data = ort_form(export_model(graph)).SerializeToString()
        try:
            onnx.checker.check_model(data)
        except onnx.checker.ValidationError as exc:
            raise CompileError("passes", f"after {name}: the exported ONNX model is invalid: "
                               f"{str(exc).splitlines()[0]}", pass_name=None if name == "import" else name) from None
        try:
            got = run_ort(data, self.feeds)
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CompileError("passes", f"after {name}: ONNX Runtime cannot run the exported model: {msg}",
                               pass_name=None if name == "import" else name) from None
        if self.trims:
            got = trim_outputs(got, self.trims, len(self.want))
        problem = compare(got, self.want, self.names)
        self.records.append({"after": name, "passed": problem is None, "problem": problem})
        self._last_ir = ir
        if problem is not None:
            raise CompileError("passes", f"--check-passes: after {name}, {problem}",
                               pass_name=None if name == "import" else name)

    def after_pass(self, index: int, spec: PassSpec, graph: Graph) -> None:
        self.check(spec.name, graph)


def model_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray] | str:
    """Seeded inputs for the graph inputs of an ONNX model (as :func:`random_inputs`: floats
    standard-normal, others zero), or the reason there are none (a non-tensor or unshaped input)."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for vi in (v for v in model.graph.input if v.name not in inits):
        tt = vi.type.tensor_type
        if vi.type.WhichOneof("value") != "tensor_type" or not tt.HasField("shape") or \
                not all(d.HasField("dim_value") for d in tt.shape.dim):
            return f"graph input {vi.name!r} is not a tensor of static shape"
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        shape = tuple(d.dim_value for d in tt.shape.dim)
        feeds[vi.name] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else np.zeros(shape, dt)
    return feeds


class ModelChecker:
    """``--check-passes`` for the model passes: ONNX Runtime runs the model before them and, after
    each model pass that changed the model but kept its interface, the model it left, on the same
    seeded inputs (:func:`model_inputs`), compared as :func:`compare` does. A mismatch raises
    CompileError(stage="import") naming the pass; a model ONNX Runtime cannot run is recorded as
    skipped (``{"after", "level": "onnx", "passed": None, "skipped": reason}``)."""

    def __init__(self, model: onnx.ModelProto, records: list[dict[str, Any]], seed: int = 0) -> None:
        self.records = records
        self.names = [o.name for o in model.graph.output]
        feeds = model_inputs(model, seed)
        self.skipped: str | None = feeds if isinstance(feeds, str) else None
        self.feeds = feeds if isinstance(feeds, dict) else {}
        self.want: list[np.ndarray] = []
        if self.skipped is None:
            try:
                self.want = run_ort(model, self.feeds)
            except Exception as exc:
                self.skipped = f"ONNX Runtime cannot run the model: {str(exc).splitlines()[0] if str(exc) else exc}"

    def after_pass(self, index: int, spec: PassSpec, model: onnx.ModelProto, changed: bool) -> None:
        if not changed or getattr(spec.cls, "changes_interface", False):
            return
        if self.skipped is not None:
            self.records.append({"after": spec.name, "level": "onnx", "passed": None, "problem": None,
                                 "skipped": self.skipped})
            return
        try:
            got = run_ort(model, self.feeds)
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.records.append({"after": spec.name, "level": "onnx", "passed": None, "problem": None,
                                 "skipped": f"ONNX Runtime cannot run the rewritten model: {msg}"})
            return
        problem = compare(got, self.want, self.names)
        self.records.append({"after": spec.name, "level": "onnx", "passed": problem is None, "problem": problem})
        if problem is not None:
            raise CompileError("import", f"--check-passes: after {spec.name}, {problem}", pass_name=spec.name)

