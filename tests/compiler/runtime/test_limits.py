"""Resource limits of a run (compiler.runtime.limits; issue 17 item 1): the arena, each input and the
constants are checked before anything is allocated, with an error naming the tensor and both sizes;
the child runs under an address-space rlimit; random inputs are drawn in the input's own dtype.

Expected sizes come from the ONNX tensor types (element size x element count), not from the code
under test."""

from __future__ import annotations

import os
import re
import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.runtime.limits import Limits, machine_memory_bytes
from compiler.runtime.runner import random_inputs


def _model(nodes, inputs, outputs, inits=()) -> bytes:
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _failed(model: bytes, **kw) -> dict:
    r = compiler.compile(model, pipeline="O1", benchmark=False, **kw)
    assert not r.ok, "expected the compilation to fail"
    return r.error


def test_an_input_over_the_limit_is_refused_naming_it_and_both_sizes(monkeypatch):
    monkeypatch.setenv("PRISM_MAX_INPUT_BYTES", str(1 << 20))
    model = _model([helper.make_node("Relu", ["X"], ["Y"], name="relu")], [_vi("X", [1024, 1024])],
                   [_vi("Y", [1024, 1024])])
    err = _failed(model)
    need = 4 * 1024 * 1024  # float32 x 1024 x 1024
    assert err["stage"] == "run"
    assert err["message"] == (f"input 'X' (float32[1024, 1024]) needs {need} bytes, over the limit of "
                              f"{1 << 20} bytes (PRISM_MAX_INPUT_BYTES)")


def test_working_memory_over_the_arena_limit_is_refused_before_the_run(monkeypatch):
    monkeypatch.setenv("PRISM_MAX_ARENA_BYTES", "100000")
    model = _model([helper.make_node("Relu", ["X"], ["H"], name="r1"),
                    helper.make_node("Neg", ["H"], ["H2"], name="n1"),
                    helper.make_node("Exp", ["H2"], ["Y"], name="e1")],
                   [_vi("X", [256, 256])], [_vi("Y", [256, 256])])
    err = _failed(model, input_shapes=None)
    assert err["stage"] == "run" and "over the limit of 100000 bytes (PRISM_MAX_ARENA_BYTES)" in err["message"]
    assert err["message"].startswith("the working memory (arena of ")
    assert f"{256 * 256 * 4} bytes" in err["message"]  # the largest buffer, one float32 [256, 256]


