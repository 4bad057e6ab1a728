"""Codegen: GEP-only addressing, the kernel cache, vector FMA micro-kernels, cross-target assembly."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.compile import compile_kernel
from compiler.loops.lower import lower_group
from compiler.schedule.default import apply_default
from compiler.schedule.microkernel import try_microkernel
from compiler.targets import get_target
from tests.compiler.backend_helpers import onnx_node_case


def _conv_kernel(target: str, co: int = 16):  # type: ignore[no-untyped-def]
    _, node = onnx_node_case("Conv", {"x": np.ones((1, 8, 10, 10), np.float32)}, {"pads": [1, 1, 1, 1]},
                             consts={"w": np.ones((co, 8, 3, 3), np.float32)})
    lk = try_microkernel(node, "conv", 17, get_target(target))
    assert lk is not None
    return lk


def test_identical_kernels_compile_once() -> None:
    kernels = []
    for name in ("a", "b"):
        _, node = onnx_node_case("Tanh", {name: np.ones((3, 48), np.float32)})
        lk = lower_group(node, f"k_{name}", 17)
        apply_default(lk.func, get_target("host"))
        kernels.append(compile_kernel(lk.func, get_target("host")))
    assert kernels[0].symbol == kernels[1].symbol
    assert kernels[1].cached and kernels[1].compile_ms == 0.0


def test_gep_addressing_and_avx512_fma_microkernel() -> None:
    ck = compile_kernel(_conv_kernel("x86-64-v4").func, get_target("x86-64-v4"))
    for text in (ck.llvm_ir, ck.llvm_ir_optimized):
        assert "ptrtoint" not in text and "inttoptr" not in text
    assert "getelementptr" in ck.llvm_ir and "llvm.fma.v16f32" in ck.llvm_ir
    assert "vfmadd" in ck.asm and "zmm" in ck.asm
    assert ck.obj[:4] == b"\x7fELF"


@pytest.mark.parametrize("target,needle", [("aarch64", "fmla"), ("riscv64", "vfmacc")])
def test_cross_target_assembly(target: str, needle: str) -> None:
    ck = compile_kernel(_conv_kernel(target).func, get_target(target))
    assert needle in ck.asm, ck.asm[:2000]
    assert target.split("6")[0][:5] in ck.llvm_ir_optimized.split("target triple = ")[1][:12]


def test_sse_target_has_no_fma_and_avx2_uses_ymm() -> None:
    v2 = compile_kernel(_conv_kernel("x86-64-v2").func, get_target("x86-64-v2"))
    assert "llvm.fma" not in v2.llvm_ir and "fmaf" not in v2.asm and "xmm" in v2.asm
    v3 = compile_kernel(_conv_kernel("x86-64-v3", co=12).func, get_target("x86-64-v3"))
    assert "vfmadd" in v3.asm and "ymm" in v3.asm and "zmm" not in v3.asm
