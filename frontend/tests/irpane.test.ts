// @vitest-environment happy-dom
/** The IR pane for a pass the compilation does not have (happy-dom): "not finished yet" only while it runs. */
import { describe, expect, it } from "vitest";
import { irPane } from "../src/panes/ir";
import { reduceAll } from "../src/state";
import { EVENTS } from "./fixture";

const view = (pass: number) => ({ page: "compilation", id: "abc", view: "pass", pass, diff: false }) as never;

describe("IR pane: a pass past the end", () => {
  it("says a finished compilation has no such pass and how many it has", () => {
    const pane = irPane();
    pane.update({ id: "abc", state: reduceAll(EVENTS), view: view(999), meta: null });
    expect(pane.el.textContent).toContain("This compilation has no pass 999 (it has 2 passes, 0–1).");
    expect(pane.el.textContent).not.toContain("not finished");
  });

  it("changes its words when the replayed events reach the end (a reload of a finished compilation)", () => {
    const pane = irPane();
    pane.update({ id: "abc", state: reduceAll(EVENTS.slice(0, 5)), view: view(999), meta: null });
    expect(pane.el.textContent).toContain("Pass 999 has not finished yet.");
    pane.update({ id: "abc", state: reduceAll(EVENTS), view: view(999), meta: null });
    expect(pane.el.textContent).toContain("This compilation has no pass 999 (it has 2 passes, 0–1).");
  });
});
