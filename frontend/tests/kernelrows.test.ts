import { describe, expect, it } from "vitest";
import { kernelRows, sortRows } from "../src/kernelrows";
import { reduceAll } from "../src/state";
import type { CompileEvent } from "../src/events";
import { EVENTS } from "./fixture";

describe("kernel rows", () => {
  it("before any timing, sorted by time: in execution order (kernel.lowered's order), never relu_1, relu_10, relu_2", () => {
    // lowered in the program's order: relu_2 runs before relu_10, which runs before relu_1 (names from the graph, not the order)
    const names = ["relu_2", "relu_10", "relu_1", "conv_3"];
    const evs: CompileEvent[] = names.map((k, i) => ({ seq: i, type: "kernel.lowered", ts: 0, kernel: k, group: `g${i}`, loop_ir: "", schedule: "" }));
    const rows = kernelRows(reduceAll(evs));
    expect(sortRows(rows, "us", true).map((r) => r.kernel)).toEqual(names);
    expect(sortRows(rows, "us", false).map((r) => r.kernel)).toEqual(names);
    // one timed: it leads, the rest keep execution order
    const timed: CompileEvent = { seq: 4, type: "kernel.timed", ts: 0, kernel: "relu_1", median_us: 5, flops: 0, bytes: 0, gflops: 1, gbps: 1 };
    expect(sortRows(kernelRows(reduceAll([...evs, timed])), "us", true).map((r) => r.kernel)).toEqual(["relu_1", "relu_2", "relu_10", "conv_3"]);
  });

  it("sorted by name: natural order (relu_2 before relu_10)", () => {
    const evs: CompileEvent[] = ["relu_10", "relu_1", "relu_2"].map((k, i) => ({ seq: i, type: "kernel.lowered", ts: 0, kernel: k, group: `g${i}`, loop_ir: "", schedule: "" }));
    expect(sortRows(kernelRows(reduceAll(evs)), "kernel", false).map((r) => r.kernel)).toEqual(["relu_1", "relu_2", "relu_10"]);
  });

  it("joins groups, lowering and timings", () => {
    const rows = kernelRows(reduceAll(EVENTS));
    expect(rows).toEqual([{ kernel: "fused_conv1_relu1", ops: ["Conv", "Relu"], kind: "out-elementwise-fusable", us: 40, us1: null, threads: null, share: 1, gflops: 0.025, gbps: 0.05, status: "timed", source: "default", sourceNote: "the rule-based default schedule", order: 0 }]);
  });

  it("names an unfused kernel's ops from kernel.lowered (O1: no graph.fused), never its status", () => {
    const o1: CompileEvent[] = [
      { seq: 0, type: "kernel.lowered", ts: 0, kernel: "k_stem_conv", group: "stem_conv", loop_ir: "", schedule: "", nodes: ["stem_conv"], ops: ["Conv"] },
      { seq: 1, type: "kernel.lowered", ts: 0, kernel: "k_stem_relu", group: "stem_relu", loop_ir: "", schedule: "", nodes: ["stem_relu"], ops: ["Relu"] },
      { seq: 2, type: "kernel.lowered", ts: 0, kernel: "k_old", group: "old", loop_ir: "", schedule: "" },
    ];
    const rows = kernelRows(reduceAll(o1));
    expect(Object.fromEntries(rows.map((r) => [r.kernel, r.ops]))).toEqual({ k_stem_conv: ["Conv"], k_stem_relu: ["Relu"], k_old: [] });
  });

  it("carries the thread count and the 1-thread time, sortable", () => {
    const extra: CompileEvent[] = [
      { seq: 13, type: "kernel.timed", ts: 0, kernel: "b", median_us: 10, flops: 0, bytes: 0, gflops: 1, gbps: 2, threads: 2, median_us_1t: 19 },
      { seq: 14, type: "kernel.timed", ts: 0, kernel: "a", median_us: 12, flops: 0, bytes: 0, gflops: 1, gbps: 2, threads: 2, median_us_1t: 12.5 },
    ];
    const rows = kernelRows(reduceAll([...EVENTS.slice(0, 12), ...extra.map((e, i) => ({ ...e, seq: 12 + i }))]));
    const b = rows.find((r) => r.kernel === "b");
    expect(b?.us1).toBe(19);
    expect(b?.threads).toBe(2);
    expect(sortRows(rows, "us1", true).map((r) => r.kernel)).toEqual(["b", "a", "fused_conv1_relu1"]);
  });

  it("sorts by time with untimed kernels last", () => {
    const extra: CompileEvent[] = [
      { seq: 13, type: "kernel.timed", ts: 0, kernel: "b", median_us: 10, flops: 0, bytes: 0, gflops: 1, gbps: 2 },
      { seq: 14, type: "kernel.lowered", ts: 0, kernel: "c", group: "g9", loop_ir: "", schedule: null },
      { seq: 15, type: "kernel.timed", ts: 0, kernel: "a10", median_us: 30, flops: 0, bytes: 0, gflops: 3, gbps: 1 },
    ];
    const rows = kernelRows(reduceAll([...EVENTS.slice(0, 12), ...extra.map((e, i) => ({ ...e, seq: 12 + i }))]));
    expect(sortRows(rows, "us", true).map((r) => r.kernel)).toEqual(["fused_conv1_relu1", "a10", "b", "c"]);
    expect(sortRows(rows, "us", false).map((r) => r.kernel)).toEqual(["b", "a10", "fused_conv1_relu1", "c"]);
    expect(sortRows(rows, "kernel", false).map((r) => r.kernel)).toEqual(["a10", "b", "c", "fused_conv1_relu1"]);
    const share = sortRows(rows, "share", true);
    expect(share[0].share).toBeCloseTo(0.5);
    expect(share.reduce((s, r) => s + (r.share ?? 0), 0)).toBeCloseTo(1);
  });
});
