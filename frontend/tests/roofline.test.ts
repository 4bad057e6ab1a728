import { describe, expect, it } from "vitest";
import { rooflinePoints } from "../src/panes/roofline";
import { initialState } from "../src/state";

describe("roofline points", () => {
  it("places each timed kernel at flops/bytes and flops/time", () => {
    const state = initialState();
    // 2*M*N*K = 2*64*64*64 FLOPs in 10 µs over 3 * 64*64*4 bytes; an elementwise Relu of 4096 floats.
    (state.kernels as Map<string, unknown>).set("mm", { name: "mm", timed: { kernel: "mm", median_us: 10, flops: 524288, bytes: 49152, gflops: 52.4, gbps: 4.9 } } as never);
    (state.kernels as Map<string, unknown>).set("relu", { name: "relu", timed: { kernel: "relu", median_us: 30, flops: 4096, bytes: 32768, gflops: 0.14, gbps: 1.1 } } as never);
    (state.kernels as Map<string, unknown>).set("copy", { name: "copy", timed: { kernel: "copy", median_us: 5, flops: 0, bytes: 100, gflops: 0, gbps: 0.02 } } as never);
    const pts = rooflinePoints(state);
    expect(pts.map((p) => p.kernel)).toEqual(["mm", "relu"]); // no FLOPs: no place on the chart
    expect(pts[0].intensity).toBeCloseTo(524288 / 49152, 9);
    expect(pts[0].gflops).toBeCloseTo(52.4288, 9);
    expect(pts[1].intensity).toBe(0.125);
    expect(pts[0].share).toBeCloseTo(10 / 45, 9);
  });
});
