// @vitest-environment happy-dom
/**
 * The passes' two times: the sidebar's sum of the passes' own `duration_ms` and the stage strip's
 * wall time `stage_ms.passes`, each labelled so the two do not look like a contradiction.
 */
import { describe, expect, it } from "vitest";
import type { CompileEvent } from "../src/events";
import { progressPane } from "../src/panes/progress";
import { timelinePane } from "../src/panes/timeline";
import { passTimes } from "../src/stages";
import { reduceAll } from "../src/state";
import type { CompilationView } from "../src/urlstate";
import { EVENTS } from "./fixture";

const VIEW: CompilationView = { page: "compilation", id: "abc", view: "summary" };

/** The fixture's log with the passes stage's wall time set to `wall` ms (the passes take 1.5 + 2 ms). */
function withWall(wall: number): CompileEvent[] {
  return EVENTS.map((e) => (e.type === "compile.finished" ? { ...e, stage_ms: { ...e.stage_ms, passes: wall } } : e));
}

const text = (el: Element | null | undefined) => (el?.textContent ?? "").replace(/\s+/g, " ").trim();

describe("pass times", () => {
  it("splits the stage's wall time into the passes' own time and the rest", () => {
    expect(passTimes(reduceAll(withWall(56.7)))).toEqual({ inPasses: 3.5, wall: 56.7, other: expect.closeTo(53.2, 9) });
    // before compile.finished there is no wall time
    const live = reduceAll(EVENTS.filter((e) => e.type !== "compile.finished"));
    expect(passTimes(live)).toEqual({ inPasses: 3.5, wall: null, other: null });
  });

  it("the stage strip says wall and how much of it is in the passes", () => {
    const pane = progressPane();
    pane.update({ id: "abc", state: reduceAll(withWall(56.7)), view: VIEW, meta: null });
    const passes = pane.el.querySelector('[data-stage="passes"]') as HTMLElement;
    expect([...passes.querySelectorAll("span")].map((x) => x.textContent)).toEqual(["passes", "2/2", "56.7 ms wall", "3.50 ms in passes"]);
    expect(passes.title).toContain("56.7 ms wall: 3.50 ms in the passes themselves (the sidebar's total), 53.2 ms in IR snapshots");
    // other stages keep their plain time
    expect(text(pane.el.querySelector('[data-stage="codegen"]'))).not.toContain("wall");
  });

  it("the sidebar's total says it is the passes' own time and names the stage's wall time", () => {
    const pane = timelinePane();
    pane.update({ id: "abc", state: reduceAll(withWall(56.7)), view: VIEW, meta: null });
    const total = pane.el.querySelector(".timeline-total");
    expect(text(total)).toMatch(/^2 passes, 2 changed, 3\.50 ms in passes \(stage 56\.7 ms wall with IR snapshots and verification\)$/);
    expect((total?.firstElementChild as HTMLElement).title).toContain("the passes stage took 56.7 ms wall");
  });

  it("shows every pass's whole name with a title", () => {
    const pane = timelinePane();
    pane.update({ id: "abc", state: reduceAll(EVENTS), view: VIEW, meta: null });
    const names = [...pane.el.querySelectorAll(".timeline-row .pass-name")] as HTMLElement[];
    expect(names.map((n) => n.textContent)).toEqual(["eliminate-dead-code", "fuse-ops"]);
    expect(names[1].title).toBe("fuse-ops{max-group-size=16}");
  });
});
