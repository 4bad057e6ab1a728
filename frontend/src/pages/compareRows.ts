/**
 * The compare page's overview rows (`/compare/<a>...<b>`), one string per cell, from the two
 * sides' reduced states. The accuracy row says match, differ or "not verified (<reason>)"
 * (verdict.ts), never "differ" for a run that did not verify; storage types and the compiler's
 * notes (storage and verification) have rows of their own.
 */
import type { Compilation } from "../api";
import { fmtBytes, fmtMs, fmtNum, fmtUs } from "../format";
import type { CompilationState } from "../state";
import { shortVerdict, storageKinds, storageNotes } from "../verdict";

/** What the overview reads of one side. */
export interface CompareSide {
  state: CompilationState;
  meta: Compilation | null;
  missing: boolean;
}

export type Row = [label: string, a: string, b: string, ratio?: string];

export function ratio(a: number | null | undefined, b: number | null | undefined): string {
  return a !== undefined && a !== null && b !== undefined && b !== null && a > 0 ? `${fmtNum(b / a)}×` : "";
}

function status(s: CompareSide): string {
  if (s.missing) return "not found";
  return s.state.failed ? `failed (${s.state.failed.stage})` : s.state.finished ? "succeeded" : s.state.nextSeq > 0 ? "running" : (s.meta?.status ?? "loading");
}

export function overview(a: CompareSide, b: CompareSide): Row[] {
  const A = a.state;
  const B = b.state;
  const lastStats = (s: CompilationState) => s.passes[s.passes.length - 1]?.stats;
  const kernelUs = (s: CompilationState) => [...s.kernels.values()].reduce((t, k) => t + (k.timed?.median_us ?? 0), 0);
  const notes = (s: CompilationState) => [...storageNotes(s.started?.model.storage), ...(s.verification?.notes ?? [])].join(" · ") || "–";
  return [
    ["model", A.started?.model.name ?? "–", B.started?.model.name ?? "–"],
    ["target", A.started?.target ?? a.meta?.target ?? "–", B.started?.target ?? b.meta?.target ?? "–"],
    ["pipeline", String(a.meta?.requested_pipeline ?? a.meta?.pipeline ?? "–"), String(b.meta?.requested_pipeline ?? b.meta?.pipeline ?? "–")],
    ["status", status(a), status(b)],
    ["Prism latency", fmtMs(A.timing?.prism_ms), fmtMs(B.timing?.prism_ms), ratio(A.timing?.prism_ms, B.timing?.prism_ms)],
    ["ONNX Runtime latency", fmtMs(A.timing?.onnxruntime_ms), fmtMs(B.timing?.onnxruntime_ms), ratio(A.timing?.onnxruntime_ms, B.timing?.onnxruntime_ms)],
    ["Prism / ONNX Runtime", A.timing?.ratio != null ? `${fmtNum(A.timing.ratio)}×` : "–", B.timing?.ratio != null ? `${fmtNum(B.timing.ratio)}×` : "–"],
    ["accuracy", shortVerdict(A.verification), shortVerdict(B.verification)],
    ["storage", storageKinds(A.started?.model.storage), storageKinds(B.started?.model.storage)],
    ["notes", notes(A), notes(B)],
    ["sum of kernel times", A.kernels.size ? fmtUs(kernelUs(A)) : "–", B.kernels.size ? fmtUs(kernelUs(B)) : "–", ratio(kernelUs(A) || undefined, kernelUs(B) || undefined)],
    ["compile time", fmtMs(A.finished?.duration_ms), fmtMs(B.finished?.duration_ms), ratio(A.finished?.duration_ms, B.finished?.duration_ms)],
    ["passes", String(A.passes.length), String(B.passes.length)],
    ["nodes after the passes", String(lastStats(A)?.nodes ?? "–"), String(lastStats(B)?.nodes ?? "–")],
    ["fused groups / kernels", `${A.fusion?.groups.length ?? "–"} / ${A.kernels.size}`, `${B.fusion?.groups.length ?? "–"} / ${B.kernels.size}`],
    ["arena (no sharing)", A.memory ? `${fmtBytes(A.memory.arena_bytes)} (${fmtBytes(A.memory.no_sharing_bytes)})` : "–", B.memory ? `${fmtBytes(B.memory.arena_bytes)} (${fmtBytes(B.memory.no_sharing_bytes)})` : "–", ratio(A.memory?.arena_bytes, B.memory?.arena_bytes)],
  ];
}

/** The kernel that computes each node of a side (from its fusion graph) and that kernel's time in µs. */
function nodeTimes(s: CompilationState): Map<string, { kernel: string; us: number | undefined }> {
  const out = new Map<string, { kernel: string; us: number | undefined }>();
  for (const g of s.fusion?.groups ?? []) for (const id of g.nodes) out.set(id, { kernel: g.kernel, us: s.kernels.get(g.kernel)?.timed?.median_us });
  return out;
}

/**
 * Layer by layer for an FP32 and a quantized compilation of one model (either side may be the quantized
 * one): per layer of the quantization report, its precision on each side, its SQNR, the time of the kernel
 * computing it on each side and the time saved (A - B). Null when neither side has a model.accuracy.
 */
export function layerAlign(a: CompareSide, b: CompareSide): string[][] | null {
  const acc = b.state.accuracy ?? a.state.accuracy;
  if (!acc) return null;
  const ta = nodeTimes(a.state);
  const tb = nodeTimes(b.state);
  const prec = (s: CompareSide, node: string) => s.state.accuracy?.layers.find((l) => l.node === node)?.precision ?? (s.state.accuracy ? "–" : "fp32");
  return acc.layers.map((l) => {
    const x = ta.get(l.node)?.us;
    const y = tb.get(l.node)?.us;
    const saved = x !== undefined && y !== undefined ? fmtUs(x - y) : "–";
    return [l.node, prec(a, l.node), prec(b, l.node), l.sqnr_db === null ? "–" : l.sqnr_db >= 999 ? "equal" : `${l.sqnr_db.toFixed(1)} dB`, fmtUs(x), fmtUs(y), saved];
  });
}

/**
 * The pass-by-pass rows' pairing: each side's passes matched by name and occurrence (the second
 * `fuse-ops` of A with the second of B) in the longest order both share, a pass on one side only
 * paired with nothing (null), in pipeline order. Index pairs into `a` and `b`.
 */
export function passAlign(a: string[], b: string[]): [number | null, number | null][] {
  const keys = (names: string[]) => {
    const seen = new Map<string, number>();
    return names.map((n) => {
      const k = (seen.get(n) ?? 0) + 1;
      seen.set(n, k);
      return `${n}#${k}`;
    });
  };
  const ka = keys(a);
  const kb = keys(b);
  // lcs[i][j]: the longest common subsequence of ka[i..] and kb[j..]
  const lcs = Array.from({ length: ka.length + 1 }, () => new Array<number>(kb.length + 1).fill(0));
  for (let i = ka.length - 1; i >= 0; i--)
    for (let j = kb.length - 1; j >= 0; j--)
      lcs[i][j] = ka[i] === kb[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out: [number | null, number | null][] = [];
  let i = 0;
  let j = 0;
  while (i < ka.length || j < kb.length) {
    if (i < ka.length && j < kb.length && ka[i] === kb[j]) out.push([i++, j++]);
    else if (j >= kb.length || (i < ka.length && lcs[i + 1][j] >= lcs[i][j + 1])) out.push([i++, null]);
    else out.push([null, j++]);
  }
  return out;
}
