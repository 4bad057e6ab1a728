import { describe, expect, it } from "vitest";
import { changedDefinitions, definedNames, diffLines, diffStats, findDefiningLine, parseAttributes } from "../src/irdiff";
import { splitPipeline } from "../src/pipeline";
import { IR0, IR1 } from "./fixture";

function apply(ops: ReturnType<typeof diffLines>, side: "before" | "after"): string[] {
  return ops.filter((o) => o.op === "same" || o.op === (side === "before" ? "del" : "add")).map((o) => o.text);
}

describe("diffLines", () => {
  it("finds the removed node", () => {
    expect(diffStats(IR0, IR1)).toEqual({ added: 0, removed: 1 });
    const ops = diffLines(IR0, IR1);
    expect(ops.filter((o) => o.op === "del").map((o) => o.text)).toEqual(["%unused = Identity(%w) : f32[8, 3, 3, 3]"]);
  });

  it("is a minimal script that rebuilds both sides", () => {
    const a = "a\nb\nc\na\nb\nb\na";
    const b = "c\nb\na\nb\na\nc";
    const ops = diffLines(a, b);
    expect(apply(ops, "before")).toEqual(a.split("\n"));
    expect(apply(ops, "after")).toEqual(b.split("\n"));
    expect(ops.filter((o) => o.op !== "same")).toHaveLength(5); // Myers' paper example: D = 5
  });

  it("handles empty and equal texts", () => {
    expect(diffStats("", "")).toEqual({ added: 0, removed: 0 });
    expect(diffStats("", "x\ny\n")).toEqual({ added: 2, removed: 0 });
    expect(diffStats("x\ny", "")).toEqual({ added: 0, removed: 2 });
    expect(diffStats(IR1, IR1)).toEqual({ added: 0, removed: 0 });
  });

  it("is fast on a 1,000-line IR", () => {
    const before = Array.from({ length: 1000 }, (_, i) => `%v${i} = Relu(%v${i - 1}) : f32[1, 64, 56, 56]`).join("\n");
    const after = before.split("\n").filter((_, i) => i % 7 !== 0).map((l, i) => (i % 11 === 0 ? l.replace("Relu", "Clip") : l)).join("\n");
    const t = performance.now();
    const s = diffStats(before, after);
    expect(performance.now() - t).toBeLessThan(1000);
    expect(s.removed).toBeGreaterThan(142);
    expect(apply(diffLines(before, after), "after")).toEqual(after.split("\n"));
  });
});

describe("IR names", () => {
  it("reads defined names, quoted or not", () => {
    expect(definedNames("%conv1 = Conv(%data, %w) : f32[1]")).toEqual(["conv1"]);
    expect(definedNames("  %a, %b = Split(%x) : f32[1], f32[1]")).toEqual(["a", "b"]);
    expect(definedNames('%"weird name=1" = Relu(%x) : f32[1]')).toEqual(["weird name=1"]);
    expect(definedNames("return %relu1")).toEqual([]);
  });

  it("finds the line defining a node", () => {
    expect(findDefiningLine(IR0, "relu1")).toBe(2);
    expect(findDefiningLine(IR0, ["nothing", "unused"])).toBe(3);
    expect(findDefiningLine(IR1, "unused")).toBeNull();
  });

  it("finds a node by the name the printer writes after the line", () => {
    const ir = "graph @g(%x: f32[1]) {\n  %r0 = Relu(%x) : f32[1]  // relu/1\n  %r1 = Relu(%r0) : f32[1]  // n1\n  return %r1\n}\n";
    expect(findDefiningLine(ir, "n1")).toBe(3);
    expect(findDefiningLine(ir, ["relu/1", "r1"])).toBe(2);
    expect(findDefiningLine(ir, "r0")).toBe(2);
  });

  it("reads a node's attributes", () => {
    expect(parseAttributes("  %r0 = Conv(%x, %w) {kernel_shape = [3, 3], pads = [0, 0, 0, 0], auto_pad = \"a,b}\"} : f32[1, 64]  // n0")).toEqual([
      ["kernel_shape", "[3, 3]"],
      ["pads", "[0, 0, 0, 0]"],
      ["auto_pad", '"a,b}"'],
    ]);
    expect(parseAttributes("  %r1 = Relu(%r0) : f32[1, 8]  // n1")).toEqual([]);
    expect(parseAttributes("  %y = prism.fused_group @k [elementwise](%x) : f32[1, 8] {")).toEqual([]);
  });

  it("lists changed definitions", () => {
    const after = IR1.replace("Relu(%conv1)", "Clip(%conv1)");
    expect([...changedDefinitions(IR0, after)]).toEqual(["relu1"]);
  });
});

describe("splitPipeline", () => {
  it("splits at top-level commas only", () => {
    expect(splitPipeline("fold-constants, eliminate-dead-code,fuse-ops{max-group-size=16,allow-reduction=true}")).toEqual([
      { name: "fold-constants", options: "" },
      { name: "eliminate-dead-code", options: "" },
      { name: "fuse-ops", options: "max-group-size=16,allow-reduction=true" },
    ]);
    expect(splitPipeline("")).toEqual([]);
  });

  it("gives a fixed-point group's passes as entries marked with the group", () => {
    expect(splitPipeline("fixed-point{max-iterations=3}(resolve-sequences,inline-control-flow{max-rounds=2}),bound-outputs,fuse-ops")).toEqual([
      { name: "resolve-sequences", options: "", group: { name: "fixed-point", options: "max-iterations=3" } },
      { name: "inline-control-flow", options: "max-rounds=2", group: { name: "fixed-point", options: "max-iterations=3" } },
      { name: "bound-outputs", options: "" },
      { name: "fuse-ops", options: "" },
    ]);
  });
});
