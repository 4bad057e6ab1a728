/**
 * The compilation page's state: a pure reducer over the event list.
 *
 * Events are applied strictly in `seq` order. An event that arrives early (seq beyond the next
 * expected one) waits in `pending` until the gap is filled; one already applied or already
 * pending is dropped. So the same set of events gives the same state whatever the order and
 * however many times each arrives: the page looks the same live and when reopened.
 */
import type {
  CompileEvent,
  CompileFailed,
  CompileFinished,
  CompileStarted,
  FusedGroup,
  GraphFused,
  KernelCompiled,
  KernelLowered,
  KernelTimed,
  MemoryPlanned,
  ModelTimed,
  ModelAccuracy,
  ModelVerified,
  PassFinished,
  PassStarted,
  Stage,
  TuneApplied,
  UnknownEvent,
} from "./events";
import { EVENT_STAGE, isKnownEvent } from "./events";
import { splitPipeline } from "./pipeline";
import { foldTune, initialTuning, type TuningState } from "./tuning";

export interface KernelState {
  name: string;
  group?: string;
  lowered?: KernelLowered;
  compiled?: KernelCompiled;
  timed?: KernelTimed;
}

export interface CompilationState {
  /** The next seq to apply; every seq below it has been applied. */
  nextSeq: number;
  /** Events that arrived ahead of a gap, by seq. */
  pending: ReadonlyMap<number, CompileEvent | UnknownEvent>;
  started?: CompileStarted;
  /** The passes the expanded pipeline names, in order (from compile.started). */
  plannedPasses: string[];
  /** The pass running now, if any. */
  running?: PassStarted;
  passes: PassFinished[];
  fusion?: GraphFused;
  memory?: MemoryPlanned;
  kernels: ReadonlyMap<string, KernelState>;
  timing?: ModelTimed;
  verification?: ModelVerified;
  /** The quantize pass's accuracy report (model.accuracy). */
  accuracy?: ModelAccuracy;
  finished?: CompileFinished;
  failed?: CompileFailed;
  /** Auto-tuning before the compile (tune.started / tune.progress / tune.finished), if any. */
  tuning?: TuningState;
  /** How many kernels took a schedule from the tuning database (tune.applied). */
  tuneApplied?: TuneApplied;
  /** The stage the latest event belongs to. */
  stage?: Stage;
}

export function initialState(): CompilationState {
  return { nextSeq: 0, pending: new Map(), plannedPasses: [], passes: [], kernels: new Map() };
}

/** Adds one event; returns the same object when the event changes nothing (duplicate). */
export function reduce(state: CompilationState, event: CompileEvent | UnknownEvent): CompilationState {
  if (event.seq < state.nextSeq || state.pending.has(event.seq)) return state;
  if (event.seq > state.nextSeq) {
    const pending = new Map(state.pending);
    pending.set(event.seq, event);
    return { ...state, pending };
  }
  let next = apply(state, event);
  next = { ...next, nextSeq: state.nextSeq + 1 };
  if (next.pending.size === 0) return next;
  const pending = new Map(next.pending);
  for (let e = pending.get(next.nextSeq); e !== undefined; e = pending.get(next.nextSeq)) {
    pending.delete(next.nextSeq);
    next = { ...apply(next, e), nextSeq: next.nextSeq + 1 };
  }
  return { ...next, pending };
}

/** Folds a list of events (any order, duplicates allowed) into a state. */
export function reduceAll(
  events: Iterable<CompileEvent | UnknownEvent>,
  state: CompilationState = initialState(),
): CompilationState {
  let s = state;
  for (const e of events) s = reduce(s, e);
  return s;
}

function withKernel(
  state: CompilationState,
  name: string,
  update: (k: KernelState) => KernelState,
): CompilationState {
  const kernels = new Map(state.kernels);
  kernels.set(name, update(kernels.get(name) ?? { name }));
  return { ...state, kernels };
}

const TUNE_SEARCH = new Set(["tune.started", "tune.progress", "tune.finished"]);

function apply(state: CompilationState, event: CompileEvent | UnknownEvent): CompilationState {
  if (!isKnownEvent(event)) return state;
  const next = applyKnown(state, event);
  // The stage each event type belongs to comes from the schema (compiler/events/schema.py).
  // The search before a tuning compilation (tune.started/progress/finished) is no compiler stage.
  const stage = TUNE_SEARCH.has(event.type) ? undefined : EVENT_STAGE[event.type];
  return stage === undefined ? next : { ...next, stage };
}

function applyKnown(state: CompilationState, event: CompileEvent): CompilationState {
  switch (event.type) {
    case "compile.started":
      return { ...state, started: event, plannedPasses: splitPipeline(event.pipeline).map((p) => p.name) };
    case "pass.started":
      return { ...state, running: event };
    case "pass.finished":
      return { ...state, running: undefined, passes: [...state.passes, event] };
    case "graph.fused":
      return { ...state, fusion: event };
    case "memory.planned":
      return { ...state, memory: event };
    case "kernel.lowered":
      return withKernel(state, event.kernel, (k) => ({ ...k, group: event.group, lowered: event }));
    case "kernel.compiled":
      return withKernel(state, event.kernel, (k) => ({ ...k, compiled: event }));
    case "kernel.timed":
      return withKernel(state, event.kernel, (k) => ({ ...k, timed: event }));
    case "model.timed":
      return { ...state, timing: event };
    case "model.verified":
      return { ...state, verification: event };
    case "model.accuracy":
      return { ...state, accuracy: event };
    case "tune.applied":
      return { ...state, tuneApplied: event };
    case "tune.started":
    case "tune.progress":
    case "tune.finished":
      return { ...state, tuning: foldTune(state.tuning ?? initialTuning(), event, event.type) };
    case "compile.finished":
      return { ...state, finished: event, running: undefined };
    case "compile.failed":
      return { ...state, failed: event, running: undefined };
    case "tune.applied":
    case "tune.started":
    case "tune.progress":
    case "tune.finished":
      return state; // tuning events are read by the tuning view, not this reducer
  }
}

export { stageStatus, type StageStatus } from "./stages";

/** What the compilation page's status badge says. */
export type PageStatus = "not found" | "failed" | "succeeded" | "running" | "queued" | "loading";

/**
 * The compilation page's status: "not found" once the server said there is no such compilation;
 * otherwise from the events once any arrived (the page shows what they say), before that queued
 * (from the compilation's record) or loading.
 */
export function pageStatus(state: CompilationState, recordStatus: string | undefined, missing: boolean): PageStatus {
  if (missing) return "not found";
  return state.failed ? "failed" : state.finished ? "succeeded" : state.nextSeq > 0 ? "running" : recordStatus === "queued" ? "queued" : "loading";
}

/** Whether the compilation has ended (finished or failed). */
export function isDone(state: CompilationState): boolean {
  return state.finished !== undefined || state.failed !== undefined;
}

/** The group a node belongs to and its kernel name, from the fusion graph. */
export function groupOfNode(state: CompilationState, node: string): FusedGroup | undefined {
  const f = state.fusion;
  if (!f) return undefined;
  const n = f.nodes.find((x) => x.name === node || x.id === node);
  if (!n || n.group === null) return undefined;
  return f.groups.find((g) => g.id === n.group);
}

/** All remarks of all passes, in pass order. */
export function allRemarks(state: CompilationState): PassFinished["remarks"] {
  return state.passes.flatMap((p) => p.remarks ?? []);
}
