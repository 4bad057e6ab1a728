/**
 * The stage strip's model: for each compiler stage (DESIGN.md: import, passes, lowering, codegen,
 * run, verify), what the events say about it and its counts, pure, from the reducer's state. The
 * same events give the same strip live and on a reopened page.
 *
 * What a stage's events are: import `compile.started`; passes `pass.started`/`pass.finished`
 * (complete when every planned pass finished); lowering `kernel.lowered` (complete when every
 * fused group has one); codegen `kernel.compiled` (complete when every kernel has one); run
 * `kernel.timed`, `model.timed` (complete with the latter); verify `model.verified`.
 *
 * - Live: every stage up to the first incomplete one is done (a later stage's events also make an
 *   earlier one done), that one is running, the rest are waiting.
 * - Failed (`compile.failed` names the stage; a name outside the six, such as "shape", means the
 *   first incomplete stage): that stage failed, the stages before it are done (skipped when they
 *   produced nothing), and the stages after it were not reached, whatever they would have done.
 *   A failure of the service before the compiler began (stage "queue": a job lost from the queue,
 *   no `compile.started`) leaves every stage not reached.
 * - Finished: a stage is done when its events or its time in `stage_ms` say it ran, else skipped.
 */
import { SERVICE_FAILURE_STAGES, STAGES, type Stage } from "./events";
import type { CompilationState } from "./state";

export type StageStatus = "waiting" | "running" | "done" | "failed" | "skipped" | "unreached";

export interface StageView {
  status: StageStatus;
  /** Counts for the strip, e.g. "7/7", "30/39", "0/39 timed", "passed"; "" when none apply. */
  detail: string;
}

/** Words for a status (the strip's tooltips and screen readers). */
export const STATUS_WORDS: Record<StageStatus, string> = {
  waiting: "waiting",
  running: "running",
  done: "done",
  failed: "failed",
  skipped: "skipped (did not run)",
  unreached: "not reached (the compilation failed before it)",
};

interface Evidence {
  /** The stage's own events have started. */
  reached: boolean;
  /** Its own events say it has done all its work. */
  complete: boolean;
  detail: string;
}

function evidence(state: CompilationState): Record<Stage, Evidence> {
  const ks = [...state.kernels.values()];
  const lowered = ks.filter((k) => k.lowered).length;
  const compiled = ks.filter((k) => k.compiled).length;
  const timed = ks.filter((k) => k.timed).length;
  const groups = state.fusion?.groups.length;
  const kernels = groups ?? ks.length;
  const planned = state.plannedPasses.length;
  const passesDone = state.started !== undefined && state.running === undefined && state.passes.length >= planned;
  const v = state.verification;
  return {
    import: { reached: state.nextSeq > 0, complete: state.started !== undefined, detail: "" },
    passes: {
      reached: state.running !== undefined || state.passes.length > 0,
      complete: passesDone,
      detail: planned > 0 ? `${state.passes.length}/${planned}` : "",
    },
    lowering: {
      reached: lowered > 0,
      complete: groups !== undefined && (groups > 0 ? lowered >= groups : passesDone),
      detail: groups ? `${lowered}/${groups}` : "",
    },
    codegen: {
      reached: compiled > 0,
      complete: kernels > 0 && compiled >= kernels,
      detail: kernels > 0 && (compiled > 0 || lowered > 0) ? `${compiled}/${kernels}` : "",
    },
    run: {
      reached: timed > 0 || state.timing !== undefined,
      complete: state.timing !== undefined,
      detail: kernels > 0 && compiled > 0 ? `${timed}/${kernels} timed` : "",
    },
    verify: {
      reached: v !== undefined,
      complete: v !== undefined,
      detail: !v ? "" : v.verified === false || v.passed === null ? "not verified" : v.passed ? "passed" : "mismatch",
    },
  };
}

/** `compile.failed` stages of the service itself, before any compiler stage (explorer/compilations/services/queue.py). */
export const SERVICE_STAGES: ReadonlySet<string> = new Set(SERVICE_FAILURE_STAGES);

/** Each stage's status and counts; see the module docstring for the rules. */
export function stageProgress(state: CompilationState): Record<Stage, StageView> {
  const ev = evidence(state);
  const reachedAfter = (i: number) => STAGES.slice(i + 1).some((s) => ev[s].reached);
  const done = STAGES.map((s, i) => ev[s].complete || reachedAfter(i));
  const firstOpen = done.indexOf(false);
  const status = (stage: Stage, i: number): StageStatus => {
    const e = ev[stage];
    if (state.failed) {
      if (!state.started && SERVICE_STAGES.has(state.failed.stage)) return "unreached";
      const named = (STAGES as readonly string[]).indexOf(state.failed.stage);
      const at = named >= 0 ? named : firstOpen >= 0 ? firstOpen : STAGES.length - 1;
      if (i < at) return done[i] || e.reached ? "done" : "skipped";
      if (i === at) return "failed";
      return "unreached";
    }
    if (state.finished) {
      const ms = state.finished.stage_ms?.[stage];
      return e.complete || e.reached || (ms !== undefined && ms > 0) ? "done" : "skipped";
    }
    // A tuning compilation searches first (tune.*, the tuning pane): its stages wait until the compile begins.
    if (state.nextSeq === 0 || (state.tuning && !state.tuning.finished && !state.started)) return "waiting";
    const cur = firstOpen >= 0 ? firstOpen : STAGES.length;
    return i < cur ? "done" : i === cur ? "running" : "waiting";
  };
  const out = {} as Record<Stage, StageView>;
  STAGES.forEach((stage, i) => {
    const st = status(stage, i);
    const quiet = st === "waiting" || st === "skipped" || st === "unreached";
    out[stage] = { status: st, detail: quiet ? "" : ev[stage].detail };
  });
  return out;
}

/** Only the statuses (the progress bar's colours). */
export function stageStatus(state: CompilationState): Record<Stage, StageStatus> {
  const p = stageProgress(state);
  return Object.fromEntries(STAGES.map((s) => [s, p[s].status])) as Record<Stage, StageStatus>;
}

/**
 * The passes stage's two times, which measure different things:
 * - `inPasses`: the sum of the graph passes' own `duration_ms` (pass.finished; the timing instrument
 *   times only the pass itself); the ONNX-level passes (`level: "onnx"`) run in the import stage,
 *   so `inModel` sums theirs apart; the passes sidebar's total is the two together;
 * - `wall`: `stage_ms.passes` of compile.finished (compiler/api.py), the wall time of the whole
 *   pass pipeline, which also prints an IR snapshot, verifies the IR and collects stats after each
 *   pass, records the events and runs the per-pass checks when they are on; null before the
 *   compilation finished.
 * `other` is wall − inPasses (null without a wall time).
 */
export interface PassTimes {
  inPasses: number;
  inModel: number;
  wall: number | null;
  other: number | null;
}

export function passTimes(state: CompilationState): PassTimes {
  const graph = state.passes.filter((p) => p.level !== "onnx");
  const inPasses = graph.reduce((s, p) => s + p.duration_ms, 0);
  const inModel = state.passes.reduce((s, p) => s + p.duration_ms, 0) - inPasses;
  const wall = state.finished?.stage_ms?.passes ?? null;
  return { inPasses, inModel, wall, other: wall === null ? null : Math.max(0, wall - inPasses) };
}

/** What is in the passes stage's wall time besides the passes, in words (tooltips). */
export const PASS_OVERHEAD_WORDS = "IR snapshots, IR verification and stats after each pass, event recording, per-pass checks";
