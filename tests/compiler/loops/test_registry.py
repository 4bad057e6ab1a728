"""The op registries are filled in one place each: lowerings and their complex-op kind by
``compiler.loops.registry.register``, shape inference and fusion kind by
``compiler.ops.registry.op``; no module assigns into them directly."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import compiler.loops.lower  # noqa: F401  (imports every op module: the registries are complete)
from compiler.ir import Node
from compiler.loops.registry import COMPLEX_OPS, LOWERINGS, is_complex
from compiler.ops.registry import REGISTRY, op

ROOT = Path(__file__).resolve().parents[3] / "compiler"
WRITES = re.compile(r"\b(LOWERINGS|COMPLEX_OPS|REGISTRY|SEQUENTIAL)\s*(\[[^\]]*\]\s*=[^=]|\.(update|add|setdefault|pop|discard)\()")
HOMES = {("loops/registry.py", "LOWERINGS"), ("loops/registry.py", "COMPLEX_OPS"),
         ("ops/registry.py", "REGISTRY"), ("loops/sequential.py", "SEQUENTIAL"),
         ("passes/base.py", "REGISTRY")}  # the pass registry: compiler.passes.base.register


def test_no_module_writes_a_registry_outside_its_register_function():
    writes = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            m = WRITES.search(line)
            if m and (rel, m.group(1)) not in HOMES:
                writes.append(f"{rel}:{lineno}: {line.strip()}")
    assert writes == []


def test_complex_ops_are_registered_lowerings_of_the_reading_kinds():
    assert COMPLEX_OPS <= set(LOWERINGS)
    for key in ("Conv", "MatMul", "Gemm", "MaxPool", "ReduceSum", "ArgMax", "Softmax", "Resize", "ScatterElements",
                "Scatter", "TopK", "com.microsoft.QGemm", "com.microsoft.QLinearGlobalAveragePool", "QLinearConv"):
        assert key in COMPLEX_OPS, key
    for key in ("Relu", "Add", "Transpose", "Reshape", "Cast", "com.microsoft.QLinearAdd"):
        assert key in LOWERINGS and key not in COMPLEX_OPS, key


def test_a_contrib_op_is_complex_by_its_domain_qualified_key():
    assert is_complex(Node("QGemm", [], [], domain="com.microsoft"))
    assert not is_complex(Node("QGemm", [], []))  # no default-domain QGemm exists
    assert REGISTRY["com.microsoft.QGemm"].op_type == "QGemm" and REGISTRY["prism.NarrowCast"].kind == "elementwise"


# ops registered twice: the later, specialised lowering must win whatever order the modules load in
OWNERS = {"Pow": "ops_misc", "Softplus": "ops_misc", "Clip": "ops_misc", "Gelu": "ops_misc", "Dropout": "ops_misc",
          "BatchNormalization": "ops_norm", "Pad": "ops_pad", "Resize": "ops_resize", "Upsample": "ops_resize",
          "MaxPool": "ops_pool"}


@pytest.mark.parametrize("first", ["ops_misc", "ops_pad", "ops_resize", "ops_norm", "ops_pool", "lower"])
def test_the_specialised_lowering_wins_whichever_module_is_imported_first(first):
    code = (f"import compiler.loops.{first}, compiler.loops.lower\n"
            "from compiler.loops.registry import LOWERINGS\n"
            f"print({{k: LOWERINGS[k].__module__.rsplit('.', 1)[1] for k in {sorted(OWNERS)!r}}})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    assert ast.literal_eval(out.stdout.strip()) == OWNERS


def test_an_op_registers_its_shape_inference_and_kind_once():
    with pytest.raises(ValueError, match="op Conv is registered twice"):
        op("Conv", kind="opaque")(REGISTRY["Relu"].infer)
    assert REGISTRY["Conv"].kind == "out-elementwise-fusable"
    assert {REGISTRY[k].kind for k in ("QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger")} == {
        "out-elementwise-fusable"}
