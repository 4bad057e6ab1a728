import { describe, expect, it } from "vitest";
import { prefill, readShapes } from "../src/shapes";

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
});
