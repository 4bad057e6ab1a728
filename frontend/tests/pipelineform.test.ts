import { describe, expect, it } from "vitest";
import { pipelineProblem } from "../src/panes/pipelineform";
import type { PassInfo } from "../src/api";

const PASSES: PassInfo[] = [
  { name: "fold-constants", doc: "", options: [{ name: "max-bytes", type: "int", default: 1, doc: "" }] },
  { name: "fuse-ops", doc: "", options: [{ name: "max-group-size", type: "int", default: 16, doc: "" }] },
];

describe("pipelineProblem", () => {
  it("accepts known passes and options, and the empty pipeline (O0)", () => {
    expect(pipelineProblem("fold-constants{max-bytes=10},fuse-ops{max-group-size=4}", PASSES)).toBeNull();
    expect(pipelineProblem("", PASSES)).toBeNull();
    // a preset's name stands for its passes (the server reads "O2,quantize{...}" so)
    expect(pipelineProblem("O2,fuse-ops", PASSES, ["O0", "O1", "O2", "O3"])).toBeNull();
    expect(pipelineProblem("O2,fuse-ops", PASSES)).toBe("Unknown pass “O2”.");
  });
  it("names an unknown pass or option", () => {
    expect(pipelineProblem("fold-constants,fuse-opz", PASSES)).toBe("Unknown pass “fuse-opz”.");
    expect(pipelineProblem("fuse-ops{max-size=4}", PASSES)).toContain("has no option “max-size” (it has: max-group-size)");
  });
  it("checks a fixed-point group's passes and its own option", () => {
    expect(pipelineProblem("fixed-point{max-iterations=3}(fold-constants,fuse-ops{max-group-size=4}),fuse-ops", PASSES)).toBeNull();
    expect(pipelineProblem("fixed-point(fold-constants,fuse-opz)", PASSES)).toBe("Unknown pass “fuse-opz”.");
    expect(pipelineProblem("fixed-point{rounds=3}(fold-constants)", PASSES)).toContain("has no option “rounds” (it has: max-iterations)");
    expect(pipelineProblem("repeat(fold-constants)", PASSES)).toContain("Unknown pass group “repeat”");
  });
  it("leaves the check to the server when it has no pass list", () => {
    expect(pipelineProblem("anything", [])).toBeNull();
  });
});
