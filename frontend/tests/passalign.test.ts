/** The compare page's pass-by-pass pairing: by pass name and occurrence, never by position. */
import { describe, expect, it } from "vitest";
import { passAlign } from "../src/pages/compareRows";

const named = (a: string[], b: string[]) => passAlign(a, b).map(([i, j]) => [i === null ? "" : a[i], j === null ? "" : b[j]]);

describe("passAlign", () => {
  it("a pass on one side only gets a row of its own; the rest stay paired by name", () => {
    const a = ["fold-constants", "fuse-ops", "plan-memory"];
    const b = ["fold-constants", "quantize", "fuse-ops", "plan-memory"];
    expect(passAlign(a, b)).toEqual([[0, 0], [null, 1], [1, 2], [2, 3]]);
    expect(named(b, a)).toEqual([["fold-constants", "fold-constants"], ["quantize", ""], ["fuse-ops", "fuse-ops"], ["plan-memory", "plan-memory"]]);
  });

  it("pairs repeated passes by occurrence", () => {
    const a = ["simplify", "cse", "simplify", "fuse-ops"];
    const b = ["simplify", "fuse-ops"];
    expect(passAlign(a, b)).toEqual([[0, 0], [1, null], [2, null], [3, 1]]);
    expect(passAlign(["x", "x"], ["x", "y", "x"])).toEqual([[0, 0], [null, 1], [1, 2]]);
  });

  it("different pipelines: every pass on its own row; one side empty (still running)", () => {
    expect(named(["a", "b"], ["c"])).toEqual([["a", ""], ["b", ""], ["", "c"]]);
    expect(passAlign([], ["a"])).toEqual([[null, 0]]);
    expect(passAlign([], [])).toEqual([]);
  });
});
