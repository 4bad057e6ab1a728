"""A standing corpus of malformed, hostile and edge-case ONNX models (issue 17 item 8), each with the
exact outcome the explorer must give it: refused at upload (400 and the message), refused at the
compile request (400), a compilation that fails (its stage and message), or one that succeeds (and
its verdict against ONNX Runtime). `test_hostile_corpus.py` runs every case through the API against a
real stack; the expectations come from the ONNX IR and operator specs (what is an error there) and
from what ONNX Runtime does with the same model, never from Prism's own output.

Every model is built here with `onnx.helper` (nothing is downloaded); sizes are chosen against the
limits the corpus stack runs with (`STACK_LIMITS`).
"""

from __future__ import annotations

import io
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
MIB = 1 << 20
#: the corpus stack's limits (environment of its web server and worker)
STACK_LIMITS = {"PRISM_MAX_UPLOAD_BYTES": str(8 * MIB), "PRISM_MAX_INPUT_BYTES": str(16 * MIB),
                "PRISM_MAX_ARENA_BYTES": str(64 * MIB), "PRISM_MAX_CONSTANT_BYTES": str(4 * MIB),
                # the worker's memory cap: two compilations of small models fit at once, one of a 7.5 MiB
                # file does not fit at all (its estimate: the base plus 200 times the file)
                "PRISM_WORKER_MEMORY_CAP_BYTES": str(2048 * MIB), "PRISM_COMPILE_BASE_BYTES": str(640 * MIB),
                "PRISM_COMPILE_BYTES_PER_MODEL_BYTE": "200"}


@dataclass
class Case:
    """One model and its outcome. `upload`: (status, text in the error) of POST /api/models when it is
    refused there; `request`: the same for POST /api/compilations (which imports the graph and checks
    the request's shapes before anything is queued); `stage`/`message`: the
    compile.failed payload (`message` is a prefix unless `exact`); `verified`: for a compilation that
    succeeds, the API's `verified` (True, False or None) and `verification` starting with `says`."""

    name: str
    data: bytes
    upload: tuple[int, str] | None = None
    request: tuple[int, str] | None = None
    stage: str | None = None
    message: str | None = None
    exact: bool = False
    verified: Any = "unset"
    says: str = ""
    fields: dict = field(default_factory=dict)  # extra fields of the compile request


def vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset: int = 17, ir: int = 8, domains=()) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *domains])
    m.ir_version = ir
    return m.SerializeToString()


def node(op: str, ins, outs, name: str | None = None, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, list(ins), list(outs), name=name or op.lower(), **attrs)


def const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def relu(shape=(4,), elem=F) -> bytes:
    return model([node("Relu", ["x"], ["y"])], [vi("x", elem, list(shape))], [vi("y", elem, list(shape))])


