"""The roofline's ceilings (compiler.runtime.ceilings): Prism-generated FMA and streaming-copy kernels
run and give positive finite figures; a worker measures once and keeps them; a timed compilation
carries them in model.timed. The copy is checked against its input (numpy), the FMA's FLOP count
against the instructions LLVM emitted for it."""

from __future__ import annotations

import math
import re
import socket

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import compiler
from compiler.codegen.compile import _llvm, target_machine
from compiler.runtime import caches, ceilings
from compiler.targets import get_target

pytestmark = pytest.mark.timeout(600)


def _fma_loop(t) -> str:
    """The body of the FMA kernel's loop in the assembly LLVM emits for target ``t``."""
    mod = _llvm().parse_assembly(ceilings.ceilings_ir(t.vector_width_f32, t.triple, ceilings.fma_chains(t)))
    mod.verify()
    asm = target_machine(t).emit_assembly(mod)
    fma_body = asm.split("prism_ceiling_fma:")[1].split("prism_ceiling_copy:")[0]
    loop = re.findall(r"\n(\.LBB0_\d+):.*?\n(.*?)\n\s+j\w+\s+\1", fma_body, re.S)
    assert loop, fma_body[:800]
    assert "memcpy" not in asm  # the copy stays a loop of Prism's, not libc's
    return loop[0][1]


def test_the_fma_kernel_is_the_vector_fmas_it_counts():
    t = get_target("host")
    # the loop holds fma_chains() vector FMAs, each 2 FLOP per lane: the count measure() divides by
    assert len(re.findall(r"\bvfmadd\w*ps\b", _fma_loop(t))) == ceilings.fma_chains(t)


@pytest.mark.parametrize("name, chains", [("x86-64-v3", 12), ("x86-64-v4", 16)])
def test_the_fma_chains_cover_latency_x_pipes_and_stay_in_registers(name, chains):
    # AVX2 has 16 ymm registers: 16 chains + 2 constants spilled to the stack and shuffled registers every
    # round (the roof read 14 GFLOP/s on znver3, below the Conv kernels). Emitted only, not run, so both
    # targets are checked on any x86 machine.
    t = get_target(name)
    assert ceilings.fma_chains(t) == chains >= ceilings.MIN_CHAINS
    loop = _fma_loop(t)
    lines = [ln.split()[0] for ln in loop.strip().splitlines() if ln.strip() and not ln.strip().startswith(".")]
    fmas = [ln for ln in lines if re.fullmatch(r"vfmadd\w*ps", ln)]
    assert len(fmas) == chains
    assert "rsp" not in loop and "vmov" not in loop, loop  # no spills, no register shuffling: FMAs and the counter
    assert len(lines) - len(fmas) <= 3, loop


def test_both_kernels_run_and_give_positive_finite_figures():
    c = ceilings.measure(threads=1)
    for v in (c.peak_gflops, c.peak_gbps):
        assert math.isfinite(v) and v > 0
    assert c.lanes == get_target("host").vector_width_f32 and c.threads == 1
    assert c.copy_bytes >= 32 << 20  # far larger than the caches: the bandwidth of memory
    assert "Prism-generated" in c.method
    # the in-cache copies, for each level Linux reports (their working sets sized from caches.data_caches)
    levels = caches.data_caches()
    for lv in (2, 3):
        if lv in levels:
            g = getattr(c, f"l{lv}_gbps")
            assert g is not None and math.isfinite(g) and g > 0 and getattr(c, f"l{lv}_bytes") == levels[lv].size
            assert f"L{lv} {g} GB/s" in c.method
        else:
            assert getattr(c, f"l{lv}_gbps") is None and f"l{lv}_gbps" not in c.payload()
    assert c.host == socket.gethostname() and c.cpu.startswith(get_target("host").cpu)
    two = ceilings.measure(threads=2)
    assert math.isfinite(two.peak_gflops) and two.peak_gflops > 0 and two.threads == 2


def test_a_cross_target_has_no_ceilings_here():
    with pytest.raises(compiler.CompileError, match="does not run on this machine"):
        ceilings.measure(1, "aarch64")


def test_a_worker_measures_once_in_a_child_and_keeps_the_figures(monkeypatch):
    runs = []
    real = ceilings._measure_in_child
    monkeypatch.setattr(ceilings, "_CACHE", {})
    monkeypatch.setattr(ceilings, "_measure_in_child", lambda th, tg: runs.append((th, tg)) or real(th, tg))
    first = ceilings.worker_ceilings(1)
    assert first is not None and first.peak_gflops > 0 and first.peak_gbps > 0
    assert ceilings.worker_ceilings(1) is first
    assert runs == [(1, "host")]


def test_a_timed_compilation_carries_the_ceilings(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "relu.onnx")
    r = compiler.compile(str(tmp_path / "relu.onnx"), threads=1, verify=False)
    assert r.ok, r.error
    timed = r.of_type("model.timed")[-1]
    c = timed["ceilings"]
    assert c["threads"] == timed["threads"] == 1 and c["target"] == "host"
    assert c["peak_gflops"] > 0 and c["peak_gbps"] > 0
    assert np.isfinite([c["peak_gflops"], c["peak_gbps"]]).all()


def test_cache_sizes_read_as_linux_s_cacheinfo_writes_them(tmp_path):
    # the sysfs layout of Documentation/ABI/testing/sysfs-devices-system-cpu (cpu0/cache/indexN)
    for i, (level, kind, size, shared) in enumerate([(1, "Data", "32K", "0"), (1, "Instruction", "32K", "0"),
                                                      (2, "Unified", "512K", "0-1"), (3, "Unified", "32768K", "0-7,16-23")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in (("level", str(level)), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(text + "\n")
    bad = tmp_path / "index9"
    bad.mkdir()
    (bad / "type").write_text("Unified\n")  # no level or size: skipped
    got = caches.data_caches(tmp_path)
    assert got == {1: caches.Cache(1, 32 << 10, 1), 2: caches.Cache(2, 512 << 10, 2), 3: caches.Cache(3, 32 << 20, 16)}
    assert caches.data_caches(tmp_path / "absent") == {}
