// @vitest-environment happy-dom
/** The fusion-graph tab of a compilation without a graph.fused event says why it is empty. */
import { describe, expect, it } from "vitest";
import { graphPane } from "../src/panes/graph";
import type { PaneContext } from "../src/panes/types";

const ctx = (state: Record<string, unknown>) => ({ id: "c1", view: { view: "graph" }, state, review: null }) as unknown as PaneContext;

describe("graph pane without a fusion graph", () => {
  it("says the compilation has none once it ended (O0/O1 run no fuse-ops), and waits while it runs", () => {
    const pane = graphPane();
    pane.update(ctx({ kernels: new Map() }));
    expect(pane.el.textContent).toContain("No fusion graph yet.");
    pane.update(ctx({ kernels: new Map(), finished: { type: "compile.finished", seq: 9, ts: 0 } }));
    expect(pane.el.textContent).toContain("No fusion graph in this compilation.");
    expect(pane.el.textContent).toContain("fuse-ops");
  });
});

describe("heat legend", () => {
  it("counts the drawn groups' timed kernels, and gives no count where no group is drawn (control-flow bodies)", async () => {
    const { heatLegend } = await import("../src/panes/graph");
    const text = (els: HTMLElement[]) => els.map((e) => e.textContent).join("");
    expect(text(heatLegend(2, 2))).toContain("2 of 2 kernels timed");
    expect(text(heatLegend(0, 0))).not.toMatch(/\d+ of \d+/);
  });
});
