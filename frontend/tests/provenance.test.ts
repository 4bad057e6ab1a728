/** Provenance line by line: a line selected in the loop IR, LLVM IR or assembly resolves to one loop-IR
 * line, and each text's related lines are those its per-line map (kernel.compiled) sends there, through
 * the assembly filter's shown lines. The maps below are what the .loc / !dbg lines of the texts say. */
import { describe as group, expect, it } from "vitest";
import { DEFAULT_FILTERS, filterAsm } from "../src/asmfilter";
import { describe, lineMap, loopLineOf, relatedLines } from "../src/provenance";
import type { KernelState } from "../src/state";

const LOOP_IR = ["@T.prim_func", "def relu_1(X: T.Buffer((64,), \"f32\", \"arena\"), Y: T.Buffer((64,), \"f32\", \"arena\")):",
  "    # origin: relu_1", "    for i0 in T.vectorized(64):", "        Y[i0] = T.max(X[i0], T.f32(0.0))"].join("\n");
const ASM = ['\t.file\t0 "" "loop_ir"', "prism_k_1:", "\t.loc\t0 0 0", "\tpushq\t%rbx", "\t.loc\t0 4 1 prologue_end",
  "\txorl\t%eax, %eax", ".LBB0_1:", "\t.loc\t0 5 1", "\tvmaxps\t(%rdi,%rax), %zmm0, %zmm1", "\tvmovups\t%zmm1, (%rsi,%rax)",
  "\t.loc\t0 4 1", "\taddq\t$64, %rax", "\tjne\t.LBB0_1", "\tretq"].join("\n");
// per asm line: directives and labels 0, the push (DWARF line 0) attributed to the next located line (-4)
const ASM_LINES = [0, 0, 0, -4, 0, 4, 0, 0, 5, 5, 0, 4, 4, 4];
const LLVM = ["define void @prism_k_1(ptr %p0, ptr %p1) !dbg !6 {", "  %v = load <16 x float>, ptr %p0, !dbg !8",
  "  %m = call <16 x float> @llvm.maxnum.v16f32(<16 x float> %v, <16 x float> zeroinitializer), !dbg !8", "  ret void, !dbg !7", "}"].join("\n");
const LLVM_LINES = [0, 5, 5, 4, 0];

const kernel: KernelState = {
  name: "relu_1",
  lowered: { type: "kernel.lowered", seq: 5, ts: 0, kernel: "relu_1", group: "g0", loop_ir: LOOP_IR, schedule: "", nodes: ["relu_1"] },
  compiled: { type: "kernel.compiled", seq: 6, ts: 0, kernel: "relu_1", llvm_ir: LLVM, llvm_ir_optimized: LLVM, asm: ASM, compile_ms: 1,
    asm_loop_lines: ASM_LINES, llvm_ir_loop_lines: LLVM_LINES, llvm_ir_optimized_loop_lines: LLVM_LINES },
};

group("provenance", () => {
  it("resolves a selected line of each text to its loop-IR line", () => {
    expect(loopLineOf(lineMap(kernel, "loop"), 5)).toBe(5);
    expect(loopLineOf(lineMap(kernel, "asm"), 9)).toBe(5);
    expect(loopLineOf(lineMap(kernel, "asm"), 4)).toBe(4); // attributed (DWARF line 0)
    expect(loopLineOf(lineMap(kernel, "asm"), 7)).toBeNull(); // a label
    expect(loopLineOf(lineMap(kernel, "llvm"), 3)).toBe(5);
  });

  it("finds the related lines of each text, the assembly's through its filter", () => {
    expect(relatedLines(lineMap(kernel, "loop"), 5)).toEqual([5]);
    expect(relatedLines(lineMap(kernel, "opt"), 5)).toEqual([2, 3]);
    expect(relatedLines(lineMap(kernel, "asm"), 4)).toEqual([4, 6, 12, 13, 14]);
    const f = filterAsm(ASM, DEFAULT_FILTERS);
    const shown = f.text.split("\n");
    const related = relatedLines(lineMap(kernel, "asm"), 5, f.origin);
    expect(related.map((l) => shown[l - 1].trim())).toEqual(["vmaxps\t(%rdi,%rax), %zmm0, %zmm1", "vmovups\t%zmm1, (%rsi,%rax)"]);
  });

  it("names the loop-IR line and the kernel's ONNX nodes", () => {
    expect(describe(kernel, 5)).toBe("loop IR line 5: Y[i0] = T.max(X[i0], T.f32(0.0)) · ONNX node relu_1");
  });

  it("maps nothing for a kernel compiled before the maps existed", () => {
    const old: KernelState = { name: "k", compiled: { ...kernel.compiled!, asm_loop_lines: undefined } };
    expect(relatedLines(lineMap(old, "asm"), 5)).toEqual([]);
  });
});
