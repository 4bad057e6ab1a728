import { describe, expect, it } from "vitest";
import type { TuningInfo } from "../src/api";
import type { CompileEvent, TuneReason } from "../src/events";
import { kernelRows, scheduleSource, sortRows } from "../src/kernelrows";
import { legendTimes, stateWords } from "../src/panes/tuning";
import { reduceAll } from "../src/state";
import { stageProgress } from "../src/stages";
import { chartKernels, defaultKept, foldTune, initialTuning, latency, readTuneBudget, stepPoints, tunedShare, tuningSummary, type TuningState } from "../src/tuning";
import { EVENTS } from "./fixture";

type NoSeq<E> = E extends unknown ? Omit<E, "seq"> : never;

/** A tuning compilation's log: the search first (two tasks), then the compile with the database. */
function tuningLog(stopped = false): CompileEvent[] {
  const search: NoSeq<CompileEvent>[] = [
    { type: "tune.started", ts: 1, model: "tiny", target: "host", budget_s: 60, threads: 2, kernels: 3, tasks: [
      { kernel: "fused_conv1_relu1", workload: "w-conv", summary: "Conv+Relu f32[1, 8, 16, 16]", kernels: 2, space_size: 48, estimated_us: 300 },
      { kernel: "k_add", workload: "w-add", summary: "Add f32[1, 8]", kernels: 1, space_size: 4, estimated_us: 100 },
    ] },
    { type: "tune.progress", ts: 2, kernel: "fused_conv1_relu1", workload: "w-conv", trials: 8, trials_total: 8, batch_trials: 8, discarded: 1, mismatched: 0, best_us: 90, default_us: 100, elapsed_s: 3, budget_s: 60 },
    { type: "tune.progress", ts: 3, kernel: "fused_conv1_relu1", workload: "w-conv", trials: 16, trials_total: 16, batch_trials: 8, discarded: 0, mismatched: 0, best_us: 70, default_us: 100, elapsed_s: 6, budget_s: 60 },
    { type: "tune.finished", ts: 4, trials: 16, duration_s: 6.5, stopped, reason: stopped ? "stopped" : "budget", database: "explorer", tuned: [
      { kernel: "fused_conv1_relu1", workload: "w-conv", default_us: 100, best_us: 70, trials: 16, trace: { tile: "8x2" }, stored: true },
    ] },
  ];
  const compile = EVENTS.map((e) => (e.type === "kernel.lowered" ? { ...e, schedule_source: "tuned" as const, tuned: { median_us: 70, default_us: 100, trace: { tile: "8x2" }, database: "explorer", workload: "w-conv" } } : e));
  return [...search, ...compile].map((e, seq) => ({ ...e, seq }) as CompileEvent);
}

