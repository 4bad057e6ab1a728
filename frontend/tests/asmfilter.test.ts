/** Assembly filters as Compiler Explorer applies them, on LLVM's x86-64 output for a two-level loop nest. */
import { describe, expect, it } from "vitest";
import { commentMarker, DEFAULT_FILTERS, filterAsm, findLoops } from "../src/asmfilter";

const ASM = [
  '\t.file\t"<string>"', //                              1 directive
  "\t.section\t.rodata.cst4,\"aM\",@progbits,4", //        2 directive
  "\t.p2align\t2, 0x0", //                                3 directive (in the pool's run)
  ".LCPI0_0:", //                                         4 constant pool
  "\t.long\t0x3f800000", //                               5 pool data
  "\t.text", //                                           6
  "\t.globl\tprism_k_984fea6e0cd5a89e", //                 7
  "prism_k_984fea6e0cd5a89e:", //                          8 function label: kept
  "# %bb.0:", //                                          9 comment line
  "\txorl\t%eax, %eax", //                                10
  ".LBB0_1:                                # =>This Loop Header: Depth=1", // 11 outer loop
  "\txorl\t%ecx, %ecx", //                                12
  ".LBB0_2:                                #   Parent Loop BB0_1 Depth=1", // 13 inner loop
  "\tvaddps\t.LCPI0_0(%rip){1to8}, %ymm0, %ymm0 # kill: dead", // 14
  "\tincq\t%rcx", //                                      15
  "\tcmpq\t$8, %rcx", //                                  16
  "\tjne\t.LBB0_2", //                                    17 backward: inner loop 13..17
  ".LBB0_3:                                # in Loop: Header=BB0_1 Depth=1", // 18 unused label
  "\tincq\t%rax", //                                      19
  "\tcmpq\t$4, %rax", //                                  20
  "\tjne\t.LBB0_1", //                                    21 backward: outer loop 11..21
  "\tvzeroupper", //                                      22
  "\tretq", //                                            23
  ".Lfunc_end0:", //                                      24 used only by .size
  "\t.size\tprism_k_984fea6e0cd5a89e, .Lfunc_end0-prism_k_984fea6e0cd5a89e", // 25
  "",
].join("\n");

describe("assembly filters", () => {
  it("drops directives, unused labels, comments and constant pools, and names the kernel", () => {
    const f = filterAsm(ASM, DEFAULT_FILTERS, "#", { prism_k_984fea6e0cd5a89e: "fused_add_0" });
    expect(f.text.split("\n")).toEqual([
      "fused_add_0:",
      "\txorl\t%eax, %eax",
      ".LBB0_1:",
      "\txorl\t%ecx, %ecx",
      ".LBB0_2:",
      "\tvaddps\t.LCPI0_0(%rip){1to8}, %ymm0, %ymm0",
      "\tincq\t%rcx",
      "\tcmpq\t$8, %rcx",
      "\tjne\t.LBB0_2",
      "\tincq\t%rax",
      "\tcmpq\t$4, %rax",
      "\tjne\t.LBB0_1",
      "\tvzeroupper",
      "\tretq",
    ]);
    expect(f.origin).toEqual([8, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22, 23]);
    expect(f.hidden).toEqual({ directives: 6, unusedLabels: 2, comments: 1, constantPools: 2 });
    expect(f.loops).toEqual([{ start: 5, end: 9, innermost: true }, { start: 3, end: 12, innermost: false }]);
  });
  it("keeps what a filter turned off would drop", () => {
    const all = filterAsm(ASM, { directives: false, unusedLabels: false, comments: false, constantPools: false, readableNames: false });
    expect(all.text).toBe(ASM.replace(/\n$/, ""));
    const pools = filterAsm(ASM, { ...DEFAULT_FILTERS, constantPools: false });
    expect(pools.text.split("\n").slice(0, 1)).toEqual([".LCPI0_0:"]); // referenced, so kept as a used label
    const dirs = filterAsm(ASM, { ...DEFAULT_FILTERS, directives: false });
    expect(dirs.text).toContain(".Lfunc_end0:"); // .size names it once directives are shown
  });
  it("takes AArch64's comment marker, where # starts an immediate", () => {
    expect(commentMarker("aarch64")).toBe("//");
    const f = filterAsm(".LBB0_1:\n\tadd\tx0, x0, #1 // step\n\tcmp\tx0, #8\n\tb.ne\t.LBB0_1", DEFAULT_FILTERS, "//");
    expect(f.text).toBe(".LBB0_1:\n\tadd\tx0, x0, #1\n\tcmp\tx0, #8\n\tb.ne\t.LBB0_1");
    expect(findLoops(f.text.split("\n"))).toEqual([{ start: 1, end: 4, innermost: true }]);
  });
});
