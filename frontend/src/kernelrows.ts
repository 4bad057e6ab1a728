/** The kernels table's rows, derived from the state; pure so the sort is unit-tested. */
import type { TuningInfo } from "./api";
import type { CompilationState, KernelState } from "./state";
import type { ScheduleSource } from "./tuning";

export interface KernelRow {
  kernel: string;
  /** Op types of the group's nodes, in order, e.g. ["Conv", "Add", "Relu"]. */
  ops: string[];
  kind: string;
  us: number | null;
  /** The kernel's time at 1 thread (µs), when it was timed at more; null otherwise. */
  us1: number | null;
  /** The threads `us` was measured at; null when not timed or not said. */
  threads: number | null;
  /** Fraction of the sum of all timed kernels, 0..1. */
  share: number | null;
  gflops: number | null;
  gbps: number | null;
  status: "lowered" | "compiled" | "timed" | "grouped";
  /** Where its schedule came from: found by this compilation's tuning, by an earlier one (the tuning
   * database), or the rule-based default; null before it is lowered. */
  source: ScheduleSource | null;
  /** The tuning record's words for a tooltip ("found by compilation k3x9q2ab (alice), 98.7 µs vs 123 µs default"). */
  sourceNote: string;
  /** Execution order: the order its kernel.lowered came in (the program's kernel order), else, not
   * lowered yet, its fused group's place in graph.fused (graph order) after every lowered kernel. */
  order: number;
}

export type SortKey = "kernel" | "ops" | "us" | "us1" | "share" | "gflops" | "gbps" | "source";

/** A lowered kernel's schedule source (`kernel.lowered.schedule_source`, the record by its workload). */
export function scheduleSource(lowered: KernelState["lowered"], tuning?: TuningInfo | null): { source: ScheduleSource | null; note: string } {
  if (!lowered) return { source: null, note: "" };
  if (lowered.schedule_source !== "tuned" || !lowered.tuned) return { source: "default", note: "the rule-based default schedule" };
  const t = lowered.tuned;
  const times = `${t.median_us.toFixed(1)} µs tuned vs ${t.default_us.toFixed(1)} µs default when recorded`;
  // before GET .../tuning answers, the origin is unknown: "database" then was a guess (wrong for this run's)
  if (!tuning) return { source: "tuned", note: `a tuned schedule (${times}); where it came from is loading` };
  const rec = tuning.records?.[t.workload];
  if (!rec) return { source: "database", note: `from the tuning database (${times})` };
  const who = rec.source === "this run" ? "found by this compilation's tuning" :
    rec.found_in ? `found by compilation ${rec.found_in}${rec.found_by ? ` (${rec.found_by.username})` : ""}` : "found by a compilation you cannot see";
  return { source: rec.source, note: `${who}, ${rec.trials} trials; ${times}` };
}

export function kernelRows(state: CompilationState, tuning?: TuningInfo | null): KernelRow[] {
  const opOf = new Map<string, string>();
  for (const n of state.fusion?.nodes ?? []) {
    opOf.set(n.id, n.op_type);
    opOf.set(n.name, n.op_type);
  }
  const groupByKernel = new Map((state.fusion?.groups ?? []).map((g) => [g.kernel, g]));
  const groupById = new Map((state.fusion?.groups ?? []).map((g) => [g.id, g]));
  const names = new Set<string>([...groupByKernel.keys(), ...state.kernels.keys()]);
  const total = [...state.kernels.values()].reduce((s, k) => s + (k.timed?.median_us ?? 0), 0);
  const lowered = new Map([...state.kernels.values()].filter((k) => k.lowered).map((k, i) => [k.name, i]));
  const grouped = new Map([...groupByKernel.keys()].map((name, i) => [name, lowered.size + i]));
  return [...names].map((name, at) => {
    const k = state.kernels.get(name);
    const g = groupByKernel.get(name) ?? (k?.group ? groupById.get(k.group) : undefined);
    const us = k?.timed?.median_us ?? null;
    const src = scheduleSource(k?.lowered, tuning);
    return {
      kernel: name,
      // the fused group's ops; without fusion (O0/O1: no graph.fused) the kernel's own (kernel.lowered.ops)
      ops: g ? g.nodes.map((n) => opOf.get(n) ?? "?") : [...(k?.lowered?.ops ?? [])],
      kind: g?.kind ?? "",
      us,
      us1: k?.timed?.median_us_1t ?? null,
      threads: k?.timed?.threads ?? null,
      share: us !== null && total > 0 ? us / total : null,
      gflops: k?.timed?.gflops ?? null,
      gbps: k?.timed?.gbps ?? null,
      status: k?.timed ? "timed" : k?.compiled ? "compiled" : k?.lowered ? "lowered" : "grouped",
      source: src.source,
      sourceNote: src.note,
      order: lowered.get(name) ?? grouped.get(name) ?? lowered.size + grouped.size + at,
    };
  });
}

/** Execution order, then the name in natural order (relu_2 before relu_10). */
function byOrder(a: KernelRow, b: KernelRow): number {
  return a.order - b.order || a.kernel.localeCompare(b.kernel, undefined, { numeric: true });
}

/** Sorts rows by a column; missing numbers go last in either direction; ties (every row before the
 * timings arrive) in execution order. */
export function sortRows(rows: KernelRow[], key: SortKey, descending: boolean): KernelRow[] {
  const val = (r: KernelRow): string | number | null => (key === "kernel" ? r.kernel : key === "ops" ? r.ops.length : r[key]);
  return [...rows].sort((a, b) => {
    const x = val(a);
    const y = val(b);
    if (x === null && y === null) return byOrder(a, b);
    if (x === null) return 1;
    if (y === null) return -1;
    const c = typeof x === "string" && typeof y === "string" ? x.localeCompare(y, undefined, { numeric: true }) : (x as number) - (y as number);
    return (descending ? -c : c) || byOrder(a, b);
  });
}
