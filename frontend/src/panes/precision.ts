/**
 * The precision card of the summary (a quantized compilation: model.accuracy): the accuracy this
 * precision costs against FP32 beside the time it buys, the criterion, the fallbacks, and the layer
 * table (sortable by SQNR, error and kernel time) with one click per layer to recompile it in FP32.
 */
import { api } from "../api";
import { h, replace } from "../dom";
import type { ModelAccuracy, ModelTimed } from "../events";
import { fmtMs, fmtNum, fmtSci, fmtUs } from "../format";
import { excludePipeline, fmtDb, layerRows, type LayerRow, REDUCED, sortRows, type SortKey, sqnrColour } from "../precision";
import { navigate } from "../router";
import type { PaneContext } from "./types";

const COLUMNS: readonly [SortKey | null, string][] = [["node", "layer"], [null, "op"], [null, "precision"], ["sqnr_db", "SQNR"], ["max_abs_error", "max abs error"], ["time_us", "kernel time"], [null, ""]];

/** "0.65× ORT FP32 · 0.74× ORT INT8" for a quantized compilation's timing. */
export function speedLine(t: ModelTimed | undefined): string {
  if (!t) return "no timing yet";
  const parts = [`Prism ${t.precision ?? ""} ${fmtMs(t.prism_ms)}`.replace("  ", " ")];
  if (t.ratio !== null && t.ratio !== undefined) parts.push(`${fmtNum(t.ratio)}× ONNX Runtime FP32 (${fmtMs(t.onnxruntime_ms ?? null)})`);
  if (t.ratio_int8 !== null && t.ratio_int8 !== undefined) parts.push(`${fmtNum(t.ratio_int8)}× ONNX Runtime INT8 (${fmtMs(t.onnxruntime_int8_ms ?? null)})`);
  return parts.join(" · ");
}

async function recompile(ctx: PaneContext, row: LayerRow, button: HTMLButtonElement): Promise<void> {
  const meta = ctx.meta;
  const pipeline = meta ? excludePipeline(meta.pipeline, row.node) : null;
  if (!meta || !pipeline || !meta.model.id) return;
  button.disabled = true;
  button.textContent = "recompiling…";
  try {
    const options = (meta.options as Record<string, unknown> | undefined) ?? undefined;
    const r = await api.compile({ model: String(meta.model.id), target: meta.target, pipeline, input_shapes: meta.input_shapes, options });
    navigate({ page: "compilation", id: r.id, view: "summary" });
  } catch (e) {
    button.disabled = false;
    button.textContent = `failed: ${(e as Error).message}`;
  }
}

export function precisionCard(ctx: PaneContext, acc: ModelAccuracy): HTMLElement {
  const kernelUs = new Map<string, number>();
  for (const k of ctx.state.kernels.values()) if (k.timed) kernelUs.set(k.name, k.timed.median_us);
  const rows = layerRows(acc, ctx.state.fusion, kernelUs);
  let key: SortKey = "sqnr_db";
  let asc = true;
  const tbody = h("tbody");
  const head = h("tr");
  const draw = () => {
    replace(head, ...COLUMNS.map(([k, label]) => h("th", { class: k && k !== "node" ? "num" : undefined },
      k ? h("button", { class: `sort${k === key ? " active" : ""}`, "data-sort": k, onclick: () => { asc = k === key ? !asc : true; key = k; draw(); } }, label, k === key ? (asc ? " ▲" : " ▼") : "") : label)));
    replace(tbody, ...sortRows(rows, key, asc).map((r) => {
      const excl = ctx.meta ? excludePipeline(ctx.meta.pipeline, r.node) : null;
      const btn = h("button", { class: "btn keep-fp32", title: excl ? `recompile with ${r.node} in FP32` : "not possible for this layer" }, "keep in FP32") as HTMLButtonElement;
      if (!excl || !REDUCED.has(r.precision)) btn.disabled = true;
      btn.addEventListener("click", () => void recompile(ctx, r, btn));
      return h("tr", { "data-node": r.node, class: `layer-${r.precision}` },
        h("td", null, h("code", null, r.node)), h("td", null, r.op), h("td", null, r.precision),
        h("td", { class: "num sqnr", style: { background: REDUCED.has(r.precision) ? sqnrColour(r.sqnr_db) : "" } }, fmtDb(r.sqnr_db)),
        h("td", { class: "num" }, r.max_abs_error === null ? "–" : fmtSci(r.max_abs_error)),
        h("td", { class: "num" }, r.time_us === null ? "–" : fmtUs(r.time_us)),
        h("td", null, REDUCED.has(r.precision) ? btn : null));
    }));
  };
  draw();
  const c = acc.criterion;
  const outs = Object.entries(acc.outputs);
  return h("div", { class: "card card-wide precision", "aria-label": "Precision" },
    h("h3", null, `Precision: ${acc.dtype.toUpperCase()} against FP32`),
    h("p", { class: `verdict ${c.passed ? "ok" : "bad"}` }, c.passed
      ? `criterion met: every output ≥ ${fmtNum(c.min_sqnr_db)} dB SQNR, top-1 ≥ ${fmtNum(100 * c.min_top1)}% where it applies`
      : `criterion FAILED: ${c.reasons.join("; ")}`),
    h("p", { class: "speed" }, speedLine(ctx.state.timing)),
    h("p", { class: "muted" }, acc.dtype === "int8"
      ? `calibration ${acc.calibration.method} on ${acc.calibration.samples} ${acc.calibration.random ? "seeded random inputs (ranges mean little)" : "samples"}; activations ${acc.calibration.activation}, weights int8 ${acc.calibration.per_channel ? "per channel" : "per tensor"}`
      : `measured on ${acc.calibration.samples} ${acc.calibration.random ? "seeded random inputs (the figures mean little)" : "samples"}; activations and weights rounded to ${acc.dtype}, float32 accumulation`),
    h("table", { class: "grid accuracy-outputs" },
      h("thead", null, h("tr", null, ...["output", "SQNR", "max abs", "max rel", "top-1", "top-5"].map((x, i) => h("th", { class: i ? "num" : undefined }, x)))),
      h("tbody", null, ...outs.map(([name, o]) => h("tr", null, h("td", null, h("code", null, name)), h("td", { class: "num" }, fmtDb(o.sqnr_db)),
        h("td", { class: "num" }, fmtSci(o.max_abs_error)), h("td", { class: "num" }, fmtSci(o.max_rel_error)),
        h("td", { class: "num" }, o.top1 === undefined ? "–" : `${fmtNum(100 * o.top1)}%`), h("td", { class: "num" }, o.top5 === undefined ? "–" : `${fmtNum(100 * o.top5)}%`))))),
    acc.fallbacks.length ? h("ul", { class: "fallbacks" }, ...acc.fallbacks.map((f) => h("li", null, `${f.node} back to FP32 (SQNR ${f.input_sqnr_db === undefined || f.input_sqnr_db === null ? "" : `${fmtDb(f.input_sqnr_db)} → `}${fmtDb(f.layer_sqnr_db)} across it): worst output ${fmtDb(f.output_sqnr_db_before)} → ${fmtDb(f.output_sqnr_db_after)}`))) : null,
    h("div", { class: "table-scroll" }, h("table", { class: "grid layers" }, h("thead", null, head), tbody)),
    h("p", { class: "muted" }, acc.method));
}
