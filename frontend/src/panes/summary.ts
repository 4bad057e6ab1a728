/**
 * Summary: the model (with its storage types), latency against ONNX Runtime, the accuracy verdict
 * (match, differ, or not verified with the reason: verdict.ts), for a quantized compilation the
 * precision card (accuracy against FP32 beside the speed: panes/precision.ts), compile time per
 * stage, memory.
 */
import { STAGES, type Dim, type DimRangePlan, type ModelTimed, type ModelVerified, type StorageSummary, type TensorInfo } from "../events";
import { h, replace } from "../dom";
import { count, fmtBytes, fmtMs, fmtNum, fmtSci, fmtShape } from "../format";
import { splitPipeline } from "../pipeline";
import { boundShapes } from "../shapes";
import type { CompilationState } from "../state";
import { describeVerification, outputRows, storageLines, storageNotes } from "../verdict";
import { downloadPhase, downloadsCard } from "./downloads";
import { precisionCard } from "./precision";
import type { Pane, PaneContext } from "./types";

function card(title: string, ...body: (Node | string | null)[]): HTMLElement {
  return h("div", { class: "card" }, h("h3", null, title), ...body);
}

/** A card as wide as the summary when it holds a table (the per-output accuracy), so the table's columns fit. */
function wide(c: HTMLElement): HTMLElement {
  if (c.querySelector("table")) c.classList.add("card-wide");
  return c;
}

/** "Waiting for the model timing…" while running; once ended, "No model timing: …" with why. */
function pending(state: CompilationState, what: string): HTMLElement {
  if (!(state.finished || state.failed)) return h("p", { class: "muted" }, `Waiting for the ${what}…`);
  const why = state.failed ? (state.started ? ` (the compilation failed during ${state.failed.stage})` : " (the compilation failed before the compiler read the model)") : "";
  return h("p", { class: "muted" }, `No ${what} in this compilation${why}.`);
}

function bar(label: string, value: number, max: number, text: string, cls = ""): HTMLElement {
  return h("div", { class: `hbar ${cls}` }, h("span", { class: "hbar-label" }, label), h("span", { class: "hbar-track" }, h("span", { class: "hbar-fill", style: { width: `${max > 0 ? (100 * value) / max : 0}%` } })), h("span", { class: "hbar-value" }, text));
}

/** The storage types of a model with narrow element types, and the compiler's notes on them. */
function storageBlock(storage: StorageSummary | undefined): HTMLElement | null {
  const lines = storageLines(storage);
  const notes = storageNotes(storage);
  if (!lines.length && !notes.length) return null;
  return h("div", { class: "storage" },
    ...lines.map((l) => h("p", { class: "storage-line" }, "Storage: ", l)),
    notes.length ? h("ul", { class: "notes muted" }, ...notes.map((n) => h("li", null, n))) : null);
}

function latency(t: ModelTimed): HTMLElement {
  const ort = t.onnxruntime_ms;
  if (ort === null || ort === undefined || t.ratio === null || t.ratio === undefined) {
    return h("div", null,
      bar("Prism", t.prism_ms, t.prism_ms, fmtMs(t.prism_ms), "prism"),
      h("p", { class: "muted" }, `median of ${t.repeats} runs; ONNX Runtime did not run this model, so there is no comparison`));
  }
  const i8 = t.onnxruntime_int8_ms ?? null;
  const max = Math.max(t.prism_ms, ort, i8 ?? 0);
  const prec = t.precision ? ` ${t.precision.toUpperCase()}` : "";
  return h("div", null,
    h("p", { class: "big" }, `${fmtNum(t.ratio)}×`, h("span", { class: "muted" }, t.ratio <= 1 ? ` of ONNX Runtime's time${prec ? " (FP32)" : ""} (Prism faster)` : ` of ONNX Runtime's time${prec ? " (FP32)" : ""} (Prism slower)`)),
    bar(`Prism${prec}`, t.prism_ms, max, fmtMs(t.prism_ms), "prism"),
    bar(prec ? "ONNX Runtime FP32" : "ONNX Runtime", ort, max, fmtMs(ort), "ort"),
    i8 !== null ? bar("ONNX Runtime INT8", i8, max, fmtMs(i8), "ort ort-int8") : null,
    h("p", { class: "muted" }, `median of ${t.repeats} runs`));
}

