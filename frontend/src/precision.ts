/**
 * Precision as a reviewable decision: each node's precision and SQNR (from the fused graph's op types
 * and the quantize pass's model.accuracy report), the colour of an SQNR on the graph's heat map, the
 * layer table's rows and their sort, and the pipeline text that recompiles with one layer kept in FP32.
 */
import type { FusedNode, GraphFused, ModelAccuracy } from "./events";
import { entryOf, splitPipeline, topLevelParts } from "./pipeline";

export type Precision = "int8" | "bf16" | "fp16" | "fp32" | "convert";
/** The reduced precisions of the quantize pass: layers with an SQNR on the heat map (int8 from its ops). */
export const REDUCED: ReadonlySet<string> = new Set(["int8", "bf16", "fp16"]);

const INT8_OPS = new Set(["QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "ConvInteger", "MatMulInteger", "QLinearLookup"]);
const CONVERT_OPS = new Set(["QuantizeLinear", "DequantizeLinear"]);

/** A node's precision from its op: an integer op is int8, a Q/DQ converts, anything else computes in fp32. */
export function opPrecision(opType: string): Precision {
  if (INT8_OPS.has(opType)) return "int8";
  if (CONVERT_OPS.has(opType)) return "convert";
  return "fp32";
}

/** SQNR bands of the heat map and the legend (dB, lower bound inclusive), best first. */
export const SQNR_BANDS: readonly { min: number; colour: string; label: string }[] = [
  { min: 40, colour: "#1a9850", label: "≥ 40 dB" },
  { min: 30, colour: "#91cf60", label: "30–40 dB" },
  { min: 20, colour: "#fee08b", label: "20–30 dB" },
  { min: 10, colour: "#fc8d59", label: "10–20 dB" },
  { min: -Infinity, colour: "#d73027", label: "< 10 dB" },
];
export const FP32_COLOUR = "#ffffff";
export const INT8_UNMEASURED = "#c6dbef";
export const CONVERT_COLOUR = "#eeeeee";

export function sqnrColour(db: number | null | undefined): string {
  if (db === null || db === undefined || Number.isNaN(db)) return INT8_UNMEASURED;
  return (SQNR_BANDS.find((b) => db >= b.min) ?? SQNR_BANDS[SQNR_BANDS.length - 1]).colour;
}

export interface NodePrecision {
  precision: Precision;
  sqnr_db: number | null;
  colour: string;
}

/** Every fused-graph node's precision and colour; a layer the report kept in fp32 is fp32, one it computed
 * in bf16/fp16 (a Conv/MatMul/Gemm on rounded operands: same op type) has that precision. */
export function nodePrecisions(nodes: Iterable<FusedNode>, acc: ModelAccuracy | undefined): Map<string, NodePrecision> {
  const byNode = new Map((acc?.layers ?? []).map((l) => [l.node, l]));
  const out = new Map<string, NodePrecision>();
  for (const n of nodes) {
    const layer = byNode.get(n.name) ?? byNode.get(n.id);
    let p = opPrecision(n.op_type);
    if (layer?.precision === "fp32") p = "fp32";
    else if (layer?.precision === "bf16" || layer?.precision === "fp16") p = layer.precision;
    const db = REDUCED.has(p) ? layer?.sqnr_db ?? null : null;
    out.set(n.id, { precision: p, sqnr_db: db, colour: REDUCED.has(p) ? sqnrColour(db) : p === "convert" ? CONVERT_COLOUR : FP32_COLOUR });
  }
  return out;
}

export interface LayerRow {
  node: string;
  op: string;
  precision: string;
  sqnr_db: number | null;
  max_abs_error: number | null;
  /** The measured time of the layer's kernel in µs, where known. */
  kernel: string | null;
  time_us: number | null;
}

/** The layer table: one row per layer of the report, with its kernel and measured time where known. */
export function layerRows(acc: ModelAccuracy, fusion?: GraphFused, kernelUs?: Map<string, number>): LayerRow[] {
  const groupOf = new Map<string, string>();
  for (const g of fusion?.groups ?? []) for (const id of g.nodes) groupOf.set(id, g.kernel);
  return acc.layers.map((l) => {
    const kernel = groupOf.get(l.node) ?? null;
    return { node: l.node, op: l.op ?? "", precision: l.precision, sqnr_db: l.sqnr_db, max_abs_error: l.max_abs_error, kernel, time_us: kernel ? kernelUs?.get(kernel) ?? null : null };
  });
}

export type SortKey = "node" | "sqnr_db" | "max_abs_error" | "time_us";

/** Rows sorted by ``key`` (``asc``: worst SQNR first, smallest error first); missing values last. */
export function sortRows(rows: LayerRow[], key: SortKey, asc: boolean): LayerRow[] {
  const dir = asc ? 1 : -1;
  return [...rows].sort((a, b) => {
    const x = a[key];
    const y = b[key];
    if (x === null && y === null) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    if (typeof x === "string" || typeof y === "string") return dir * String(x).localeCompare(String(y));
    return dir * (x - y);
  });
}

/**
 * The pipeline text that recompiles with ``node`` kept in FP32: its name added to the quantize pass's
 * ``exclude`` (``;``-separated). Returns null when the pipeline has no quantize pass, or the name holds a
 * character the option syntax cannot carry (space, comma, ``;``, braces).
 */
export function excludePipeline(pipeline: string, node: string): string | null {
  if (!node || /[\s,;{}=()]/.test(node)) return null;
  // Only the top-level quantize entry is rewritten; every other part (a fixed-point(...) group
  // included) is kept as written, so the recompilation runs the same pipeline.
  const parts = topLevelParts(pipeline);
  const q = parts.findIndex((p) => !p.includes("(") && entryOf(p).name === "quantize");
  if (q < 0) return null;
  const opts = entryOf(parts[q]).options.split(/[\s,]+/).filter((x) => x);
  const i = opts.findIndex((o) => o.startsWith("exclude="));
  if (i < 0) opts.push(`exclude=${node}`);
  else {
    const names = opts[i].slice("exclude=".length).split(";").filter((x) => x);
    if (names.includes(node)) return null;
    opts[i] = `exclude=${[...names, node].join(";")}`;
  }
  parts[q] = `quantize{${opts.join(" ")}}`;
  return parts.join(",");
}

/** The compile form's precision choices: fp32 leaves the pipeline as written. */
export const FORM_PRECISIONS = ["fp32", "int8", "bf16", "fp16"] as const;

/**
 * The pipeline text for the compile form's precision field: ``pipeline`` itself for fp32, else with
 * ``quantize{dtype=<precision>}`` appended (the pass places itself right before fuse-ops). Throws an
 * Error naming the problem for a precision not in {@link FORM_PRECISIONS}, or a pipeline that already
 * has a quantize pass (its own dtype option decides then).
 */
export function precisionPipeline(pipeline: string, precision: string): string {
  if (!(FORM_PRECISIONS as readonly string[]).includes(precision)) throw new Error(`precision ${precision} is not one of ${FORM_PRECISIONS.join(", ")}`);
  if (precision === "fp32") return pipeline;
  if (splitPipeline(pipeline).some((e) => e.name === "quantize")) throw new Error(`the pipeline already has a quantize pass: set its dtype there, or choose precision fp32`);
  const base = pipeline.trim();
  return `${base ? `${base},` : ""}quantize{dtype=${precision}}`;
}

/** "39.3 dB", "equal" (999: no noise), or "–". */
export function fmtDb(db: number | null | undefined): string {
  if (db === null || db === undefined) return "–";
  if (db >= 999) return "equal";
  return `${db.toFixed(1)} dB`;
}
