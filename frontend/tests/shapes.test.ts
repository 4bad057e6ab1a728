import { describe, expect, it } from "vitest";
import { boundShapes, prefill, readRanges, readShapes, readValues, valueInputs } from "../src/shapes";

const input = { name: "data", dtype: "float32", shape: ["batch", 3, 224, null] };

describe("shapes", () => {
  it("prefills known dims and sample bindings", () => {
    expect(prefill(input)).toEqual(["", "3", "224", ""]);
    expect(prefill(input, [1, 3, 224, 224])).toEqual(["1", "3", "224", "224"]);
  });
  it("reads integers and names the bad field", () => {
    expect(readShapes([input], { data: ["1", "3", "224", " 224 "] })).toEqual({ data: [1, 3, 224, 224] });
    expect(() => readShapes([input], { data: ["", "3", "224", "224"] })).toThrow("Input “data” dim 0 (batch) needs a positive integer.");
    expect(() => readShapes([input], { data: ["1", "3", "x", "224"] })).toThrow("dim 2 needs a positive integer, not “x”");
    expect(() => readShapes([input], { data: ["0", "3", "1", "1"] })).toThrow("dim 0 (batch)");
  });
  it("reads the bound shapes of inputs and outputs from the printed graph IR", () => {
    // The compiler's print of Conv(k3, s2) then MaxPool(k3, s2) on x[N, 3, H, W] bound to 1x3x64x64:
    // ONNX's output size floor((64 - 3) / 2) + 1 = 31, then floor((31 - 3) / 2) + 1 = 15.
    const ir = [
      "graph @main_graph(%x: f32[1, 3, 64, 64]) {",
      "  %w = constant f32[4, 3, 3, 3] <digest 92b70fef>",
      "  %y = prism.fused_group @fused_conv2d_relu_0 [out-elementwise-fusable](%x, %w) : f32[1, 4, 31, 31] {",
      "    ^args(%x: f32[1, 3, 64, 64], %w: f32[4, 3, 3, 3])",
      "    %c = Conv(%x, %w) {kernel_shape = [3, 3], strides = [2, 2]} : f32[1, 4, 31, 31]  // Conv:c",
      "    yield %c",
      "  }",
      "  %z = MaxPool(%y) {kernel_shape = [3, 3], strides = [2, 2]} : f32[1, 4, 15, 15]  // pool",
      "  return %z",
      "}",
    ].join("\n");
    expect(boundShapes(ir, ["x", "z", "c", "missing"])).toEqual({ x: [1, 3, 64, 64], z: [1, 4, 15, 15] });
    expect(boundShapes(undefined, ["x"])).toEqual({});
  });
});

describe("input values", () => {
  const mode = { name: "mode", dtype: "int64", shape: [], value_uses: ["the condition of If 'select'"] };
  const flag = { name: "flag", dtype: "bool", shape: [1], value_uses: ["the condition of If 'f'"] };
  const data = { name: "data", dtype: "float32", shape: [1, 3] };
  it("offers only the inputs the compiler names", () => {
    expect(valueInputs([data, mode, flag]).map((i) => i.name)).toEqual(["mode", "flag"]);
  });
  it("reads integers, bools and blanks, and names the bad input", () => {
    expect(readValues([mode, flag], { mode: " -2 ", flag: "" })).toEqual({ mode: [-2] });
    expect(readValues([mode, flag], { mode: "1, 2", flag: "true" })).toEqual({ mode: [1, 2], flag: [1] });
    expect(() => readValues([mode], { mode: "1.5" })).toThrow("Input “mode” value needs integers separated by commas, not “1.5”.");
    expect(() => readValues([mode], { mode: "true" })).toThrow("not “true”");
    expect(() => readValues([mode], { mode: "1,,2" })).toThrow("Input “mode” value needs integers");
  });
});

describe("dim ranges", () => {
  it("reads ranges and lets a shape field name a ranged dim", () => {
    expect(readRanges(" N=1..8 ")).toEqual({ N: [1, 8] });
    expect(readRanges("")).toEqual({});
    expect(readShapes([input], { data: ["N", "3", "224", "224"] }, ["N"])).toEqual({ data: ["N", 3, 224, 224] });
    expect(() => readShapes([input], { data: ["M", "3", "224", "224"] }, ["N"])).toThrow("needs a positive integer or a ranged dim (N), not “M”");
  });
  it("names a bad range", () => {
    for (const bad of ["N=0..8", "N=5..2", "N=1-8", "=1..2"]) expect(() => readRanges(bad)).toThrow(`Dim range “${bad}” needs NAME=MIN..MAX`);
  });
});