/**
 * The model's inputs and outputs with the shapes this compilation bound them to (numbers), and,
 * where the model declares them otherwise (symbolic dims, or an output's formula of them), the
 * declaration in a muted line cut to the card's width (whole in its title); an input bound to a
 * value (compile.started `input_values`) says so.
 */
/**
 * The lines that say how a dim-range artifact serves each ranged dim, read from the compilation's own
 * remark (the `memory.planned` event's `dim_range`: mode and message), and the size of each ranged dim
 * whose compilation the passes and kernels show (`shownAt`). Without the remark (not planned yet, or
 * failed before) only the range is stated.
 */
export function dimRangeLines(ranges: Record<string, [number, number]>, plan: DimRangePlan | undefined): { lines: string[]; detail: string | null; shownAt: Record<string, number> } {
  const lines: string[] = [];
  const shownAt: Record<string, number> = {};
  for (const [d, [lo, hi]] of Object.entries(ranges)) {
    const head = `One artifact for ${d} = ${lo}..${hi}`;
    if (plan?.dim === d && plan.mode === "run-time") {
      // compiler.driver.batch: the kernels of the N = 1 compilation, N a run-time argument of the entry function
      shownAt[d] = 1;
      lines.push(`${head}: one set of kernels compiled for ${d} = 1 serves every size, ${d} a run-time loop bound; the passes and kernels shown are ${d} = 1's, the memory ${d} = ${hi}'s`);
    } else if ((plan?.dim === d && plan.mode === "specialized") || (plan && plan.dim !== d && plan.message.startsWith(`${d}=${lo}..${hi} specialized`))) {
      shownAt[d] = hi;
      lines.push(`${head}: each size of ${d} compiled and specialized; the passes, kernels and memory shown are ${d} = ${hi}'s`);
    } else {
      lines.push(plan ? head : `${head} (how the range is served is known once memory is planned)`);
    }
  }
  return { lines, detail: plan?.message ?? null, shownAt };
}

/**
 * A bound shape with each axis that stands for a ranged dim written as the dim's name: the axis is
 * declared with that name, or declared symbolic and bound to the one ranged dim's shown size (an
 * output's shape inferred from the input's). `[1, 16, 1, 1]` declared `[N, 16, 1, 1]` reads `[N, 16, 1, 1]`.
 */
export function rangedShape(bound: Dim[], declared: Dim[] | null, shownAt: Record<string, number>): Dim[] {
  const names = Object.keys(shownAt);
  return bound.map((b, i) => {
    const d = declared?.[i];
    if (typeof d === "string" && d in shownAt) return d;
    if (d === undefined || typeof d === "number") return b;
    const at = names.filter((n) => shownAt[n] === b);
    return at.length === 1 ? at[0] : b;
  });
}

function ioTable(inputs: TensorInfo[], outputs: TensorInfo[], bound: Record<string, number[]>, values: Record<string, unknown[]> = {}, shownAt: Record<string, number> = {}): HTMLElement {
  const row = (role: string, t: TensorInfo) => {
    const declared = fmtShape(t.shape);
    const b = bound[t.name];
    const shown = b ? fmtShape(rangedShape(b, t.shape, shownAt)) : declared;
    return h("tr", { dataset: { io: t.name } }, h("td", null, role), h("td", null, h("code", null, t.name)), h("td", null, t.dtype),
      h("td", { class: "io-shape" }, h("span", { class: "bound-shape" }, shown),
        b && shown !== declared ? h("span", { class: "declared-shape muted", title: `declared in the model as ${declared}` }, `declared ${declared}`) : null,
        values[t.name] ? h("span", { class: "input-value" }, `bound to value ${values[t.name].join(", ")}`) : null));
  };
  return h("table", { class: "io" }, h("tbody", null, ...inputs.map((i) => row("input", i)), ...outputs.map((o) => row("output", o))));
}