def test_constants_over_the_limit_are_refused_naming_the_largest(monkeypatch):
    monkeypatch.setenv("PRISM_MAX_CONSTANT_BYTES", "100000")
    w = numpy_helper.from_array(np.ones((128, 256), np.float32), "W")
    model = _model([helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")], [_vi("X", [4, 128])],
                   [_vi("Y", [4, 256])], [w])
    err = _failed(model)
    assert err["stage"] == "run" and "(PRISM_MAX_CONSTANT_BYTES)" in err["message"]
    # the weight W is bound packed for the micro-kernel (panels of 2 vectors: 32 columns with AVX-512,
    # 16 with AVX2): named after its node and operand
    assert re.search(rf"largest constant mm\.B packed \[N/(\d+), K, \1\], {128 * 256 * 4} bytes", err["message"]), err


def test_the_child_runs_under_its_address_space_limit(monkeypatch):
    """An arena of 3 GiB within the arena limit but over a 2.5 GiB address space: the child's
    allocation fails (no physical memory is touched) and the error names the rlimit."""
    n = 3 << 28  # float32 elements: 3 GiB
    monkeypatch.setenv("PRISM_MAX_ARENA_BYTES", str(16 << 30))
    monkeypatch.setenv("PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES", str(5 << 29))
    shape = helper.make_tensor("S", TensorProto.INT64, [1], [n])
    model = _model([helper.make_node("Expand", ["X", "S"], ["E"], name="expand"),
                    helper.make_node("ReduceSum", ["E"], ["Y"], name="sum", keepdims=0)],
                   [_vi("X", [1])], [_vi("Y", [])], [shape])
    err = _failed(model)
    assert err["stage"] == "run", err
    assert err["message"].startswith(f"the run ran out of memory under its address-space limit of {5 << 29} "
                                     "bytes (PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES)"), err


def test_defaults_follow_the_machine_and_the_environment_overrides(monkeypatch):
    for var in ("PRISM_MAX_ARENA_BYTES", "PRISM_MAX_INPUT_BYTES", "PRISM_MAX_CONSTANT_BYTES",
                "PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES", "PRISM_CHILD_MAX_CPU_S"):
        monkeypatch.delenv(var, raising=False)
    m = machine_memory_bytes()
    with open("/proc/meminfo") as f:
        total_kib = int(f.readline().split()[1])
    assert 0 < m <= total_kib * 1024
    lim = Limits.from_env()
    assert lim.arena_bytes == m // 4 and lim.input_bytes == m // 16 and lim.constant_bytes == m // 8
    assert lim.child_address_space_bytes == max(m // 2, 4 << 30) and lim.child_cpu_s == 900
    monkeypatch.setenv("PRISM_MAX_INPUT_BYTES", "123")
    assert Limits.from_env().input_bytes == 123


@pytest.mark.parametrize("layout", ["v2", "v1"])
def test_the_machine_memory_is_the_cgroup_limit_when_that_is_lower(tmp_path, layout):
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = tmp_path / ("memory.max" if layout == "v2" else "memory/memory.limit_in_bytes")
    limit.parent.mkdir(parents=True, exist_ok=True)
    limit.write_text(f"{3 << 30}\n")
    assert machine_memory_bytes(tmp_path) == min(physical, 3 << 30)
    limit.write_text("max\n" if layout == "v2" else "9223372036854771712\n")  # no limit
    assert machine_memory_bytes(tmp_path) == physical
    assert machine_memory_bytes(tmp_path / "absent") == physical


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_random_inputs_are_drawn_in_their_own_dtype(dtype):
    """4 Mi elements: the peak is the float32 draw (plus, for float16, the cast result); a float64
    draw would need 32 MiB."""
    n = 1 << 22
    tracemalloc.start()
    try:
        out = random_inputs([("x", dtype, (n,))])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out["x"].dtype == np.dtype(dtype) and out["x"].shape == (n,)
    cast = n * np.dtype(dtype).itemsize if dtype != "float32" else 0
    assert peak <= (4 * n + cast) * 1.05, peak
    assert 0.9 < float(np.std(out["x"].astype(np.float64))) < 1.1  # standard normal


def test_the_compiling_process_never_holds_the_random_inputs():
    """A 64 MiB input: drawn in the child, so this process's traced peak stays well below it."""
    model = _model([helper.make_node("Relu", ["X"], ["Y"], name="relu")], [_vi("X", [4096, 4096])],
                   [_vi("Y", [4096, 4096])])
    tracemalloc.start()
    try:
        r = compiler.compile(model, pipeline="O1", benchmark=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.ok, r.error
    assert r.of_type("model.verified")[0]["passed"] is True
    assert peak < 32 << 20, peak


def test_a_memory_error_while_compiling_names_the_address_space_limit(monkeypatch):
    """The explorer's pool processes run under RLIMIT_AS: a MemoryError inside a stage becomes a
    compile.failed of that stage naming the limit, never an internal error or a dead worker."""
    import subprocess
    import sys

    code = (
        "import resource, compiler, compiler.driver.frontend as f\n"
        "resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "def boom(comp): raise MemoryError('Unable to allocate 9.00 GiB for an array')\n"
        "f.run_graph_passes = boom\n"
        "r = compiler.compile('light_squeezenet', pipeline='O1', backend=False)\n"
        "print(r.error['stage'], '|', r.error['message'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == ("passes | out of memory: Unable to allocate 9.00 GiB for an array; the process's "
                                  f"address-space limit of {8 << 30} bytes (RLIMIT_AS)"), out.stderr[-2000:]
