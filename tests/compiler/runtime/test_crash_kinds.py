"""A crash of generated code fails one compilation, never the process that compiles (issue 17): a
kernel planted into a real model that dies of SIGSEGV (a store far out of bounds) or of a stack
overflow (a 64 MiB stack buffer, eight times the 8 MiB stack of the thread that runs it) gives
`compile.failed` in stage run naming the kernel and the signal; the same process then compiles and
verifies the model (against ONNX Runtime) again. SIGFPE likewise, from a kernel of raw LLVM IR: Prism's
own loop IR cannot trap on an integer division (every division by a value the data gives divides by 1
instead of 0 and negates instead of dividing by -1: compiler.codegen.arith.safe_div), which the planted
`//` by a zero only the data shows checks too.

The planted kernels are written here (no ONNX op lowers to them: the lowerings check their indices
and divisors, compiler.runtime.faults); the rest of the model is the real pipeline's.
"""

from __future__ import annotations

import resource
from collections.abc import Callable

import pytest

import compiler
import compiler.driver.lower as build
from compiler.codegen.compile import compile_kernel, emit_function_object
from compiler.errors import CompileError
from compiler.loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Cast,
    Float,
    Int,
    Load,
    PrimFunc,
    Seq,
    Stmt,
    Store,
)
from compiler.loops.lower import KernelArg, LoweredKernel
from compiler.passes.plan_memory import liveness, place
from compiler.runtime.runner import run_model
from compiler.samples import randomized
from compiler.targets import get_target
from tests.compiler.conftest import LIGHT_DIR
from tests.compiler.runtime.test_runtime import _relu_kernel, _relu_model


def _tiny(x: Buffer, i: int = 0) -> Cast:
    """An integer that is 0 for the model's inputs (|x| < 1e30) but that LLVM cannot fold."""
    return Cast("i64", Bin("*", Load(x, (Int(i),)), Float(1e-30)))


def wild_store(x: Buffer) -> Stmt:
    return Store(x, (Int((1 << 40) - 1),), Float(1.0))  # 4 TiB past the input


def divide_by_zero(x: Buffer) -> Stmt:
    return Store(x, (Int(0),), Cast("f32", Bin("//", Int(7), _tiny(x))))


def stack_overflow(x: Buffer) -> Stmt:
    deep = Buffer("deep", "f32", (1 << 24,), "local")  # 64 MiB: its first element is 64 MiB below the frame
    return Allocate(deep, Seq([Store(deep, (Int(0),), Load(x, (Int(0),))),
                               Store(x, (Int(0),), Load(deep, (_tiny(x, 1),)))]))


CASES: dict[str, tuple[Callable[[Buffer], Stmt], tuple[str, ...]]] = {
    "sigsegv": (wild_store, ("SIGSEGV", "SIGBUS")),
    "stack_overflow": (stack_overflow, ("SIGSEGV", "SIGBUS")),
}


def test_a_division_by_a_zero_only_the_data_shows_does_not_trap() -> None:
    x = Buffer("x", "f32", (4,), "arena")
    ll = compile_kernel(PrimFunc("div0", [x], divide_by_zero(x)), get_target("host")).llvm_ir_optimized
    assert "sdiv" in ll and "umax" in ll  # the divisor max(d, 1): 0 never reaches the idiv


@pytest.mark.parametrize("case", list(CASES))
def test_a_crash_in_generated_code_fails_one_compilation_and_the_next_succeeds(case, monkeypatch) -> None:
    if case == "stack_overflow" and resource.getrlimit(resource.RLIMIT_STACK)[0] == resource.RLIM_INFINITY:
        pytest.skip("no stack limit: a 64 MiB frame is no overflow here")
    body, signals = CASES[case]
    real = build.lower_graph
    name = f"planted_{case}"

    def planted(graph, target, schedule_for=None):  # type: ignore[no-untyped-def]
        kernels = real(graph, target, schedule_for)
        first_in = kernels[0].args[0]
        x = Buffer("x", "f32", (first_in.buffer.numel,), "arena")
        func = PrimFunc(name, [x], body(x))
        return kernels[:1] + [LoweredKernel(name, "planted", func, [KernelArg("value", first_in.name, x)])] + kernels[1:]

    monkeypatch.setattr(build, "lower_graph", planted)
    proto = randomized(LIGHT_DIR / "light_squeezenet.onnx", seed=0)
    r = compiler.compile(proto, target="host", pipeline="O1", benchmark=False)
    assert not r.ok and r.error is not None
    assert r.error["stage"] == "run" and r.error["kernel"] == name, r.error
    assert f"generated code crashed in kernel {name}: killed by " in r.error["message"], r.error
    assert any(s in r.error["message"] for s in signals), r.error
    assert r.events[-1]["type"] == "compile.failed"
    monkeypatch.setattr(build, "lower_graph", real)
    again = compiler.compile(proto, target="host", pipeline="O1", benchmark=False)
    assert again.ok and again.of_type("model.verified")[0]["passed"]


FPE_IR = """
define void @planted_fpe(ptr %x) {
  %v = load float, ptr %x
  %s = fmul float %v, 0x39B4484C00000000  ; 1e-30
  %d = fptosi float %s to i32
  %q = sdiv i32 7, %d
  %f = sitofp i32 %q to float
  store float %f, ptr %x
  ret void
}
"""


def test_sigfpe_in_generated_code_fails_one_run_naming_the_kernel() -> None:
    g, mb = _relu_model()
    planted = {"name": "planted_fpe", "symbol": "planted_fpe",
               "obj": emit_function_object(lambda: FPE_IR, get_target("host"), "planted_fpe"),
               "args": [KernelArg("value", "x", Buffer("x", "f32", (4, 32), "arena"))]}
    with pytest.raises(CompileError) as ei:
        run_model([_relu_kernel(g), planted], g, place(liveness(g)[0]), mb, verify=True, benchmark=False)
    assert ei.value.stage == "run" and ei.value.kernel == "planted_fpe"
    assert "generated code crashed in kernel planted_fpe: killed by SIGFPE" in ei.value.message, ei.value.message
    res = run_model([_relu_kernel(g)], g, place(liveness(g)[0]), mb, verify=True, benchmark=False)
    assert res["outputs"]["y"]["passed"]
