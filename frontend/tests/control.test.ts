// @vitest-environment happy-dom
/** Run-time control-flow nodes of the fused graph: the decision and each body's kernels, as text and links. */
import { describe, expect, it } from "vitest";
import type { FusedNode } from "../src/events";
import { controlBlock, controlOf } from "../src/graph/control";

const ifNode = {
  id: "select", name: "select", op_type: "If", group: null,
  control: { decision: "both branches compiled; the condition is evaluated at run time and one branch runs",
    bodies: [{ name: "select.then_branch", kernels: ["select.then_branch/fused_mul_0"] }, { name: "select.else_branch", kernels: [] }] },
} as FusedNode;

describe("control-flow nodes", () => {
  it("reads the control description and ignores ordinary or malformed nodes", () => {
    expect(controlOf(ifNode)?.bodies.map((b) => b.name)).toEqual(["select.then_branch", "select.else_branch"]);
    expect(controlOf({ id: "r", name: "r", op_type: "Relu", group: "g" })).toBeNull();
    expect(controlOf({ ...ifNode, control: { decision: 3 } } as unknown as FusedNode)).toBeNull();
  });
  it("shows the decision and links each body's kernels", () => {
    const el = controlBlock("abc", ifNode)!;
    expect(el.querySelector(".control-decision")?.textContent).toContain("evaluated at run time");
    const bodies = [...el.querySelectorAll(".control-body p")].map((p) => p.textContent);
    expect(bodies).toEqual(["select.then_branch · 1 kernel", "select.else_branch · 0 kernels"]);
    const link = el.querySelector("a")!;
    expect(link.textContent).toBe("select.then_branch/fused_mul_0");
    expect(link.getAttribute("href")).toContain("/kernel");
  });
});
