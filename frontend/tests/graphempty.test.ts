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
