"""Import of the model set: structure checked against the ONNX protobuf itself."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import import_model, load, read_model
from compiler.ir import Graph
from tests.compiler.conftest import LIGHT_DIR, LIGHT_MODELS, WHEEL_SHAPES, wheel_model


def _expect_counts(proto: onnx.ModelProto) -> tuple[int, int, list[str]]:
    g = proto.graph
    n_const_nodes = sum(1 for n in g.node if n.op_type == "Constant")
    inits = {t.name for t in g.initializer}
    runtime_inputs = [vi.name for vi in g.input if vi.name not in inits]
    return len(g.node) - n_const_nodes, len(g.initializer) + n_const_nodes, runtime_inputs


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_imports_and_specializes(name: str) -> None:
    path = LIGHT_DIR / f"{name}.onnx"
    proto = onnx.load(str(path))
    graph, _ = load(path)
    nodes, consts, inputs = _expect_counts(proto)
    assert len(graph.nodes) == nodes
    assert len(graph.constants) == consts
    # IR v3: the initializers listed among the inputs are constants, not runtime inputs
    assert [v.name for v in graph.inputs] == inputs and len(inputs) == 1
    assert all(v.type is not None and v.type.is_static for v in graph.values())
    declared = [tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in proto.graph.output]
    assert [v.type.shape for v in graph.outputs] == declared


@pytest.mark.parametrize("name", sorted(WHEEL_SHAPES))
def test_wheel_model_imports_and_specializes(name: str) -> None:
    path = wheel_model(name)
    proto = onnx.load(str(path))
    graph, _ = load(path, WHEEL_SHAPES[name])
    nodes, consts, inputs = _expect_counts(proto)
    assert len(graph.nodes) == nodes and len(graph.constants) == consts
    assert [v.name for v in graph.inputs] == inputs
    for n in graph.walk():
        for v in n.outputs:
            assert v.type is not None, f"{n.label} output {v.name} untyped"


def test_yolov8n_output_shape_matches_onnxruntime(yolov8n_path) -> None:
    import onnxruntime as ort

    graph, _ = load(yolov8n_path, {"images": [1, 3, 320, 320]})
    sess = ort.InferenceSession(str(yolov8n_path), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"images": np.zeros((1, 3, 320, 320), np.float32)})[0]
    assert graph.outputs[0].type.shape == out.shape


def test_silero_if_subgraphs_kept_with_parent(silero_path) -> None:
    graph, _ = load(silero_path, WHEEL_SHAPES["silero_vad"])
    ifs = [n for n in graph.nodes if n.op_type == "If"]
    assert len(ifs) == 3
    for n in ifs:
        then_g, else_g = n.attrs["then_branch"], n.attrs["else_branch"]
        assert isinstance(then_g, Graph) and then_g.parent is graph and else_g.parent is graph
        assert then_g.nodes and all(v.type is not None for v in then_g.outputs)


def _tiny(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "tiny", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_constant_node_forms_become_constants() -> None:
    nodes = [
        helper.make_node("Constant", [], ["c_t"], value=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))),
        helper.make_node("Constant", [], ["c_f"], value_float=2.5),
        helper.make_node("Constant", [], ["c_is"], value_ints=[1, 2, 3]),
        helper.make_node("Constant", [], ["c_i"], value_int=7),
        helper.make_node("Add", ["x", "c_t"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = import_model(_tiny(nodes, [x], [y]))
    assert sorted(g.constants) == ["c_f", "c_i", "c_is", "c_t"]
    assert g.constants["c_f"].const.dtype == np.float32 and float(g.constants["c_f"].const) == 2.5
    assert g.constants["c_is"].const.tolist() == [1, 2, 3] and g.constants["c_is"].const.dtype == np.int64
    assert [n.op_type for n in g.nodes] == ["Add"]


def test_trailing_omitted_inputs_are_trimmed() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    lo = numpy_helper.from_array(np.array(0.0, np.float32), "lo")
    m = _tiny([helper.make_node("Clip", ["x", "lo", ""], ["y"])], [x], [y], [lo])
    g = import_model(m)
    assert len(g.nodes[0].inputs) == 2
    m2 = _tiny([helper.make_node("Clip", ["x", "", "lo"], ["y"])], [x], [y], [lo])
    g2 = import_model(m2)
    assert g2.nodes[0].inputs[1] is None and g2.nodes[0].inputs[2] is not None


def test_external_data_inside_folder_is_read(tmp_path) -> None:
    w = np.arange(4096, dtype=np.float32).reshape(64, 64)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    m = _tiny([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [numpy_helper.from_array(w, "w")])
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").is_file()
    proto, base = read_model(path)
    g = import_model(proto)
    np.testing.assert_array_equal(g.constants["w"].const, w)
    assert base == tmp_path.resolve()


def _if_model(then_out: str, else_out: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    t = helper.make_graph([helper.make_node("Relu", ["x"], ["z"]), helper.make_node("Neg", ["z"], [then_out])], "t",
                          [], [helper.make_tensor_value_info(then_out, TensorProto.FLOAT, [2])])
    e = helper.make_graph([helper.make_node("Neg", ["x"], ["z"]), helper.make_node("Abs", ["z"], [else_out])], "e",
                          [], [helper.make_tensor_value_info(else_out, TensorProto.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=t, else_branch=e)], "g", [x, c], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_sibling_branches_may_reuse_names() -> None:
    from compiler.export import export_model
    from compiler.passes.check import run_ort

    m = _if_model("out", "out")
    onnx.checker.check_model(m)
    graph, _ = load(m)
    x = np.array([-1.5, 2.0], np.float32)
    for cond in (True, False):
        feeds = {"x": x, "c": np.array(cond)}
        np.testing.assert_array_equal(run_ort(export_model(graph), feeds)[0], run_ort(m, feeds)[0])


def test_shadowing_an_outer_name_is_refused() -> None:
    from compiler import CompileError

    with pytest.raises(CompileError) as info:
        load(_if_model("x", "out"))
    assert info.value.stage == "import" and "enclosing graph" in info.value.message
