"""Generated code that crashes, or a run over its memory limit, fails one compilation and never the
worker (issue 17), against a real stack: daphne, Redis, one Celery prefork worker (one pool process)
whose lowering plants a crashing kernel into models named `planted_<case>` (tests/explorer/planted_app.py,
the kernels of tests/compiler/runtime/test_crash_kinds.py). Each failure is `compile.failed` in stage
run naming the kernel and the signal, or the limit with its setting; the log is complete; the same pool
process then compiles and verifies a plain model.

The compile itself (LLVM's code generation) runs in a child of the pool process
(compiler/isolated_compile.py): models named `planted_codegen_<case>` fail there as LLVM would (a
crash, an allocation failing under the child's address-space limit, a Python MemoryError, the OOM
killer's SIGKILL, its CPU-time limit); each fails its compilation in stage codegen with a message
naming the signal, the last event and the limit, and the pool process lives on."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper
from prism_stack import TERMINAL, Stack

pytestmark = [pytest.mark.timeout(900)]

CHILD_AS = 3 << 30  # the measuring child's address space; the arena below needs 8 GiB
COMPILE_AS = 1536 << 20  # the compiling child's (a plain model needs about 0.7 GiB of it)
COMPILE_CPU_S = 12  # the compiling child's CPU time (a plain model needs about 2 s)


def model(name: str, nodes: list, x_shape: list[int], y_shape: list[int], inits: list | None = None) -> bytes:
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits or [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def relu(name: str) -> bytes:
    return model(name, [helper.make_node("Relu", ["x"], ["y"], name="relu")], [4, 32], [4, 32])


def huge_arena() -> bytes:
    """Expand [1] to 2^30 floats (4 GiB), Exp, ReduceSum: two 4 GiB buffers, refused by no pre-check
    under the limits set here, so the child runs into its address-space limit."""
    shape = helper.make_tensor("s", TensorProto.INT64, [1], [1 << 30])
    return model("huge_arena", [helper.make_node("Expand", ["x", "s"], ["e"], name="expand"),
                                helper.make_node("Exp", ["e"], ["f"], name="exp"),
                                helper.make_node("ReduceSum", ["f"], ["y"], name="sum", keepdims=0)], [1], [], [shape])


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with Stack.running(tmp_path_factory.mktemp("crashes"), workers=()) as s:
        s.start_worker("w1", app="tests.explorer.planted_app", PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES=str(CHILD_AS),
                       PRISM_MAX_ARENA_BYTES=str(16 << 30), PRISM_MAX_INPUT_BYTES=str(16 << 30),
                       PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES=str(COMPILE_AS),
                       PRISM_COMPILE_MAX_CPU_S=str(COMPILE_CPU_S))
        yield s


def upload(stack: Stack, name: str, data: bytes) -> dict:
    path = stack.tmp / f"{name}.onnx"
    path.write_bytes(data)
    return stack.upload(path)


def compile_and_wait(stack: Stack, model_id: str) -> dict:
    comp = stack.compile(model_id, pipeline="O1", options={"benchmark": False}, cache=False)
    return stack.wait_finished(comp["id"], timeout=300)


def assert_complete(stack: Stack, cid: str) -> None:
    with stack.http() as c:
        evs = c.get(f"/api/compilations/{cid}/events").json()["events"]
    assert [e["seq"] for e in evs] == list(range(len(evs)))
    assert sum(e["type"] in TERMINAL for e in evs) == 1 and evs[-1]["type"] == "compile.failed"


def pool_pid(comp: dict) -> int:
    return int(comp["worker"].rsplit(" pid ", 1)[1])


@pytest.mark.parametrize("case,signals", [("sigsegv", ("SIGSEGV", "SIGBUS")),
                                          ("stack_overflow", ("SIGSEGV", "SIGBUS"))])
def test_a_crash_in_generated_code_fails_one_compilation_and_the_worker_lives_on(stack, case, signals):
    final = compile_and_wait(stack, upload(stack, case, relu(f"planted_{case}"))["id"])
    assert final["status"] == "failed", final
    err = final["error"]
    assert err["stage"] == "run" and err["kernel"] == f"planted_{case}", err
    assert err["message"].startswith(f"generated code crashed in kernel planted_{case}: killed by "), err
    assert any(s in err["message"] for s in signals), err
    assert_complete(stack, final["id"])
    after = compile_and_wait(stack, upload(stack, "plain", relu("plain"))["id"])
    assert after["status"] == "succeeded" and after["verified"] is True, after
    assert pool_pid(after) == pool_pid(final), "the pool process was replaced"
    print(f"\n{case}: {err['message']}")


def test_a_run_over_the_child_memory_limit_names_it_and_the_worker_lives_on(stack):
    final = compile_and_wait(stack, upload(stack, "huge", huge_arena())["id"])
    assert final["status"] == "failed", final
    err = final["error"]
    assert err["stage"] == "run", err
    assert err["message"].startswith(f"the run ran out of memory under its address-space limit of {CHILD_AS} bytes "
                                     "(PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES)"), err
    assert_complete(stack, final["id"])
    after = compile_and_wait(stack, upload(stack, "plain", relu("plain"))["id"])
    assert after["status"] == "succeeded" and after["verified"] is True, after
    assert pool_pid(after) == pool_pid(final), "the pool process was replaced"
    print(f"\nover the limit: {err['message']}")


AS_SETTING = f"{COMPILE_AS} bytes (PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES)"
HEAD = "the compiler process was killed by {} in stage codegen (after kernel.lowered of kernel "
# case: (the start of the message, what else it says, reason)
CODEGEN = {
    "sigsegv": (HEAD.format("SIGSEGV"), ["in compiler/"], "compiler_lost"),
    "llvm_oom": (HEAD.format("SIGABRT"), [f"it ran out of memory under its address-space limit of {AS_SETTING}"],
                 "compiler_lost"),
    "memory_error": ("out of memory: ", [f"address-space limit of {COMPILE_AS} bytes (RLIMIT_AS, "
                                         "PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES)"], None),
    "sigkill": (HEAD.format("SIGKILL"), ["OOM killer"], "compiler_lost"),
}
CPU = (HEAD.format("SIGXCPU"), [f"it exceeded its CPU-time limit of {COMPILE_CPU_S} s (PRISM_COMPILE_MAX_CPU_S)"],
       "compiler_lost")


def codegen_failure(stack: Stack, case: str, start: str, says: list[str], reason: str | None) -> int:
    """Compile `planted_codegen_<case>`; assert its compile.failed; the pool process's pid."""
    final = compile_and_wait(stack, upload(stack, case, relu(f"planted_codegen_{case}"))["id"])
    assert final["status"] == "failed", (case, final)
    err = final["error"]
    assert err["stage"] == "codegen" and err.get("reason") == reason, (case, err)
    assert err["message"].startswith(start) and all(s in err["message"] for s in says), (case, err)
    if case == "sigsegv":
        assert "out of memory" not in err["message"], err  # a crash far below the limit is not called one
    assert_complete(stack, final["id"])
    print(f"\n{case}: {err['message']}")
    return pool_pid(final)


def test_a_crash_or_limit_in_llvm_codegen_fails_one_compilation_and_the_worker_lives_on(stack):
    pids = {codegen_failure(stack, case, *expected) for case, expected in CODEGEN.items()}
    after = compile_and_wait(stack, upload(stack, "plain", relu("plain"))["id"])
    assert after["status"] == "succeeded" and after["verified"] is True, after
    assert pids == {pool_pid(after)}, "the pool process was replaced"


@pytest.mark.slow  # it spends the child's whole CPU-time limit
def test_codegen_over_the_cpu_time_limit_names_it(stack):
    codegen_failure(stack, "cpu", *CPU)
