// @vitest-environment happy-dom
/**
 * The passes' two times: the sidebar's sum of the passes' own `duration_ms` and the stage strip's
 * wall time `stage_ms.passes`, each labelled so the two do not look like a contradiction.
 */
import { describe, expect, it } from "vitest";
import type { CompileEvent } from "../src/events";
import { progressPane } from "../src/panes/progress";
import { irPane } from "../src/panes/ir";
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
    expect(passTimes(reduceAll(withWall(56.7)))).toEqual({ inPasses: 3.5, inModel: 0, wall: 56.7, other: expect.closeTo(53.2, 9) });
    // before compile.finished there is no wall time
    const live = reduceAll(EVENTS.filter((e) => e.type !== "compile.finished"));
    expect(passTimes(live)).toEqual({ inPasses: 3.5, inModel: 0, wall: null, other: null });
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

  it("keeps the ONNX-level passes' time apart: they run in the import stage, not the passes stage", () => {
    const state = reduceAll(withOnnxPass(withWall(56.7)));
    expect(passTimes(state)).toEqual({ inPasses: 3.5, inModel: 0.75, wall: 56.7, other: expect.closeTo(53.2, 9) });
    const pane = timelinePane();
    pane.update({ id: "abc", state, view: VIEW, meta: null });
    expect(text(pane.el.querySelector(".timeline-total"))).toContain("3 passes, 3 changed, 3.50 ms in passes + 750 µs in ONNX-level passes (import stage)");
    const first = pane.el.querySelector(".timeline-row") as HTMLElement;
    expect(first.classList.contains("level-onnx")).toBe(true);
    expect((first.querySelector("a") as HTMLElement).title).toContain("inline-control-flow (ONNX-level: rewrites the ONNX model before import, round 1 of its fixed-point group)");
  });
});

describe("IR pane at the ONNX / graph IR boundary", () => {
  it("shows the ONNX model's text with its title and no cross-IR diff", () => {
    const state = reduceAll(withOnnxPass(EVENTS));
    const pane = irPane();
    pane.update({ id: "abc", state, view: { page: "compilation", id: "abc", view: "pass", pass: 0, diff: false }, meta: null });
    expect(text(pane.el.querySelector("h2"))).toContain("ONNX model after pass 0: inline-control-flow");
    expect(text(pane.el.querySelector("h2"))).toContain("round 1");
    pane.update({ id: "abc", state, view: { page: "compilation", id: "abc", view: "pass", pass: 1, diff: true }, meta: null });
    expect(text(pane.el.querySelector("h2"))).toContain("IR after pass 1: eliminate-dead-code");
    expect((pane.el.querySelector(".ir-diff-toggle") as HTMLInputElement).disabled).toBe(true);
    expect(text(pane.el.querySelector(".ir-boundary"))).toContain("the graph IR starts at this pass (after import), so there is no line diff against pass 0");
    expect(pane.el.querySelector(".diff-labels")).toBeNull();
    pane.destroy?.();
  });
});

/** The fixture's log with an ONNX-level pass in front (index 0; the graph passes shift by one). */
function withOnnxPass(events: CompileEvent[]): CompileEvent[] {
  const out: CompileEvent[] = [];
  for (const e of events) {
    if (e.type === "pass.started" || e.type === "pass.finished") out.push({ ...e, index: e.index + 1, level: "graph" });
    else out.push(e);
    if (e.type === "compile.started") {
      out.push({ seq: 0, type: "pass.started", ts: 1000, index: 0, name: "inline-control-flow", options: {}, level: "onnx", iteration: 1 });
      out.push({ seq: 0, type: "pass.finished", ts: 1000, index: 0, name: "inline-control-flow", options: {}, level: "onnx", iteration: 1,
        duration_ms: 0.75, changed: true, ir: "<\n ir_version: 8\n>\nm (float[2] x) => (float[2] y) {\n   y = Relu (x)\n}", stats: { nodes: 1, initializers: 0 },
        remarks: [{ kind: "applied", pass: "inline-control-flow", message: "inlined If 'n3' (then-branch, condition %c folded to true)", nodes: ["n3"], data: {} }] });
    }
  }
  return out.map((e, seq) => ({ ...e, seq }));
}

