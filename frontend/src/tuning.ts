/**
 * Auto-tuning (issue 16) as the browser sees it: the `tune.*` events of a compilation folded into
 * per-kernel tuning curves (the best time so far after each measured batch, never above the kernel's
 * default: the default schedule is a point of the space; drawn at the search's cumulative trial
 * count, a step line), and what the page
 * derives from them: the share of the model's kernel time that tuning has reached, the kernel-time
 * speedup so far, and the end-to-end latency before and after.
 *
 * Semantics of the events: compiler/events/schema.py (`tune.started`: the kernels to tune with their
 * default times; `tune.progress`: one per measured batch, the kernel's trials so far and its best
 * time; `tune.finished`: what was kept). Pure, so unit-tested.
 */
import type { TuneFinished, TuneProgress, TuneStarted } from "./events";

/** One point of a kernel's curve: after a `tune.progress` of this kernel, its best-so-far time (µs). */
export interface CurvePoint {
  /** This kernel's trials so far. */
  trials: number;
  /** Every kernel's trials so far (`trials_total`): the chart's x, so that the kernels share one axis. */
  total: number;
  /** The best so far: never above the default (the default schedule is a point of the space). */
  bestUs: number;
}

export interface KernelCurve {
  /** The first kernel of the model with this workload (a task tunes them all). */
  kernel: string;
  workload: string;
  /** One-line workload, e.g. "Conv+Relu f32[1, 64, 56, 56] -> f32[1, 64, 56, 56]". */
  summary: string;
  /** Kernels of the model with this workload. */
  count: number;
  /** The default schedule's time estimated from FLOPs and bytes for all `count` kernels (µs), the search's task order. */
  estimatedUs: number | null;
  /** The default schedule's time (µs), when measured. */
  defaultUs: number | null;
  trials: number;
  /** The best so far, min(default, the kept candidate): the schedule the compilation would take (µs). */
  bestUs: number | null;
  /** The best candidate measured (µs); it may be slower than the default. */
  candidateUs: number | null;
  /** Whether a candidate beat the default and was stored; false: the default is kept; null: not known yet. */
  stored: boolean | null;
  discarded: number;
  points: CurvePoint[];
}

/** The best-so-far of a kernel: never above its default. */
function atMost(v: number | null, cap: number | null): number | null {
  if (v === null) return cap;
  return cap === null ? v : Math.min(v, cap);
}

/** Whether a kernel kept its default schedule: nothing stored, or nothing faster than the default. */
export function defaultKept(k: KernelCurve): boolean {
  return k.stored === false || (k.bestUs !== null && k.defaultUs !== null && k.bestUs >= k.defaultUs);
}

export interface TuningState {
  started?: TuneStarted;
  kernels: ReadonlyMap<string, KernelCurve>;
  trialsTotal: number;
  elapsedS: number;
  budgetS: number | null;
  finished?: TuneFinished;
}