/**
 * The bound shapes of `names` from the latest pass whose IR binds them (the ONNX-level passes at
 * the head of a pipeline print the graph before its shapes are specialized).
 */
function lastBound(state: CompilationState, names: string[]): Record<string, number[]> {
  for (let i = state.passes.length - 1; i >= 0; i--) {
    const b = boundShapes(state.passes[i].ir, names);
    if (Object.keys(b).length) return b;
  }
  return {};
}

/** Text with every number ("9.54e-7", "1.63e+1", "0.5") in a span that does not wrap, so a line may break between words but never at an exponent's "-". */
export function unbrokenNumbers(text: string): (string | HTMLElement)[] {
  const out: (string | HTMLElement)[] = [];
  let at = 0;
  for (const m of text.matchAll(/\d+(?:\.\d+)?(?:e[+-]\d+)?/g)) {
    if (m.index > at) out.push(text.slice(at, m.index));
    out.push(h("span", { class: "nowrap" }, m[0]));
    at = m.index + m[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

const VERDICT_CLASS = { passed: "ok", differ: "bad", "not-verified": "unverified" } as const;

function accuracy(v: ModelVerified): HTMLElement {
  const d = describeVerification(v);
  const rows = outputRows(v);
  return h("div", null,
    h("p", { class: `verdict ${VERDICT_CLASS[d.kind]}` }, d.headline),
    d.reason !== null ? h("p", { class: "verdict-reason" }, d.reason) : null,
    d.detail !== null ? h("p", { class: "verdict-detail" }, ...unbrokenNumbers(d.detail)) : null,
    rows.length > 1 || rows.some((r) => r[6] !== "" || (r[1] !== "match" && r[1] !== "differ"))
      ? h("div", { class: "table-scroll" }, h("table", { class: "grid outputs" },
          h("thead", null, h("tr", null, ...["output", "verdict", "max abs", "max rel", "rtol", "atol applied", "storage"].map((x, i) => h("th", { class: i >= 2 && i <= 5 ? "num" : undefined, title: x === "atol applied" ? "the absolute tolerance the check applied: the nominal atol × the output's largest magnitude, at least the floor" : undefined }, x)))),
          h("tbody", null, ...rows.map((r) => h("tr", null,
            h("td", null, h("code", null, r[0])),
            h("td", null, r[1]),
            ...r.slice(2, 5).map((x) => h("td", { class: "num" }, x)),
            h("td", { class: "num atol", title: r[8] ? `applied ${r[5]} = ${r[8]}` : undefined }, r[5]),
            h("td", null, r[6]))))))
      : null,
    rows.length && rows.some((r) => r[7]) && (rows.length > 1 || rows.some((r) => r[6] !== "" || (r[1] !== "match" && r[1] !== "differ")))
      ? h("p", { class: "muted atol-rule" }, ...unbrokenNumbers(`atol applied = ${[...new Set(rows.map((r) => r[7]).filter((x) => x))].join(" or ")} of each output, at least ${fmtSci(v.atol_floor ?? null)}; hover a value for its numbers`))
      : null,
    d.notes.length ? h("ul", { class: "notes muted" }, ...d.notes.map((n) => h("li", null, n))) : null);
}

export function summaryPane(): Pane {
  const el = h("section", { class: "summary", "aria-label": "Summary" });
  let last: CompilationState | null = null;
  let lastMeta: PaneContext["meta"] | undefined;
  let downloads: ReturnType<typeof downloadsCard> | null = null;
  return {
    el,
    update(ctx: PaneContext) {
      const { state, meta } = ctx;
      downloads ??= downloadsCard(ctx.id);
      // before the early return: the record's status (meta) can settle the phase before any event
      downloads.update(downloadPhase(Boolean(state.finished || state.failed), meta?.status));
      // The compilation's details (meta: model name, shapes, pipeline) can arrive after the last
      // event: drawn again then, or the precision card's recompile buttons stay disabled.
      if (state === last && meta === lastMeta) return;
      last = state;
      lastMeta = meta;
      const s = state.started;
      const t = state.timing;
      const v = state.verification;
      const m = state.memory;
      const stageMs = state.finished?.stage_ms;
      const maxStage = stageMs ? Math.max(0, ...Object.values(stageMs).map((x) => x ?? 0)) : 0;
      const shapes = meta?.input_shapes ?? {};
      const values = (s?.model.input_values ?? {}) as Record<string, unknown[]>; // compile.started: inputs bound to values
      const ranged = dimRangeLines(meta?.dim_ranges ?? {}, m?.dim_range);
      replace(
        el,
        card(
          "Model",
          s
            ? h("div", null,
                h("p", null, h("strong", { class: "model-file" }, meta?.model.name || s.model.name), meta?.model.name && meta.model.name !== s.model.name ? h("span", { class: "muted" }, ` · graph ${s.model.name}`) : "", ` · opset ${s.model.opset ?? "?"} · target `, h("code", null, s.target), s.compiler_version ? ` · compiler ${s.compiler_version}` : ""),
                ioTable(s.model.inputs, s.model.outputs, { ...lastBound(state, [...s.model.inputs, ...s.model.outputs].map((t) => t.name)), ...shapes }, values, ranged.shownAt),
                ...ranged.lines.map((line) => h("p", { class: "dim-range" }, line)),
                ranged.lines.length && ranged.detail ? h("p", { class: "dim-range-detail muted" }, ranged.detail) : null,
                storageBlock(s.model.storage),
                h("details", null, h("summary", null, `Pipeline: ${splitPipeline(s.pipeline).length} passes`), h("ol", { class: "pipeline-list" }, ...splitPipeline(s.pipeline).map((p) => h("li", null, h("code", null, p.name), p.options ? h("code", { class: "muted" }, `{${p.options}}`) : null)))),
              )
            : pending(state, "model description"),
        ),
        card(
          "Latency",
          t ? latency(t) : pending(state, "model timing"),
        ),
        wide(card(
          "Accuracy",
          v ? accuracy(v) : pending(state, "verification"),
        )),
        state.accuracy ? precisionCard(ctx, state.accuracy) : null,
        card(
          "Compile time",
          stageMs
            ? h("div", null, ...STAGES.map((st) => bar(st, stageMs[st] ?? 0, maxStage, stageMs[st] === undefined ? "–" : fmtMs(stageMs[st]))), h("p", { class: "muted" }, `total ${fmtMs(state.finished?.duration_ms)}`))
            : state.passes.length
              ? h("p", { class: "muted" }, `passes so far: ${fmtMs(state.passes.reduce((a, p) => a + p.duration_ms, 0))}`)
              : pending(state, "stage times"),
        ),
        card(
          "Memory",
          m
            ? h("div", null,
                bar("arena (shared)", m.arena_bytes, m.no_sharing_bytes, fmtBytes(m.arena_bytes)),
                bar("no sharing", m.no_sharing_bytes, m.no_sharing_bytes, fmtBytes(m.no_sharing_bytes)),
                bar("lower bound", m.lower_bound_bytes, m.no_sharing_bytes, fmtBytes(m.lower_bound_bytes)),
                h("p", { class: "muted" }, m.no_sharing_bytes > 0
                  ? `${count(m.buffers.length, "buffer")}; the arena is ${fmtNum((100 * m.arena_bytes) / m.no_sharing_bytes, 1)}% of no sharing`
                  : `${count(m.buffers.length, "buffer")}: the model needs no intermediate memory, so the arena is empty`),
              )
            : pending(state, "memory plan"),
        ),
        downloads.el,
      );
    },
  };
}
