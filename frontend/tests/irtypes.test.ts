import { describe, expect, it } from "vitest";
import { nodeOperands, valueTypes } from "../src/irtypes";

// The compiler's print of SqueezeNet's first fused group after fuse-ops (abridged).
const IR = [
  "graph @squeezenet_old(%data_0: f32[1, 3, 224, 224]) {",
  "  %conv1_b_0 = constant f32[64] <digest 4e8caa91>",
  "  %conv1_w_0 = constant f32[64, 3, 3, 3] <digest c6cd9e1b>",
  "  %r1 = prism.fused_group @fused_conv2d_relu_0 [out-elementwise-fusable](%data_0, %conv1_w_0, %conv1_b_0) : f32[1, 64, 111, 111] {",
  "    ^args(%data_0: f32[1, 3, 224, 224], %conv1_w_0: f32[64, 3, 3, 3], %conv1_b_0: f32[64])",
  "    %r0 = Conv(%data_0, %conv1_w_0, %conv1_b_0) {kernel_shape = [3, 3], pads = [0, 0, 0, 0]} : f32[1, 64, 111, 111]  // n0",
  "    yield %r0",
  "  }",
  "  return %r1",
  "}",
].join("\n");

describe("IR types", () => {
  it("types every value and lists a node's operands, weights and biases included", () => {
    const t = valueTypes(IR);
    expect(t.get("data_0")).toEqual({ type: "f32[1, 3, 224, 224]", constant: false });
    expect(t.get("conv1_w_0")).toEqual({ type: "f32[64, 3, 3, 3]", constant: true });
    expect(t.get("conv1_b_0")).toEqual({ type: "f32[64]", constant: true });
    expect(t.get("r0")).toEqual({ type: "f32[1, 64, 111, 111]", constant: false });
    expect(t.get("r1")).toEqual({ type: "f32[1, 64, 111, 111]", constant: false });
    expect(nodeOperands(IR.split("\n")[5])).toEqual(["data_0", "conv1_w_0", "conv1_b_0"]);
    expect(nodeOperands("  return %r1")).toEqual([]);
  });
});
