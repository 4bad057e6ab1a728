"""Provenance line by line (issue 15 item 2): each loop-IR kernel names its ONNX nodes (``# origin:``,
not part of the cache key), its LLVM IR carries ``!dbg`` locations at loop-IR lines, and
``kernel.compiled`` maps each assembly / LLVM IR line back to a loop-IR line
(compiler/codegen/debuginfo.py). The ONNX node names are checked against the ONNX model itself."""

from __future__ import annotations

import re

import onnx
import pytest

from compiler.api import compile as compile_model
from compiler.codegen import compile as cg
from compiler.codegen.debuginfo import asm_line_map, is_instruction, llvm_line_map
from compiler.loops.ir import Buffer, Float, For, Load, PrimFunc, Seq, Store, Var, add
from compiler.loops.printer import print_func, statement_lines
from compiler.samples import fetch
from compiler.targets import get_target


def _two_loops(origin: list[str]) -> tuple[PrimFunc, Store, Store]:
    x, y, z = Buffer("in0", "f32", (64,), "input"), Buffer("out0", "f32", (64,), "output"), Buffer("out1", "f32", (64,), "output")
    i, j = Var("i"), Var("j")
    s1 = Store(y, (i,), add(Load(x, (i,)), Float(1.0)))
    s2 = Store(z, (j,), add(Load(y, (j,)), Load(x, (j,))))
    f = PrimFunc("k", [x, y, z], Seq([For(i, 64, s1, "serial"), For(j, 64, s2, "vectorized")]))
    f.attrs["bindings"] = ["in0 = input %a", "out0 = output %b", "out1 = output %c"]
    f.attrs["origin"] = origin
    return f, s1, s2


def test_origin_is_printed_and_left_out_of_the_cache_key():
    f, _, _ = _two_loops(["add_1", "add_2"])
    g, _, _ = _two_loops(["other_a", "other_b"])
    assert "    # origin: add_1, add_2" in print_func(f).splitlines()
    t = get_target("host")
    assert cg.kernel_key(f, t) == cg.kernel_key(g, t)
    h, _, _ = _two_loops([])  # no origin line: the loop-IR lines shift, so another key
    assert cg.kernel_key(h, t) != cg.kernel_key(f, t)


def test_statement_lines_are_the_printed_lines():
    f, s1, s2 = _two_loops(["add_1"])
    lines = print_func(f).splitlines()
    where = statement_lines(f)
    assert lines[where[id(s1)] - 1].strip().startswith("out0[i] = ")
    assert lines[where[id(s2)] - 1].strip().startswith("out1[j] = ")
    assert lines[where[id(f.body.stmts[1])] - 1].strip() == "for j in T.vectorized(64):"


def test_each_store_s_code_is_located_at_its_line():
    f, s1, s2 = _two_loops(["add_1"])
    ck = cg._compile(f, get_target("host"), cg.kernel_key(f, get_target("host")) + "dbg")
    where = statement_lines(f)
    assert "!DISubprogram(" in ck.llvm_ir and "!DICompileUnit(" in ck.llvm_ir
    # unoptimized LLVM IR: each store instruction sits at its own statement's line
    stores = [m for line, m in zip(ck.llvm_ir.split("\n"), ck.llvm_ir_lines, strict=True) if " store " in f" {line}"]
    assert set(stores) == {where[id(s1)], where[id(s2)]}
    asm = ck.asm.split("\n")
    assert len(ck.asm_lines) == len(asm) and len(ck.llvm_ir_optimized_lines) == len(ck.llvm_ir_optimized.split("\n"))
    # the adds of both stores reach the assembly at their lines (vaddss/vaddps, addss/addps)
    adds = {m for line, m in zip(asm, ck.asm_lines, strict=True) if re.search(r"\bv?add[sp]s\b", line)}
    assert adds == {where[id(s1)], where[id(s2)]}


def test_asm_line_map_reads_loc_directives_and_attributes_line_zero():
    asm = "\n".join(['\t.file\t0 "" "loop_ir"', "k:", "\t.loc\t0 0 0", "\tpushq\t%rbx", "\t.loc\t0 7 1 prologue_end",
                     "\tmovq\t%rdi, %rax", ".LBB0_1:", "\taddq\t$1, %rax", "\t.loc\t0 0 1", "\tpopq\t%rbx",
                     "\tretq", ".Lfunc_end0:", "\t.section\t.debug_line"])
    assert asm_line_map(asm) == [0, 0, 0, -7, 0, 7, 0, 7, 0, -7, -7, 0, 0]
    ll = 'define void @k() !dbg !3 {\n  ret void, !dbg !9\n}\n!9 = !DILocation(line: 12, column: 1, scope: !3)'
    assert llvm_line_map(ll) == [0, 12, 0, 0]


@pytest.fixture(scope="module")
def squeezenet_events() -> list[dict]:
    events: list[dict] = []
    r = compile_model("light_squeezenet", on_event=events.append, verify=False, benchmark=False)
    assert r.error is None
    return events


def test_every_kernel_s_instructions_map_to_a_loop_ir_statement_and_onnx_nodes(squeezenet_events):
    onnx_names = {n.name for n in onnx.load(fetch("light_squeezenet")).graph.node}
    lowered = {e["kernel"]: e for e in squeezenet_events if e["type"] == "kernel.lowered"}
    total = exact = mapped = 0
    worst = 1.0
    for e in (e for e in squeezenet_events if e["type"] == "kernel.compiled"):
        low = lowered[e["kernel"]]
        assert low["nodes"] and set(low["nodes"]) <= onnx_names, low["nodes"]
        loop = low["loop_ir"].split("\n")
        statements = {i + 1 for i, line in enumerate(loop) if line.strip() and not line.strip().startswith(("#", "@", "def "))}
        asm = e["asm"].split("\n")
        assert len(e["asm_loop_lines"]) == len(asm)
        ins = [i for i, line in enumerate(asm) if is_instruction(line)]
        ok = [i for i in ins if abs(e["asm_loop_lines"][i]) in statements]
        total, mapped, exact = total + len(ins), mapped + len(ok), exact + sum(e["asm_loop_lines"][i] > 0 for i in ok)
        worst = min(worst, len(ok) / len(ins))
        located = [m for m in e["llvm_ir_optimized_loop_lines"] if m]
        assert located and set(located) <= statements
    print(f"light_squeezenet: {len(lowered)} kernels, {total} asm instructions; mapped to a loop-IR statement "
          f"and ONNX nodes: {mapped / total:.1%} (exact .loc {exact / total:.1%}, the rest DWARF line 0 attributed), "
          f"worst kernel {worst:.1%}")
    assert worst >= 0.95 and exact / total >= 0.6