describe("tuning state", () => {
  it("folds the search into per-task curves whatever order the events arrive in", () => {
    const log = tuningLog();
    const a = reduceAll(log);
    const b = reduceAll([...log].reverse());
    expect(b.tuning).toEqual(a.tuning);
    const conv = a.tuning?.kernels.get("fused_conv1_relu1");
    expect(conv?.points).toEqual([{ trials: 8, total: 8, bestUs: 90 }, { trials: 16, total: 16, bestUs: 70 }]);
    expect(conv?.discarded).toBe(1);
    expect(conv?.count).toBe(2);
    expect(a.tuning?.kernels.get("k_add")?.trials).toBe(0);
    expect(a.tuning?.trialsTotal).toBe(16);
    expect(a.finished).toBeDefined(); // the compile after the search ends the log
  });

  it("shows a submitted batch (measuring) as running before its result, without a new curve point", () => {
    const log = tuningLog();
    const submitted = { type: "tune.progress", ts: 1.5, kernel: "fused_conv1_relu1", workload: "w-conv", trials: 0, trials_total: 0, batch_trials: 0,
      discarded: 0, mismatched: 0, best_us: null, default_us: null, elapsed_s: 2.5, budget_s: 60, measuring: 8 } as NoSeq<CompileEvent>;
    const early = reduceAll([log[0], { ...submitted, seq: 1 } as CompileEvent]).tuning!;
    expect(early.elapsedS).toBe(2.5);
    expect(early.kernels.get("fused_conv1_relu1")?.points).toEqual([]);
    const second = { ...submitted, ts: 2.5, trials: 8, trials_total: 8, best_us: 90, default_us: 100, elapsed_s: 3.5 } as NoSeq<CompileEvent>;
    const all = [log[0], submitted, log[1], second, ...log.slice(2)].map((e, seq) => ({ ...e, seq }) as CompileEvent);
    const conv = reduceAll(all).tuning?.kernels.get("fused_conv1_relu1");
    expect(conv?.points).toEqual([{ trials: 8, total: 8, bestUs: 90 }, { trials: 16, total: 16, bestUs: 70 }]);
  });

  it("summarizes the share of the tunable time reached and the kernel speedup", () => {
    const s = tuningSummary(reduceAll(tuningLog().slice(0, 3)).tuning!);
    expect(s.tuned).toBe(1);
    expect(s.total).toBe(2);
    expect(s.shareTuned).toBeCloseTo(300 / 400);
    expect(s.kernelSpeedup).toBeCloseTo(100 / 70); // both kernels of the task: 200 µs -> 140 µs
    expect(s.defaultUs).toBe(200);
  });

  it("gives the latency after from model.timed and before as after plus the tuned kernels' gain", () => {
    const state = reduceAll(tuningLog());
    const l = latency(state.tuning!, state.timing?.prism_ms);
    expect(l.afterMs).toBe(0.05);
    expect(l.beforeMs).toBeCloseTo(0.05 + (2 * 30) / 1000);
    expect(latency(reduceAll(tuningLog().slice(0, 3)).tuning!, 1).beforeMs).toBeNull(); // still searching
  });

  it("keeps the stage strip's import waiting while the search runs", () => {
    const searching = stageProgress(reduceAll(tuningLog().slice(0, 3)));
    expect(Object.values(searching).map((s) => s.status)).toEqual(Array(6).fill("waiting"));
    expect(reduceAll(tuningLog().slice(0, 3)).stage).toBeUndefined();
    expect(stageProgress(reduceAll(tuningLog().slice(0, 4))).import.status).toBe("running"); // searched: the compile is next
  });

  it("measures the share of the model's kernel time on tuned schedules after the compile", () => {
    expect(tunedShare(reduceAll(tuningLog()).kernels.values())).toEqual({ tuned: 1, total: 1, share: 1 });
    const mixed = [{ lowered: { schedule_source: "tuned" }, timed: { median_us: 30 } }, { lowered: {}, timed: { median_us: 90 } }, {}];
    expect(tunedShare(mixed)).toEqual({ tuned: 1, total: 2, share: 0.25 });
    expect(tunedShare([{ lowered: { schedule_source: "tuned" } }]).share).toBeNull();
  });

  it("draws the measured tasks, the most default time first", () => {
    expect(chartKernels(reduceAll(tuningLog()).tuning!).map((k) => k.kernel)).toEqual(["fused_conv1_relu1"]);
  });
});

/** The log: two tasks measured in turn; the Conv's candidates are all slower than its default. */
function slowerLog(newPayload: boolean): TuningState {
  const prog = (kernel: string, trials: number, total: number, best: number, def: number, candidate: number, stored: boolean) => ({
    type: "tune.progress" as const, seq: total, ts: total, kernel, workload: `w-${kernel}`, trials, trials_total: total, batch_trials: 8,
    discarded: 0, mismatched: 0, default_us: def, elapsed_s: total, budget_s: 60,
    ...(newPayload ? { best_us: best, candidate_us: candidate, stored } : { best_us: candidate }),
  });
  const events = [
    prog("fused_conv2d_relu_15", 8, 8, 349.8, 349.8, 391.7, false),
    prog("fused_matmul_3", 8, 16, 80, 100, 80, true),
    prog("fused_conv2d_relu_15", 16, 24, 349.8, 349.8, 371.2, false),
    prog("fused_matmul_3", 16, 32, 60, 100, 60, true),
  ];
  return events.reduce((t, e) => foldTune(t, e, e.type), initialTuning());
}