export function initialTuning(): TuningState {
  return { kernels: new Map(), trialsTotal: 0, elapsedS: 0, budgetS: null };
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Folds one `tune.*` event (in seq order) into the tuning state. */
export function foldTune(t: TuningState, e: TuneStarted | TuneProgress | TuneFinished, type: string): TuningState {
  if (type === "tune.started") {
    const s = e as TuneStarted;
    const kernels = new Map(t.kernels);
    for (const task of s.tasks ?? []) {
      const old = kernels.get(task.kernel);
      kernels.set(task.kernel, { kernel: task.kernel, workload: task.workload, summary: task.summary, count: Math.max(1, task.kernels),
        estimatedUs: num(task.estimated_us), defaultUs: old?.defaultUs ?? null, trials: old?.trials ?? 0, bestUs: old?.bestUs ?? null,
        candidateUs: old?.candidateUs ?? null, stored: old?.stored ?? null, discarded: old?.discarded ?? 0, points: old?.points ?? [] });
    }
    return { ...t, started: s, kernels, budgetS: num(s.budget_s) };
  }
  if (type === "tune.progress") {
    const p = e as TuneProgress;
    const kernels = new Map(t.kernels);
    const old = kernels.get(p.kernel);
    const defaultUs = num(p.default_us) ?? old?.defaultUs ?? null;
    const raw = num(p.best_us);
    // A log recorded before tune.progress said `candidate_us` carried the best candidate in `best_us`,
    // which can be slower than the default: the best so far is min(default, best), and never rises.
    const best = atMost(atMost(raw, defaultUs), old?.bestUs ?? null);
    const candidate = "candidate_us" in p ? num(p.candidate_us) : raw;
    const stored = typeof p.stored === "boolean" ? p.stored : raw !== null && defaultUs !== null ? raw < defaultUs : (old?.stored ?? null);
    // a batch submitted (`measuring`): no new measurement, so no new point (its elapsed time still counts)
    const points = best === null || p.measuring !== undefined ? (old?.points ?? []) : [...(old?.points ?? []), { trials: p.trials, total: p.trials_total, bestUs: best }];
    kernels.set(p.kernel, {
      kernel: p.kernel, workload: p.workload, summary: old?.summary ?? "", count: old?.count ?? 1, estimatedUs: old?.estimatedUs ?? null, defaultUs, trials: p.trials,
      bestUs: best, candidateUs: atMost(candidate, old?.candidateUs ?? null), stored: old?.stored === true ? true : stored,
      discarded: (old?.discarded ?? 0) + (p.discarded ?? 0), points,
    });
    return { ...t, kernels, trialsTotal: Math.max(t.trialsTotal, p.trials_total), elapsedS: Math.max(t.elapsedS, num(p.elapsed_s) ?? 0),
      budgetS: num(p.budget_s) ?? t.budgetS };
  }
  if (type === "tune.finished") {
    const f = e as TuneFinished;
    const kernels = new Map(t.kernels);
    for (const k of f.tuned ?? []) {
      const old = kernels.get(k.kernel);
      if (!old) continue;
      // what the search kept: the stored candidate, or the default (then the compile keeps it too)
      const defaultUs = num(k.default_us) ?? old.defaultUs;
      const bestUs = k.stored ? atMost(atMost(num(k.best_us), defaultUs), old.bestUs) : defaultUs;
      kernels.set(k.kernel, { ...old, defaultUs, bestUs, stored: k.stored, candidateUs: "candidate_us" in k ? num(k.candidate_us) : (old.candidateUs ?? num(k.best_us)) });
    }
    return { ...t, kernels, finished: f, trialsTotal: Math.max(t.trialsTotal, f.trials), elapsedS: Math.max(t.elapsedS, num(f.duration_s) ?? 0) };
  }
  return t;
}

export interface TuningSummary {
  /** Tasks (workloads) with at least one measured candidate, of all the search's tasks. */
  tuned: number;
  total: number;
  /** Fraction (0..1) of the tunable kernels' time in the tasks tuning has measured so far, by the
   * default schedules' estimated times (FLOPs and bytes, `tune.started`); null without estimates. */
  shareTuned: number | null;
  /** Measured default kernel time over the best found, summed over the measured tasks (each kernel of
   * a task counted); null before a measurement. */
  kernelSpeedup: number | null;
  /** Those sums (µs). */
  defaultUs: number;
  bestUs: number;
}

export function tuningSummary(t: TuningState): TuningSummary {
  const all = [...t.kernels.values()];
  const est = all.filter((k) => k.estimatedUs !== null && k.estimatedUs > 0);
  const estTotal = est.reduce((s, k) => s + (k.estimatedUs ?? 0), 0);
  const estReached = est.filter((k) => k.trials > 0).reduce((s, k) => s + (k.estimatedUs ?? 0), 0);
  const measured = all.filter((k) => k.defaultUs !== null && k.defaultUs > 0);
  const defaultUs = measured.reduce((s, k) => s + (k.defaultUs ?? 0) * k.count, 0);
  const bestUs = measured.reduce((s, k) => s + Math.min(k.defaultUs ?? 0, k.bestUs ?? Infinity) * k.count, 0);
  return {
    tuned: all.filter((k) => k.trials > 0).length,
    total: all.length,
    shareTuned: estTotal > 0 ? estReached / estTotal : null,
    kernelSpeedup: defaultUs > 0 && bestUs > 0 ? defaultUs / bestUs : null,
    defaultUs,
    bestUs,
  };
}

export interface Latency {
  /** End-to-end latency (ms) after tuning: the compilation's `model.timed`, with the tuned schedules. */
  afterMs: number | null;
  /** Before: `afterMs` plus what the tuned kernels gained (their measured default minus best time,
   * every kernel of a task counted), an estimate; null until both are known. */
  beforeMs: number | null;
}

export function latency(t: TuningState, prismMs: number | null | undefined): Latency {
  const after = num(prismMs);
  if (after === null || !t.finished) return { afterMs: after, beforeMs: null };
  let gainUs = 0;
  for (const k of t.finished.tuned ?? []) {
    const d = num(k.default_us);
    const b = num(k.best_us);
    if (k.stored && d !== null && b !== null && b < d) gainUs += (d - b) * (t.kernels.get(k.kernel)?.count ?? 1);
  }
  return { afterMs: after, beforeMs: after + gainUs / 1000 };
}

/** A curve as a step line in (trials of the search, best / default) coordinates: the default (1) from
 * trial 0, a step at each batch's cumulative trial count to the best so far, flat to `upTo`. */
export function stepPoints(c: KernelCurve, upTo: number): { x: number; y: number }[] {
  const ratio = (us: number) => (c.defaultUs ? us / c.defaultUs : 1);
  const out = [{ x: 0, y: 1 }];
  for (const p of c.points) {
    const r = ratio(p.bestUs);
    const last = out[out.length - 1];
    if (p.total !== last.x || r !== last.y) out.push({ x: p.total, y: last.y });
    if (r !== last.y) out.push({ x: p.total, y: r });
  }
  const end = out[out.length - 1];
  if (upTo > end.x) out.push({ x: upTo, y: end.y });
  return out;
}

/** The kernels to draw, the most default time first, at most `n`. */
export function chartKernels(t: TuningState, n = 8): KernelCurve[] {
  return [...t.kernels.values()].filter((k) => k.points.length > 0)
    .sort((a, b) => (b.defaultUs ?? 0) - (a.defaultUs ?? 0) || a.kernel.localeCompare(b.kernel)).slice(0, n);
}

/** Where a kernel's schedule came from, for the kernels pane. */
/** "tuned": on a tuned schedule whose origin is not read yet (GET .../tuning still loading). */
export type ScheduleSource = "this run" | "database" | "tuned" | "default";

/**
 * The compile form's "Tune for" field: empty is no tuning (null), else a positive number of seconds.
 * Throws an Error naming the field (`tune_budget_s`, as the API's 400 does) for anything else.
 */
export function readTuneBudget(text: string): number | null {
  const t = text.trim();
  if (t === "") return null;
  const v = Number(t);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`tune_budget_s: must be a positive number of seconds (the tuning time budget); got ${t}`);
  return v;
}

export interface TunedShare {
  /** Kernels lowered with a tuned schedule (`kernel.lowered.schedule_source` "tuned"), of all lowered. */
  tuned: number;
  total: number;
  /** Their fraction (0..1) of the model's measured kernel time (`kernel.timed`); null before timing. */
  share: number | null;
}

/** After the compile: how much of the model runs on tuned schedules, measured. */
export function tunedShare(kernels: Iterable<{ lowered?: { schedule_source?: string }; timed?: { median_us: number } }>): TunedShare {
  let tuned = 0;
  let total = 0;
  let tunedUs = 0;
  let allUs = 0;
  for (const k of kernels) {
    if (!k.lowered) continue;
    total += 1;
    const isTuned = k.lowered.schedule_source === "tuned";
    if (isTuned) tuned += 1;
    if (k.timed) {
      allUs += k.timed.median_us;
      if (isTuned) tunedUs += k.timed.median_us;
    }
  }
  return { tuned, total, share: allUs > 0 ? tunedUs / allUs : null };
}
