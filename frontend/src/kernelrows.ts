/** The kernels table's rows, derived from the state; pure so the sort is unit-tested. */
import type { CompilationState } from "./state";

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
}

export type SortKey = "kernel" | "ops" | "us" | "us1" | "share" | "gflops" | "gbps";

export function kernelRows(state: CompilationState): KernelRow[] {
  const opOf = new Map<string, string>();
  for (const n of state.fusion?.nodes ?? []) {
    opOf.set(n.id, n.op_type);
    opOf.set(n.name, n.op_type);
  }
  const groupByKernel = new Map((state.fusion?.groups ?? []).map((g) => [g.kernel, g]));
  const groupById = new Map((state.fusion?.groups ?? []).map((g) => [g.id, g]));
  const names = new Set<string>([...groupByKernel.keys(), ...state.kernels.keys()]);
  const total = [...state.kernels.values()].reduce((s, k) => s + (k.timed?.median_us ?? 0), 0);
  return [...names].map((name) => {
    const k = state.kernels.get(name);
    const g = groupByKernel.get(name) ?? (k?.group ? groupById.get(k.group) : undefined);
    const us = k?.timed?.median_us ?? null;
    return {
      kernel: name,
      ops: (g?.nodes ?? []).map((n) => opOf.get(n) ?? "?"),
      kind: g?.kind ?? "",
      us,
      us1: k?.timed?.median_us_1t ?? null,
      threads: k?.timed?.threads ?? null,
      share: us !== null && total > 0 ? us / total : null,
      gflops: k?.timed?.gflops ?? null,
      gbps: k?.timed?.gbps ?? null,
      status: k?.timed ? "timed" : k?.compiled ? "compiled" : k?.lowered ? "lowered" : "grouped",
    };
  });
}

/** Sorts rows by a column; missing numbers go last in either direction. */
export function sortRows(rows: KernelRow[], key: SortKey, descending: boolean): KernelRow[] {
  const val = (r: KernelRow): string | number | null => (key === "kernel" ? r.kernel : key === "ops" ? r.ops.length : r[key]);
  return [...rows].sort((a, b) => {
    const x = val(a);
    const y = val(b);
    if (x === null && y === null) return a.kernel.localeCompare(b.kernel);
    if (x === null) return 1;
    if (y === null) return -1;
    const c = typeof x === "string" && typeof y === "string" ? x.localeCompare(y, undefined, { numeric: true }) : (x as number) - (y as number);
    return (descending ? -c : c) || a.kernel.localeCompare(b.kernel);
  });
}
