/** Number formatting for the panes: units as DESIGN.md gives them (ms, µs, bytes, GFLOP/s). */
import type { Dim } from "./events";

export function fmtMs(ms: number | null | undefined): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms)) return "–";
  if (ms < 1) return `${(ms * 1000).toFixed(ms < 0.01 ? 2 : 0)} µs`; // a tiny model's 0.21 µs is not "0 µs"
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

export function fmtUs(us: number | undefined): string {
  if (us === undefined || !Number.isFinite(us)) return "–";
  return us < 1000 ? `${us.toFixed(us < 10 ? 2 : 1)} µs` : fmtMs(us / 1000);
}

export function fmtBytes(b: number | undefined): string {
  if (b === undefined || !Number.isFinite(b)) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let v = b;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function fmtNum(x: number | null | undefined, digits = 2): string {
  if (x === undefined || x === null || !Number.isFinite(x)) return "–";
  return x.toFixed(digits);
}

export function fmtSci(x: number | null | undefined): string {
  if (x === undefined || x === null || !Number.isFinite(x)) return "–";
  return x === 0 ? "0" : x.toExponential(2);
}

/** `word` or its plural for a count of `n`: plural(1, "node") = "node", plural(0, "node") = "nodes". */
export function plural(n: number, word: string, many = `${word}s`): string {
  return n === 1 ? word : many;
}

/** A count and its noun: count(1, "kernel") = "1 kernel", count(3, "kernel") = "3 kernels". */
export function count(n: number, word: string, many?: string): string {
  return `${n} ${plural(n, word, many)}`;
}

export function fmtShape(shape: Dim[] | null | undefined): string {
  if (!shape) return "?";
  return `[${shape.map((d) => (d === null ? "?" : String(d))).join(", ")}]`;
}
