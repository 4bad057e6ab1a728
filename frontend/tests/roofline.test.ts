import { describe, expect, it } from "vitest";
import { aboveRoof, cacheRoofs, ceilingsSource, roofOf, rooflinePoints } from "../src/panes/roofline";
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

describe("roofline ceilings", () => {
  const pts = [{ kernel: "mm", intensity: 10.67, gflops: 52.4, share: 0.5 }, { kernel: "relu", intensity: 0.125, gflops: 0.14, share: 0.5 }];
  it("uses the worker's measured ceilings when the log has them", () => {
    const c = { peak_gflops: 171, peak_gbps: 6.35, threads: 2, target: "host", lanes: 16, copy_bytes: 1 << 26, method: "m" };
    expect(roofOf(pts, c)).toEqual({ gbps: 6.35, gflops: 171, measured: true });
  });
  it("falls back to the best rates reached, labelled as such", () => {
    const r = roofOf(pts, undefined);
    expect(r.measured).toBe(false);
    expect(r.gflops).toBe(52.4);
    expect(r.gbps).toBeCloseTo(52.4 / 10.67, 9); // mm: 4.91 GB/s beats relu's 1.12
  });
});

describe("roofline cache ceilings and their machine", () => {
  const base = { peak_gflops: 22.8, peak_gbps: 11.65, threads: 1, target: "host", lanes: 8, copy_bytes: 1 << 26, method: "m" };
  it("lists the measured L2 and L3 bandwidths, none for a log without them", () => {
    expect(cacheRoofs({ ...base, l2_gbps: 97.28, l2_bytes: 524288, l3_gbps: 26.24, l3_bytes: 33554432 }))
      .toEqual([{ level: "L2", gbps: 97.28, bytes: 524288 }, { level: "L3", gbps: 26.24, bytes: 33554432 }]);
    expect(cacheRoofs({ ...base, l3_gbps: 26.24 })).toEqual([{ level: "L3", gbps: 26.24, bytes: undefined }]);
    expect(cacheRoofs(base)).toEqual([]);
    expect(cacheRoofs(undefined)).toEqual([]);
  });
  it("says whose machine measured them", () => {
    expect(ceilingsSource({ ...base, host: "vm", cpu: "znver3 (AMD EPYC)" })).toMatch(/^measured on vm, znver3 \(AMD EPYC\): the worker that produced this result/);
    expect(ceilingsSource(base)).toBe("");
  });
});

describe("kernels above a measured roof", () => {
  const c = { peak_gflops: 14.13, peak_gbps: 11.65, threads: 1, target: "host", lanes: 8, copy_bytes: 1 << 26, method: "m", l2_gbps: 50 };
  const conv = { kernel: "conv", intensity: 40, gflops: 63.95, share: 0.5 };
  const add = { kernel: "add", intensity: 0.083, gflops: 3, share: 0.3 }; // under the L2 line (50 x 0.083 = 4.2), above memory's
  const slow = { kernel: "slow", intensity: 40, gflops: 10, share: 0.2 };
  it("names the kernels faster than min(peak, I x the highest measured bandwidth)", () => {
    expect(aboveRoof([conv, add, slow], c).map((p) => p.kernel)).toEqual(["conv"]);
    expect(aboveRoof([conv, add, slow], { ...c, peak_gflops: 100 })).toEqual([]);
    expect(aboveRoof([conv, add, slow], undefined)).toEqual([]); // the best-reached roof: nothing is above it
  });
});