describe("best so far", () => {
  for (const newPayload of [true, false]) {
    it(`is never slower than the default, which is said to be kept (${newPayload ? "" : "a log recorded before "}tune.progress said candidate_us)`, () => {
      const t = slowerLog(newPayload);
      const conv = t.kernels.get("fused_conv2d_relu_15")!;
      expect(conv.bestUs).toBe(349.8);
      expect(conv.points.map((p) => p.bestUs)).toEqual([349.8, 349.8]);
      expect(defaultKept(conv)).toBe(true);
      expect(legendTimes(conv)).toBe(`349.8 µs, default kept; best candidate 371.2 µs, slower`);
      const mm = t.kernels.get("fused_matmul_3")!;
      expect(defaultKept(mm)).toBe(false);
      expect(legendTimes(mm)).toBe("100.0 µs → 60.0 µs (1.67x)");
      const sum = tuningSummary(t);
      expect(sum.bestUs).toBeCloseTo(349.8 + 60); // the Conv counts at its default, not at 371.2
    });
  }

  it("says the default is kept when a faster candidate was not stored (within the noise margin)", () => {
    const t = foldTune(initialTuning(), { type: "tune.progress", seq: 0, ts: 0, kernel: "k", workload: "w", trials: 8, trials_total: 8, batch_trials: 8,
      discarded: 0, mismatched: 0, best_us: 100, default_us: 100, candidate_us: 97, stored: false, elapsed_s: 1, budget_s: 60 }, "tune.progress");
    expect(legendTimes(t.kernels.get("k")!)).toBe("100.0 µs, default kept; best candidate 97.0 µs, within the noise margin");
  });

  it("takes what tune.finished kept: the default when nothing was stored", () => {
    const t = slowerLog(false);
    const done = foldTune(t, { type: "tune.finished", seq: 40, ts: 40, trials: 32, duration_s: 40, stopped: false, reason: "budget", database: "explorer", tuned: [
      { kernel: "fused_conv2d_relu_15", workload: "w-fused_conv2d_relu_15", default_us: 349.8, best_us: 371.2, trials: 16, trace: {}, stored: false },
      { kernel: "fused_matmul_3", workload: "w-fused_matmul_3", default_us: 100, best_us: 60, trials: 16, trace: { tile: "8x2" }, stored: true },
    ] }, "tune.finished");
    expect(done.kernels.get("fused_conv2d_relu_15")?.bestUs).toBe(349.8);
    expect(done.kernels.get("fused_conv2d_relu_15")?.stored).toBe(false);
    expect(latency(done, 10).beforeMs).toBeCloseTo(10 + 40 / 1000); // only the stored kernel's gain
  });
});

describe("tuning chart", () => {
  it("draws each kernel as a step line of its best so far at the search's cumulative trials", () => {
    const t = slowerLog(true);
    const [conv, mm] = ["fused_conv2d_relu_15", "fused_matmul_3"].map((k) => t.kernels.get(k)!);
    // the GEMM: 100% from trial 0 until its first batch at trial 16, then 80%, at 32 60%, flat to the end
    expect(stepPoints(mm, 40)).toEqual([{ x: 0, y: 1 }, { x: 16, y: 1 }, { x: 16, y: 0.8 }, { x: 32, y: 0.8 }, { x: 32, y: 0.6 }, { x: 40, y: 0.6 }]);
    // the Conv: its default all along, never above 100% (the chart was at 112%)
    expect(stepPoints(conv, 40)).toEqual([{ x: 0, y: 1 }, { x: 8, y: 1 }, { x: 24, y: 1 }, { x: 40, y: 1 }]);
    expect(Math.max(...stepPoints(conv, 40).map((p) => p.y))).toBe(1);
  });
});

