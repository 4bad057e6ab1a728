"""Every bad input of issue 2 gives a CompileError with a stage and a one-line message, and the CLI
prints that one line and exits 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler import CompileError
from compiler.cli import main as cli_main
from compiler.errors import CLI_SYNTAX
from compiler.frontend import load

ROOT = Path(__file__).resolve().parents[3]


def _model(nodes, inputs, outputs, inits=(), opset=17, domain_opsets=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, v) for d, v in domain_opsets]]
    return helper.make_model(g, opset_imports=ops)


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])


def _external(tmp_path: Path, location: str, create: bool) -> Path:
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], vals=np.zeros(24, np.uint8).tobytes(), raw=True)
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    for k, v in (("location", location), ("offset", "0"), ("length", "24")):
        e = w.external_data.add()
        e.key, e.value = k, v
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [X], [Y], [w])
    d = tmp_path / "model_dir"
    d.mkdir(exist_ok=True)
    if create:
        (tmp_path / "secret.bin").write_bytes(b"\0" * 24)
    path = d / f"m_{int(create)}.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def _cycle() -> bytes:
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Add", ["x", "a"], ["y"], name="add")]
    return _model(nodes, [X], [Y]).SerializeToString()


def _cases(tmp_path: Path) -> dict[str, tuple[object, dict, str, str]]:
    good = _model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y]).SerializeToString()
    sym = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    huge = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**20, 2**12])
    huge_y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**20, 2**12])
    big_shape = numpy_helper.from_array(np.array([2**31, 4], np.int64), "s")
    y_any = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return {
        # name: (model, input_shapes, stage, words the message must contain)
        "not onnx": (b"this is not an onnx model at all, just text\n" * 3, {}, "import", "not"),
        "truncated": (good[: len(good) // 2], {}, "import", "truncated"),
        "empty": (b"", {}, "import", "empty"),
        "missing external": (_external(tmp_path, "weights.bin", False), {}, "import", "does not exist"),
        "external outside": (_external(tmp_path, "../secret.bin", True), {}, "import", "outside"),
        "unknown op": (_model([helper.make_node("FrobnicateTensor", ["x"], ["y"], name="frob")], [X], [Y]).SerializeToString(),
                       {}, "import", "FrobnicateTensor"),
        "unknown opset": (_model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], opset=99).SerializeToString(),
                          {}, "import", "opset 99"),
        "old opset": (_model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], opset=6).SerializeToString(),
                      {}, "import", "opset 6"),
        "cycle": (_cycle(), {}, "import", "cycle"),
        "unbound dim": (_model([helper.make_node("Relu", ["x"], ["y"])], [sym], [Y]).SerializeToString(),
                        {}, "shape", "batch"),
        "overflowing input": (_model([helper.make_node("Relu", ["x"], ["y"])], [huge], [huge_y]).SerializeToString(),
                              {}, "shape", "limit"),
        "overflowing ConstantOfShape": (_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")], [], [y_any],
                                               [big_shape]).SerializeToString(), {}, "shape", "limit"),
        "undefined value": (_model([helper.make_node("Relu", ["nope"], ["y"], name="r")], [X], [Y]).SerializeToString(),
                            {}, "import", "nope"),
        "wrong input name": (good, {"images": [1, 2]}, "shape", "images"),
    }


CASE_NAMES = ["not onnx", "truncated", "empty", "missing external", "external outside", "unknown op", "unknown opset",
              "old opset", "cycle", "unbound dim", "overflowing input", "overflowing ConstantOfShape",
              "undefined value", "wrong input name"]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_input_raises_compile_error(case: str, tmp_path: Path) -> None:
    model, shapes, stage, words = _cases(tmp_path)[case]
    with pytest.raises(CompileError) as info:
        load(model, shapes)  # type: ignore[arg-type]
    err = info.value
    assert err.stage == stage
    assert "\n" not in str(err) and words in err.message


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_input_compile_fails_with_one_terminal_event(case: str, tmp_path: Path) -> None:
    model, shapes, stage, words = _cases(tmp_path)[case]
    result = compiler.compile(model, pipeline="O0", input_shapes=shapes)  # type: ignore[arg-type]
    assert not result.ok and result.error["stage"] == stage and words in result.error["message"]
    assert [e["seq"] for e in result.events] == list(range(len(result.events)))
    assert [e["type"] for e in result.events].count("compile.failed") == 1
    assert result.events[-1]["type"] == "compile.failed"


def test_unbound_dim_message_lists_every_input_and_how_to_bind() -> None:
    a = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    b = helper.make_tensor_value_info("scale", TensorProto.FLOAT, ["n"])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = _model([helper.make_node("Relu", ["images"], ["y"])], [a, b], [out])
    with pytest.raises(CompileError) as info:
        load(m)
    msg = info.value.message
    for words in ("images", "batch", "height", "width", "scale", "n)", 'input_shapes={"images": [<batch>, 3'):
        assert words in msg
    assert "--input-shape" not in msg  # the API's (and the explorer form's) words, not the command line's
    token = CLI_SYNTAX.set(True)  # as compiler.cli.main sets it
    try:
        with pytest.raises(CompileError) as info:
            load(m)
    finally:
        CLI_SYNTAX.reset(token)
    assert "--input-shape images=<batch>,3,<height>,<width> --input-shape scale=<n>" in info.value.message
    assert "input_shapes=" not in info.value.message


def test_unknown_op_names_node_and_op() -> None:
    m = _model([helper.make_node("FrobnicateTensor", ["x"], ["y"], name="frob")], [X], [Y])
    with pytest.raises(CompileError) as info:
        load(m)
    assert info.value.node == "frob" and info.value.op == "FrobnicateTensor"


@pytest.mark.parametrize("case", ["not onnx", "truncated", "external outside", "unknown op", "cycle", "unbound dim"])
def test_cli_prints_one_line_and_exits_2(case: str, tmp_path: Path, capsys) -> None:
    model, _, stage, words = _cases(tmp_path)[case]
    if isinstance(model, bytes):
        path = tmp_path / "bad.onnx"
        path.write_bytes(model)
        model = path
    rc = cli_main(["compile", str(model), "--pipeline", "O0"])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {stage}:") and words in lines[0]


def test_cli_subprocess_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\xff\xff")
    proc = subprocess.run([sys.executable, "-m", "compiler", "compile", str(bad)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
