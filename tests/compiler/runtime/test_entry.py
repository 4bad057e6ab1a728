"""The entry function (compiler.codegen.entry): one native call runs every kernel of the model in
order, over the same arena, constants and scratch as the per-kernel path, with the same outputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from compiler.codegen.entry import entry_ir, entry_layout
from compiler.driver import compile_program
from compiler.runtime.program import Bound


def _chain_model(layers: int = 6) -> onnx.ModelProto:
    """x[1, 8, 12, 12] -> (Conv 3x3 pad 1 -> Relu -> Add residual) * layers -> Softmax over channels:
    kernels with constants, arena values and a graph output."""
    rng = np.random.default_rng(3)
    nodes, inits, cur = [], [], "x"
    for i in range(layers):
        w = numpy_helper.from_array((rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32), f"w{i}")
        b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), f"b{i}")
        inits += [w, b]
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
                  helper.make_node("Add", [f"r{i}", cur], [f"a{i}"], name=f"add{i}")]
        cur = f"a{i}"
    nodes.append(helper.make_node("Softmax", [cur], ["y"], axis=1, name="softmax"))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 12, 12])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_entry_and_per_kernel_paths_give_the_same_outputs() -> None:
    model = _chain_model()
    prog = compile_program(model, None).program
    assert prog is not None and prog.entry.startswith("prism_run_") and len(prog.calls) >= 6
    x = np.random.default_rng(0).standard_normal((1, 8, 12, 12)).astype(np.float32)
    per_kernel = Bound(prog, [x])
    per_kernel.run(per_kernel=True)
    entry = Bound(prog, [x])
    assert entry.entry is not None
    entry.run()
    (a,), (b,) = per_kernel.outputs(), entry.outputs()
    np.testing.assert_array_equal(a, b)  # the same kernels on the same buffers: bitwise equal
    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(b, ref, rtol=1e-4, atol=1e-5)
    entry.run()  # again over the same arena: the same result
    np.testing.assert_array_equal(entry.outputs()[0], b)


def test_entry_ir_calls_every_kernel_in_order_with_arena_offsets() -> None:
    calls = [{"symbol": "k_a", "args": [{"kind": "value", "name": "x"}, {"kind": "value", "name": "t"}]},
             {"symbol": "k_b", "args": [{"kind": "value", "name": "t"}, {"kind": "const", "index": 0},
                                        {"kind": "scratch", "dtype": "float32", "shape": (4,)},
                                        {"kind": "value", "name": "y"}]},
             {"symbol": "k_a", "args": [{"kind": "value", "name": "y"}, {"kind": "value", "name": "t"}]}]
    values = {"x": {"kind": "input", "offset": 0}, "t": {"kind": "arena", "offset": 128},
              "y": {"kind": "heap", "offset": 0}}
    lay = entry_layout(calls, values)
    assert lay.slots == (("value", "x"), ("const", 0), ("scratch", 1, 2), ("value", "y"))
    assert lay.args == ((("slot", 1), ("arena", 128)), (("arena", 128), ("slot", 2), ("slot", 3), ("slot", 4)),
                        (("slot", 4), ("arena", 128)))
    text = entry_ir(calls, lay, "prism_run_test", "x86_64-unknown-linux-gnu")
    body = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("call")]
    assert [ln.split("@")[1].split("(")[0].strip('"') for ln in body] == ["k_a", "k_b", "k_a"]
    assert sum(ln.startswith("declare") and "k_a" in ln for ln in text.splitlines()) == 1
    assert "i64 128" in text