describe("schedule source", () => {
  const info = (source: "this run" | "database", found_in: string | null): TuningInfo => ({
    id: "c1", budget_s: 60, status: "succeeded", stop_requested_at: null, can_stop: false, queue: "prism.tune.host", workers: {},
    records: { "w-conv": { kernel: "fused_conv1_relu1", median_us: 70, default_us: 100, trials: 16, threads: 2, source, found_in, found_by: found_in ? { username: "ada" } : null, created_at: "" } },
  });

  it("says this run, database or default per kernel", () => {
    const state = reduceAll(tuningLog());
    expect(kernelRows(state, info("this run", "c1"))[0].source).toBe("this run");
    const db = kernelRows(state, info("database", "k3x9q2ab"))[0];
    expect(db.source).toBe("database");
    expect(db.sourceNote).toContain("found by compilation k3x9q2ab (ada)");
    expect(kernelRows(state, info("database", null))[0].sourceNote).toContain("a compilation you cannot see");
    expect(kernelRows(state, null)[0].source).toBe("tuned"); // the record's details not read yet: no guess
    expect(kernelRows(reduceAll(EVENTS))[0].source).toBe("default");
    expect(scheduleSource(undefined).source).toBeNull();
    const rows = [...kernelRows(state, info("this run", "c1")), ...kernelRows(reduceAll(EVENTS)).map((r) => ({ ...r, kernel: "z" }))];
    expect(sortRows(rows, "source", false).map((r) => r.source)).toEqual(["default", "this run"]);
  });
});

describe("tuning state words", () => {
  it("say searching, stopped or finished, and that no search ran when the compile began without one", () => {
    const live = reduceAll(tuningLog().slice(0, 3)).tuning!;
    expect(stateWords(live, false, false)).toMatch(/^Searching: 16 trials, 6.0 s of 60 s$/);
    expect(stateWords(live, true, false)).toContain("stop requested");
    expect(stateWords(reduceAll(tuningLog()).tuning!, false, false)).toBe("Finished (budget spent): 16 trials in 6.5 s of 60 s");
    expect(stateWords(reduceAll(tuningLog(true)).tuning!, false, false)).toMatch(/^Stopped: /);
    const ended = (reason: TuneReason, error?: string): TuningState => ({ ...reduceAll(tuningLog()).tuning!, finished: { ...reduceAll(tuningLog()).tuning!.finished!, reason, ...(error ? { error } : {}) } });
    expect(stateWords(ended("exhausted"), false, false)).toBe("Finished (every candidate schedule measured): 16 trials in 6.5 s of 60 s");
    expect(stateWords(ended("error", "OSError: the broker went away"), false, false)).toBe("Ended by an error: 16 trials in 6.5 s of 60 s; OSError: the broker went away");
    const old = { ...reduceAll(tuningLog()).tuning!, finished: { ...reduceAll(tuningLog()).tuning!.finished!, reason: undefined as unknown as TuneReason } };
    expect(stateWords(old, false, false)).toBe("Finished: 16 trials in 6.5 s of 60 s"); // a log from before reasons
    const none = { kernels: new Map(), trialsTotal: 0, elapsedS: 0, budgetS: 60 };
    expect(stateWords(none, false, false)).toMatch(/^Waiting/);
    expect(stateWords(none, false, true)).toMatch(/^The search did not run/);
    const failed = { ...none, finished: { seq: 1, type: "tune.finished" as const, ts: 0, trials: 0, duration_s: 0, stopped: false, reason: "error" as const, database: "explorer", tuned: [], error: "the search could not run: the model is compiled in parts" } };
    expect(stateWords(failed, false, true)).toBe("The search did not run: the model is compiled in parts");
  });
});

describe("tune budget field", () => {
  it("is empty for no tuning, a positive number of seconds otherwise, naming the field when not", () => {
    expect(readTuneBudget("  ")).toBeNull();
    expect(readTuneBudget("90")).toBe(90);
    expect(readTuneBudget("2.5")).toBe(2.5);
    for (const bad of ["0", "-3", "abc", "Infinity"]) expect(() => readTuneBudget(bad)).toThrow(/^tune_budget_s: must be a positive number of seconds/);
  });
});
