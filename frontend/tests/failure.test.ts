// @vitest-environment happy-dom
/** The failure panel in a DOM (happy-dom): the service's failure reasons in words, the message as text. */
import { describe, expect, it } from "vitest";
import type { CompileEvent } from "../src/events";
import { failurePane } from "../src/panes/failure";
import { reduceAll } from "../src/state";
import { EVENTS } from "./fixture";

function render(failed: CompileEvent): HTMLElement {
  const pane = failurePane();
  const log = [...EVENTS.slice(0, 3), { ...failed, seq: 3 } as CompileEvent];
  pane.update({ id: "abc", state: reduceAll(log), view: { page: "compilation", id: "abc", view: "summary" } as never, meta: null });
  return pane.el;
}

describe("failure pane", () => {
  it.each([
    ["worker_lost", "the worker running it was lost"],
    ["time_limit", "it ran past the time limit"],
    ["queue_lost", "its job was lost from the queue"],
    ["something_new", "something_new"],
  ])("reason %s reads as words", (reason, words) => {
    const el = render({ seq: 3, type: "compile.failed", ts: 4, stage: "queue", message: "lost <b>3</b> times", reason } as CompileEvent);
    expect(el.hidden).toBe(false);
    expect(el.querySelector("h2")?.textContent).toBe("Compilation failed during queue");
    expect(el.querySelector("dd")?.textContent).toContain(words);
    expect(el.querySelector(".failure-message")?.textContent).toBe("lost <b>3</b> times");
    expect(el.querySelector("b")).toBeNull();
  });
  it("says a queue failure happened before the compiler started", () => {
    const pane = failurePane();
    const log = [{ seq: 0, type: "compile.failed", ts: 4, stage: "queue", message: "lost 3 times", reason: "queue_lost" } as CompileEvent];
    pane.update({ id: "abc", state: reduceAll(log), view: { page: "compilation", id: "abc", view: "summary" } as never, meta: null });
    expect(pane.el.querySelector("h2")?.textContent).toBe("Compilation failed in the queue before the compiler started");
  });
});
