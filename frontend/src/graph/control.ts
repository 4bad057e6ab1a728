/**
 * Run-time control flow in the fused graph (compiler.driver.control): an If, Loop or Scan the
 * compiler left to run time is a node with `control` {decision, bodies: [{name, kernels}]}; each
 * branch or body was compiled once, its kernels named `<body>/<kernel>`.
 */
import { h } from "../dom";
import type { ControlBody, ControlInfo, FusedNode } from "../events";
import { linkTo } from "../router";

/** The node's run-time control-flow description, or null for an ordinary node (or a malformed one). */
export function controlOf(node: FusedNode): ControlInfo | null {
  const c = node.control as Partial<ControlInfo> | undefined; // checked: the payload comes from the server
  if (!c || typeof c.decision !== "string" || !Array.isArray(c.bodies)) return null;
  const bodies = c.bodies.filter((b): b is ControlBody => !!b && typeof b.name === "string" && Array.isArray(b.kernels));
  return { decision: c.decision, bodies };
}

/** The side-panel block of a control-flow node: the decision in words, then each body with links to its kernels. */
export function controlBlock(id: string, node: FusedNode): HTMLElement | null {
  const c = controlOf(node);
  if (!c) return null;
  return h("div", { class: "control-flow" },
    h("h4", null, "run-time control flow"),
    h("p", { class: "control-decision" }, c.decision),
    ...c.bodies.map((b) => h("div", { class: "control-body" },
      h("p", null, h("code", null, b.name), ` · ${b.kernels.length} kernel${b.kernels.length === 1 ? "" : "s"}`),
      b.kernels.length ? h("ul", null, ...b.kernels.map((k) => h("li", null, linkTo(h("a", null, k), { page: "compilation", id, view: "kernel", kernel: k, tab: "loop" })))) : null)));
}
