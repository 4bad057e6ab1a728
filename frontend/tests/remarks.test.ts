// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { nodeOps } from "../src/panes/remarks";

describe("remarks: node op types from the printed IR", () => {
  it("maps each node's name (named, or Op:output for a nameless one) to its op type", () => {
    const ir = [
      "graph @squeezenet_old(%data_0: f32[1, 3, 224, 224]) {",
      "  %r0 = Conv(%data_0, %conv1_w_0, %conv1_b_0) {kernel_shape = [3, 3]} : f32[1, 64, 111, 111]  // n0",
      "  %r1 = Relu(%r0) : f32[1, 64, 111, 111]  // n1",
      "  %c = com.microsoft.Gelu(%r1) : f32[1, 64, 111, 111]  // Gelu:c",
      "  return %c",
      "}",
    ].join("\n");
    expect([...nodeOps(ir)]).toEqual([["n0", "Conv"], ["n1", "Relu"], ["Gelu:c", "com.microsoft.Gelu"]]);
    expect(nodeOps(undefined).size).toBe(0);
  });
});