def _zip_of(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("model.onnx", data)
    return buf.getvalue()


def _external(location: str) -> bytes:
    w = const("w", np.ones(4, np.float32))
    w.data_location = TensorProto.EXTERNAL
    del w.float_data[:]
    w.raw_data = b""
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        w.external_data.add(key=k, value=v)
    return model([node("Add", ["x", "w"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], [w])


def _bad_utf8_name() -> bytes:
    raw = relu()
    return raw.replace(b"relu", b"re\xff\xfe", 1)  # same length: the protobuf stays well-formed


def _raw_size_mismatch() -> bytes:
    w = const("w", np.ones(4, np.float32))
    w.raw_data = np.ones(3, np.float32).tobytes()  # 12 bytes for 4 floats
    return model([node("Add", ["x", "w"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], [w])


def _cycle() -> bytes:
    return model([node("Add", ["x", "b"], ["a"], "add"), node("Relu", ["a"], ["b"], "relu")],
                 [vi("x", F, [4])], [vi("b", F, [4])])


def _nested_ifs(depth: int) -> bytes:
    """`depth` If nodes nested in each other's then-branch, all on the same boolean input."""
    inner = helper.make_graph([node("Identity", ["x"], ["o0"], "leaf")], "b0", [], [vi("o0", F, [4])])
    for d in range(1, depth + 1):
        other = helper.make_graph([node("Neg", ["x"], [f"n{d}"], f"neg{d}")], f"e{d}", [], [vi(f"n{d}", F, [4])])
        inner = helper.make_graph([node("If", ["c"], [f"o{d}"], f"if{d}", then_branch=inner, else_branch=other)],
                                  f"b{d}", [], [vi(f"o{d}", F, [4])])
    top = inner.node[0]
    return model([top], [vi("c", TensorProto.BOOL, []), vi("x", F, [4])], [vi(f"o{depth}", F, [4])])


def _not_onnx(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Not ONNX at all: refused at upload."""
    return [
        Case("empty-file", b"", upload=(400, "model is empty (0 bytes)")),
        Case("random-bytes", rnd.bytes(4096), upload=(400, "not a valid ONNX model")),
        Case("text-file", b"this is not a model\n" * 10, upload=(400, "not a valid ONNX model")),
        Case("truncated-protobuf", valid[: len(valid) // 2], upload=(400, "not a valid ONNX model")),
        Case("zip-archive", _zip_of(valid), upload=(400, "not a valid ONNX model")),
        Case("tensor-not-model", const("t", np.ones(3, np.float32)).SerializeToString(),
             upload=(400, "not a valid ONNX model")),
        Case("ir-version-0", model([node("Relu", ["x"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], ir=0),
             upload=(400, "not an ONNX model: no ir_version or no graph")),
        Case("no-opset-import", onnx.helper.make_model(helper.make_graph(
            [node("Relu", ["x"], ["y"])], "g", [vi("x", F, [4])], [vi("y", F, [4])]), opset_imports=[])
            .SerializeToString(), upload=(400, "model declares no opset_import")),
        Case("invalid-utf8-name", _bad_utf8_name(), upload=(400, "malformed model")),
        Case("over-the-upload-limit", os.urandom(8 * MIB + 128 * 1024), upload=(413, "model file is too large")),
    ]


def _hostile_data(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Hostile: external data escaping the upload."""
    return [
        Case("external-data-traversal", _external("../../../../etc/passwd"), upload=(400, "external file")),
        Case("external-data-absolute", _external("/etc/passwd"), upload=(400, "external file")),
    ]


def _invalid_graphs(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Invalid graphs (ONNX IR spec)."""
    return [
        Case("no-outputs", model([node("Relu", ["x"], ["y"])], [vi("x", F, [4])], []),
             upload=(400, "the graph has no outputs")),
        Case("cycle", _cycle(), request=(400, "the graph has a cycle: cycle through node add (Add)")),
        Case("undefined-input", model([node("Add", ["x", "ghost"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])]),
             request=(400, "node add (Add) reads 'ghost', which is not defined")),
        Case("raw-data-size-mismatch", _raw_size_mismatch(), request=(400, "initializer 'w': cannot read tensor data")),
        Case("string-input", model([node("Identity", ["s"], ["y"])], [vi("s", TensorProto.STRING, [2])],
                                   [vi("y", TensorProto.STRING, [2])]),
             upload=(400, "graph input 's' is a string tensor")),
        Case("string-constant", model([node("Constant", [], ["c"], "label", value=helper.make_tensor(
            "v", TensorProto.STRING, [1], [b"a"])), node("Relu", ["x"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])]),
            upload=(400, "node label (Constant): attribute value is a string tensor")),
    ]


def _forbidden_ops(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Operators the spec forbids as written."""
    return [
        Case("sum-5000-inputs", model([node("Sum", ["x"] * 5000, ["y"])], [vi("x", F, [4])], [vi("y", F, [4])]),
             upload=(400, "node sum (Sum): 5000 inputs, more than the 256")),
        Case("maxpool-kernel-0", model([node("MaxPool", ["x"], ["y"], "pool", kernel_shape=[0, 0])],
                                       [vi("x", F, [1, 1, 4, 4])], [vi("y", F, None)]),
             upload=(400, "node pool (MaxPool): kernel_shape [0, 0] has a value below 1")),
        Case("averagepool-kernel-0", model([node("AveragePool", ["x"], ["y"], "pool", kernel_shape=[0, 2])],
                                           [vi("x", F, [1, 1, 4, 4])], [vi("y", F, None)]),
             upload=(400, "node pool (AveragePool): kernel_shape [0, 2] has a value below 1")),
        Case("maxpool-stride-0", model([node("MaxPool", ["x"], ["y"], "pool", kernel_shape=[2, 2], strides=[0, 1])],
                                       [vi("x", F, [1, 1, 4, 4])], [vi("y", F, None)]),
             upload=(400, "node pool (MaxPool): strides [0, 1] has a value below 1")),
        Case("topk-k-over-axis", model([node("TopK", ["x", "k"], ["v", "i"])], [vi("x", F, [2, 5])],
                                       [vi("v", F, None), vi("i", I64, None)], [const("k", np.array([9], np.int64))]),
             stage="shape", message="topk (TopK): K = 9 is larger than axis 1 of size 5"),
        Case("reshape-wrong-count", model([node("Reshape", ["x", "s"], ["y"])], [vi("x", F, [8])], [vi("y", F, None)],
                                          [const("s", np.array([3, 3], np.int64))]),
             stage="shape", message="reshape (Reshape): cannot reshape [8] (8 elements) to [3, 3]"),
        Case("matmul-dim-mismatch", model([node("MatMul", ["a", "b"], ["y"])], [vi("a", F, [2, 3]), vi("b", F, [4, 5])],
                                          [vi("y", F, None)]),
             stage="shape", message="matmul (MatMul): inner dims differ: [2, 3] x [4, 5]"),
        Case("concat-rank-mismatch", model([node("Concat", ["a", "b"], ["y"], axis=0)],
                                           [vi("a", F, [2, 3]), vi("b", F, [2])], [vi("y", F, None)]),
             stage="shape", message="concat (Concat): inputs have different ranks"),
        Case("transpose-bad-perm", model([node("Transpose", ["x"], ["y"], perm=[0, 0])], [vi("x", F, [2, 3])],
                                         [vi("y", F, None)]),
             stage="shape", message="transpose (Transpose): perm [0, 0] is not a permutation of 2 axes"),
        Case("unsqueeze-axis-out-of-range", model([node("Unsqueeze", ["x", "a"], ["y"])], [vi("x", F, [2, 3])],
                                                  [vi("y", F, None)], [const("a", np.array([7], np.int64))]),
             stage="shape", message="unsqueeze (Unsqueeze): axes 7 is out of range for rank 3"),
        Case("conv-channel-mismatch", model([node("Conv", ["x", "w"], ["y"])], [vi("x", F, [1, 3, 8, 8])],
                                            [vi("y", F, None)], [const("w", np.ones((4, 2, 3, 3), np.float32))]),
             stage="shape", message="conv (Conv): input has 3 channels, weight expects 2 x group 1"),
        Case("unknown-op", model([node("FrobnicateAll", ["x"], ["y"], "frob")], [vi("x", F, [4])], [vi("y", F, [4])]),
             request=(400, "unknown op FrobnicateAll at node frob")),
        Case("unknown-domain", model([helper.make_node("Evil", ["x"], ["y"], name="evil", domain="com.evil")],
                                     [vi("x", F, [4])], [vi("y", F, [4])], domains=[helper.make_opsetid("com.evil", 1)]),
             request=(400, "unknown op com.evil.Evil at node evil")),
        Case("future-opset", model([node("Relu", ["x"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])], opset=99),
             upload=(400, "opset 99 of the default domain is not supported")),
    ]


def _absurd_sizes(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Absurd sizes: refused before anything is allocated."""
    return [
        Case("absurd-input-dims", relu((1 << 20, 1 << 20, 1 << 10)),
             request=(400, "input 'x' of shape [1048576, 1048576, 1024] has 1125899906842624 elements, above the "
                           "limit of 2147483647 per tensor")),
        Case("input-over-the-limit", relu((8 * MIB,)), stage="run",
             message=f"input 'x' (float32[{8 * MIB}]) needs {32 * MIB} bytes, over the limit of {16 * MIB} bytes "
                     "(PRISM_MAX_INPUT_BYTES)", exact=True),
        Case("arena-over-the-limit", model([node("Expand", ["x", "s"], ["e"], "expand"), node("Exp", ["e"], ["f"], "exp"),
                                            node("ReduceSum", ["f"], ["y"], "sum", keepdims=0)],
                                           [vi("x", F, [1])], [vi("y", F, [])], [const("s", np.array([32 * MIB], np.int64))]),
             stage="run", message="the working memory (arena of "),
        Case("constants-over-the-limit", model([node("MatMul", ["x", "w"], ["y"], "mm")], [vi("x", F, [2, 1024])],
                                               [vi("y", F, [2, 1536])], [const("w", np.ones((1024, 1536), np.float32))]),
             upload=None, stage="run", message="the constants ("),
        Case("unbound-symbolic-dim", model([node("Relu", ["x"], ["y"])], [vi("x", F, ["batch", 4])], [vi("y", F, None)]),
             request=(400, "batch")),
        _over_the_memory_cap(),
    ]


def _over_the_memory_cap() -> Case:
    """A 7.5 MiB model whose compilation's memory estimate alone is over the worker's cap
    (`STACK_LIMITS`): refused before the compiler starts, naming both sizes and the setting."""
    n = 15 * MIB // 8
    data = model([node("Add", ["x", "w"], ["y"])], [vi("x", F, [n])], [vi("y", F, [n])], [const("w", np.ones(n, np.float32))])
    need = int(int(STACK_LIMITS["PRISM_COMPILE_BASE_BYTES"]) + float(STACK_LIMITS["PRISM_COMPILE_BYTES_PER_MODEL_BYTE"])
               * len(data))
    cap = int(STACK_LIMITS["PRISM_WORKER_MEMORY_CAP_BYTES"])
    return Case("over-the-worker-memory-cap", data, stage="request", exact=True,
                message=f"this compilation needs an estimated {need} bytes of memory, over the worker's memory cap of "
                        f"{cap} bytes (PRISM_WORKER_MEMORY_CAP_BYTES)")


def _edge_cases(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Edge cases that compile: verdict from ONNX Runtime."""
    return [
        Case("valid-relu", valid, verified=True, says="outputs match ONNX Runtime"),
        Case("zero-size-tensor", relu((0, 4)), verified=True, says="outputs match ONNX Runtime"),
        Case("nan-data", model([node("Add", ["x", "n"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])],
                               [const("n", np.array([np.nan, 1, np.nan, 2], np.float32))]),
             verified=True, says="outputs match ONNX Runtime"),
        Case("inf-data", model([node("Mul", ["x", "n"], ["y"])], [vi("x", F, [4])], [vi("y", F, [4])],
                               [const("n", np.array([np.inf, -np.inf, 1, np.inf], np.float32))]),
             verified=True, says="outputs match ONNX Runtime"),
        Case("int-division-by-zero", model([node("Div", ["a", "b"], ["y"])], [vi("a", I32, [4]), vi("b", I32, [4])],
                                           [vi("y", I32, [4])]),  # integer inputs are zeros: 0 / 0
             stage="run", message="div (Div): integer division by zero (i32; undefined in the ONNX spec, ONNX "
                                  "Runtime stops with 'Integer division by zero')", exact=True),
        Case("int-min-mod-minus-one", model([node("Add", ["x", "m"], ["a"], "add"), node("Sub", ["x", "one"], ["b"], "sub"),
                                             node("Mod", ["a", "b"], ["y"], "mod")],
                                            [vi("x", I32, [4])], [vi("y", I32, [4])],
                                            [const("m", np.array(-2**31, np.int32)), const("one", np.array(1, np.int32))]),
             verified=None, says="not verified: ONNX Runtime failed (killed by SIGFPE)"),
        Case("int-min-div-minus-one", model([node("Add", ["x", "m"], ["a"], "add"), node("Sub", ["x", "one"], ["b"], "sub"),
                                             node("Div", ["a", "b"], ["y"], "div")],
                                            [vi("x", I32, [4])], [vi("y", I32, [4])],
                                            [const("m", np.array(-2**31, np.int32)), const("one", np.array(1, np.int32))]),
             verified=True, says="outputs match ONNX Runtime"),
    ]


def _indices(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Out-of-range indices given as data (ONNX Gather: indices in [-s, s-1])."""
    return [
        Case("gather-constant-index-out-of-range", model([node("Gather", ["d", "i"], ["y"])], [vi("d", F, [4, 2])],
                                                         [vi("y", F, None)], [const("i", np.array([0, 5], np.int64))]),
             stage="shape", message="gather (Gather): indices[1] = 5 is out of range for axis 0 of size 4"),
        Case("gather-input-value-out-of-range", model([node("Gather", ["d", "i"], ["y"])],
                                                      [vi("d", F, [4, 2]), vi("i", I64, [2])], [vi("y", F, None)]),
             stage="shape", message="gather (Gather): indices[1] = -5 is out of range for axis 0 of size 4",
             fields={"input_values": {"i": [1, -5]}}),
        Case("scatternd-constant-index-out-of-range", model([node("ScatterND", ["d", "i", "u"], ["y"])],
                                                            [vi("d", F, [2, 3])], [vi("y", F, [2, 3])],
                                                            [const("i", np.array([[1, 3]], np.int64)),
                                                             const("u", np.ones(1, np.float32))]),
             stage="shape", message="scatternd (ScatterND): indices[0, 1] = 3 is out of range for axis 1 of size 3"),
        Case("gather-computed-index-out-of-range", model([node("Add", ["i", "k"], ["j"], "add"),
                                                          node("Gather", ["d", "j"], ["y"], "gather")],
                                                         [vi("d", F, [4, 2]), vi("i", I64, [2])], [vi("y", F, None)],
                                                         [const("k", np.array([1, 4], np.int64))]),
             stage="run", message="gather (Gather): an index computed in the model is out of range for axis 0 of size 4 "
                                  "(valid: -4 to 3)", exact=True),
        Case("gather-negative-index-in-range", model([node("Gather", ["d", "i"], ["y"])], [vi("d", F, [4, 2])],
                                                     [vi("y", F, None)], [const("i", np.array([-4, 3], np.int64))]),
             verified=True, says="outputs match ONNX Runtime"),
    ]


def _more(rnd: np.random.Generator, valid: bytes) -> list[Case]:
    """Deep nesting, values defined twice, negative and unknown dims."""
    return [
        Case("nested-ifs", _nested_ifs(12), verified=True, says="outputs match ONNX Runtime",
             fields={"input_values": {"c": [1]}}),
        Case("duplicate-output-name", model([node("Relu", ["x"], ["y"], "r1"), node("Neg", ["x"], ["y"], "n1")],
                                            [vi("x", F, [4])], [vi("y", F, [4])]),
             request=(400, "output of node n1 'y' is defined twice")),
        Case("negative-dim", relu((-3,)), stage="shape", message="input 'x': dim 0 is -3; dims must be >= 0",
             exact=True),
        Case("untyped-graph-input", model([node("Relu", ["x"], ["y"])], [helper.make_value_info("x", onnx.TypeProto())],
                                          [vi("y", F, [4])]), request=(400, "x: rank unknown")),
    ]


def cases() -> list[Case]:
    """The corpus (names are unique; see each expectation's comment for the spec it follows)."""
    rnd = np.random.default_rng(17)
    valid = relu()
    groups = (_not_onnx, _hostile_data, _invalid_graphs, _forbidden_ops, _absurd_sizes, _edge_cases, _indices, _more)
    return [case for group in groups for case in group(rnd, valid)]
