import { describe, expect, it } from "vitest";
import { allRemarks, initialState, isDone, pageStatus, reduce, reduceAll, stageStatus } from "../src/state";
import { EVENTS } from "./fixture";
import type { CompileEvent } from "../src/events";

function shuffled<T>(xs: T[], seed: number): T[] {
  const out = [...xs];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The parts of the state a pane reads (the pending buffer is bookkeeping). */
function view(s: ReturnType<typeof initialState>) {
  return { ...s, pending: s.pending.size, kernels: [...s.kernels.entries()] };
}

describe("reduce", () => {
  it("builds the whole compilation from the log in order", () => {
    const s = reduceAll(EVENTS);
    expect(s.nextSeq).toBe(13);
    expect(s.started?.model.name).toBe("tiny");
    expect(s.plannedPasses).toEqual(["eliminate-dead-code", "fuse-ops"]);
    expect(s.passes.map((p) => p.name)).toEqual(["eliminate-dead-code", "fuse-ops"]);
    expect(s.running).toBeUndefined();
    expect(s.fusion?.groups[0].kernel).toBe("fused_conv1_relu1");
    const k = s.kernels.get("fused_conv1_relu1");
    expect(k?.group).toBe("g0");
    expect(k?.compiled?.asm).toContain("ret");
    expect(k?.timed?.median_us).toBe(40);
    expect(s.timing?.ratio).toBe(1.25);
    expect(s.verification?.passed).toBe(true);
    expect(isDone(s)).toBe(true);
    expect(allRemarks(s)).toHaveLength(2);
    expect(Object.values(stageStatus(s))).toEqual(["done", "done", "done", "done", "done", "done"]);
  });

  it("gives the same state for any arrival order", () => {
    const expected = view(reduceAll(EVENTS));
    for (const seed of [1, 2, 3, 42, 1234]) {
      expect(view(reduceAll(shuffled(EVENTS, seed)))).toEqual(expected);
    }
  });

  it("drops duplicates, applied or pending", () => {
    const s1 = reduceAll(EVENTS.slice(0, 3));
    expect(reduce(s1, EVENTS[1])).toBe(s1);
    const early = reduce(s1, EVENTS[5]);
    expect(early.pending.size).toBe(1);
    expect(reduce(early, EVENTS[5])).toBe(early);
    const twice = reduceAll([...EVENTS, ...EVENTS, EVENTS[4]]);
    expect(twice.passes).toHaveLength(2);
  });

  it("waits at a gap and does not show events past it", () => {
    const s = reduceAll([EVENTS[0], EVENTS[1], EVENTS[3], EVENTS[4]]);
    expect(s.nextSeq).toBe(2);
    expect(s.passes).toHaveLength(0);
    expect(s.running?.name).toBe("eliminate-dead-code");
    expect(s.pending.size).toBe(2);
    const filled = reduce(s, EVENTS[2]);
    expect(filled.nextSeq).toBe(5);
    expect(filled.pending.size).toBe(0);
    expect(filled.passes.map((p) => p.index)).toEqual([0, 1]);
  });

  it("does not mutate the previous state", () => {
    const s1 = reduceAll(EVENTS.slice(0, 7));
    const snapshot = view(s1);
    reduceAll(EVENTS.slice(7), s1);
    expect(view(s1)).toEqual(snapshot);
  });

  it("keeps everything produced before a failure", () => {
    const failed: CompileEvent = { seq: 7, type: "compile.failed", ts: 1, stage: "lowering", message: "no lowering for op Foo", node: "foo1" };
    const s = reduceAll([...EVENTS.slice(0, 7), failed]);
    expect(s.failed?.message).toContain("Foo");
    expect(s.passes).toHaveLength(2);
    expect(s.fusion).toBeDefined();
    const st = stageStatus(s);
    expect(st.import).toBe("done");
    expect(st.passes).toBe("done");
    expect(st.lowering).toBe("failed");
    expect(st.codegen).toBe("unreached");
  });

  it("marks stages that did not run after a finish as skipped", () => {
    const o1 = reduceAll([EVENTS[0], EVENTS[1], EVENTS[2], { seq: 3, ts: 0, type: "compile.finished", duration_ms: 10, stage_ms: { import: 5, passes: 5, lowering: 0, codegen: 0, run: 0, verify: 0 } }]);
    expect(stageStatus(o1)).toEqual({ import: "done", passes: "done", lowering: "skipped", codegen: "skipped", run: "skipped", verify: "skipped" });
  });

  it("shows the running stage while live", () => {
    const s = reduceAll(EVENTS.slice(0, 4));
    const st = stageStatus(s);
    expect(st.import).toBe("done");
    expect(st.passes).toBe("running");
    expect(st.lowering).toBe("waiting");
    expect(s.running?.name).toBe("fuse-ops");
  });

  it("ignores event types it does not know", () => {
    const s = reduceAll([EVENTS[0], { seq: 1, ts: 0, type: "tuning.candidate", x: 1 }, EVENTS[2]].map((e, i) => ({ ...e, seq: i })));
    expect(s.nextSeq).toBe(3);
    expect(s.passes).toHaveLength(1);
  });
});

describe("pageStatus", () => {
  it("says not found once the server said so, whatever else is known", () => {
    expect(pageStatus(initialState(), undefined, true)).toBe("not found");
    expect(pageStatus(initialState(), "queued", true)).toBe("not found");
  });
  it("is loading, then queued from the record, then follows the events", () => {
    expect(pageStatus(initialState(), undefined, false)).toBe("loading");
    expect(pageStatus(initialState(), "queued", false)).toBe("queued");
    const done = reduceAll(EVENTS);
    expect(pageStatus(done, "queued", false)).toBe(done.failed ? "failed" : "succeeded");
  });
});
