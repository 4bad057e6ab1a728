/** Provenance line by line: a line selected in the loop IR, LLVM IR or assembly resolves to one loop-IR
 * line, and each text's related lines are those its per-line map (kernel.compiled) sends there, through
 * the assembly filter's shown lines. The maps below are what the .loc / !dbg lines of the texts say. */
import { describe as group, expect, it } from "vitest";
import { DEFAULT_FILTERS, filterAsm } from "../src/asmfilter";
import { describe, lineMap, linesOfNode, loopLineOf, nodesOfLine, originLine, related, relatedLines, statementLines } from "../src/provenance";
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

  it("relates a selected line to the lines of every text at once and to the kernel's ONNX nodes", () => {
    const f = filterAsm(ASM, DEFAULT_FILTERS);
    const shown = f.text.split("\n");
    const r = related(kernel, { loopLine: 5 }, f.origin);
    expect(r.loop).toEqual([5]);
    expect(r.llvm).toEqual([2, 3]);
    expect(r.opt).toEqual([2, 3]);
    expect(r.asm.map((l) => shown[l - 1].trim())).toEqual(["vmaxps\t(%rdi,%rax), %zmm0, %zmm1", "vmovups\t%zmm1, (%rsi,%rax)"]);
    expect(r.nodes).toEqual(["relu_1"]);
    // the signature line computes nothing: no node, no generated code
    expect(related(kernel, { loopLine: 2 })).toEqual({ loop: [2], llvm: [], opt: [], asm: [], nodes: [] });
    expect(related(kernel, null)).toEqual({ loop: [], llvm: [], opt: [], asm: [], nodes: [] });
  });

  it("relates an ONNX node to its kernel's origin line, statements and their code; another node to nothing", () => {
    expect(statementLines(LOOP_IR)).toEqual([4, 5]);
    expect(originLine(LOOP_IR)).toBe(3);
    const r = related(kernel, { node: "relu_1" });
    expect(r.loop).toEqual([3, 4, 5]);
    expect(r.asm).toEqual([4, 6, 9, 10, 12, 13, 14]);
    expect(r.llvm).toEqual([2, 3, 4]);
    expect(r.nodes).toEqual(["relu_1"]);
    expect(related(kernel, { node: "conv_0" }).loop).toEqual([]);
  });
});

// A fused Conv + Relu: the accumulator lines compute the Conv alone, the store into Y both (line_nodes).
const FUSED_IR = ["@T.prim_func", "def k(X: T.Buffer((8,), \"f32\", \"arena\"), Y: T.Buffer((8,), \"f32\", \"arena\")):",
  "    # origin: conv_0, relu_0", "    for i in T.serial(8):", "        acc = T.alloc_buffer((1,), \"f32\", \"local\")",
  "        acc[0] = X[i] * T.f32(2.0)", "        Y[i] = T.max(acc[0], T.f32(0.0))"].join("\n");
const FUSED_ASM_LINES = [0, 0, 6, 7, 7, -4];
const fused: KernelState = {
  name: "k",
  lowered: { type: "kernel.lowered", seq: 5, ts: 0, kernel: "k", group: "g0", loop_ir: FUSED_IR, schedule: "",
    nodes: ["conv_0", "relu_0"], line_nodes: [[], [], [], [0, 1], [0, 1], [0], [0, 1]] },
  compiled: { type: "kernel.compiled", seq: 6, ts: 0, kernel: "k", llvm_ir: "", llvm_ir_optimized: "", compile_ms: 1,
    asm: "k:\n\t.loc\t0 6 1\n\tvmulss\t%xmm0, %xmm1, %xmm1\n\tvmaxss\t%xmm2, %xmm1, %xmm1\n\tvmovss\t%xmm1, (%rsi)\n\tretq",
    asm_loop_lines: FUSED_ASM_LINES },
};

group("provenance per statement", () => {
  it("names only the nodes a statement computes", () => {
    expect(nodesOfLine(fused, 6)).toEqual(["conv_0"]);
    expect(nodesOfLine(fused, 7)).toEqual(["conv_0", "relu_0"]);
    expect(nodesOfLine(fused, 2)).toEqual([]);
    expect(related(fused, { loopLine: 6 }).nodes).toEqual(["conv_0"]);
    expect(related(fused, { loopLine: 3 }).nodes).toEqual(["conv_0", "relu_0"]); // the origin line
    expect(describe(fused, 6)).toBe("loop IR line 6: acc[0] = X[i] * T.f32(2.0) · ONNX node conv_0");
  });

  it("relates a node to the statements computing it and their instructions only", () => {
    expect(linesOfNode(fused, "relu_0")).toEqual([4, 5, 7]);
    expect(linesOfNode(fused, "conv_0")).toEqual([4, 5, 6, 7]);
    const r = related(fused, { node: "relu_0" });
    expect(r.loop).toEqual([3, 4, 5, 7]);
    expect(r.asm).toEqual([4, 5, 6]); // vmaxss, vmovss (line 7) and retq (attributed to the loop, line 4)
  });

  it("falls back to every statement for a kernel event without line_nodes", () => {
    const old: KernelState = { ...fused, lowered: { ...fused.lowered!, line_nodes: undefined } };
    expect(nodesOfLine(old, 6)).toEqual(["conv_0", "relu_0"]);
    expect(linesOfNode(old, "relu_0")).toEqual([4, 5, 6, 7]);
  });
});
