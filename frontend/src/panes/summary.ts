/** Summary: latency against ONNX Runtime, accuracy verdict, compile time per stage, memory. */
import { STAGES } from "../events";
import { h, replace } from "../dom";
import { fmtBytes, fmtMs, fmtNum, fmtSci, fmtShape } from "../format";
import { splitPipeline } from "../pipeline";
import type { CompilationState } from "../state";
import type { Pane, PaneContext } from "./types";

function card(title: string, ...body: (Node | string | null)[]): HTMLElement {
  return h("div", { class: "card" }, h("h3", null, title), ...body);
}

function pending(state: CompilationState, what: string): HTMLElement {
  const ended = state.finished || state.failed;
  return h("p", { class: "muted" }, ended ? `No ${what} in this compilation.` : `Waiting for ${what}…`);
}

function bar(label: string, value: number, max: number, text: string, cls = ""): HTMLElement {
  return h("div", { class: `hbar ${cls}` }, h("span", { class: "hbar-label" }, label), h("span", { class: "hbar-track" }, h("span", { class: "hbar-fill", style: { width: `${max > 0 ? (100 * value) / max : 0}%` } })), h("span", { class: "hbar-value" }, text));
}

export function summaryPane(): Pane {
  const el = h("section", { class: "summary", "aria-label": "Summary" });
  let last: CompilationState | null = null;
  return {
    el,
    update({ state, meta }: PaneContext) {
      if (state === last) return;
      last = state;
      const s = state.started;
      const t = state.timing;
      const v = state.verification;
      const m = state.memory;
      const stageMs = state.finished?.stage_ms;
      const maxStage = stageMs ? Math.max(0, ...Object.values(stageMs).map((x) => x ?? 0)) : 0;
      const shapes = meta?.input_shapes ?? {};
      replace(
        el,
        card(
          "Model",
          s
            ? h("div", null,
                h("p", null, h("strong", null, s.model.name), ` · opset ${s.model.opset ?? "?"} · target `, h("code", null, s.target), s.compiler_version ? ` · compiler ${s.compiler_version}` : ""),
                h("table", { class: "io" }, h("tbody", null,
                  ...s.model.inputs.map((i) => h("tr", null, h("td", null, "input"), h("td", null, h("code", null, i.name)), h("td", null, i.dtype), h("td", null, fmtShape(i.shape)), h("td", null, shapes[i.name] ? `bound to ${fmtShape(shapes[i.name])}` : ""))),
                  ...s.model.outputs.map((o) => h("tr", null, h("td", null, "output"), h("td", null, h("code", null, o.name)), h("td", null, o.dtype), h("td", null, fmtShape(o.shape)), h("td", null, ""))),
                )),
                h("details", null, h("summary", null, `Pipeline: ${splitPipeline(s.pipeline).length} passes`), h("ol", { class: "pipeline-list" }, ...splitPipeline(s.pipeline).map((p) => h("li", null, h("code", null, p.name), p.options ? h("code", { class: "muted" }, `{${p.options}}`) : null)))),
              )
            : pending(state, "the model"),
        ),
        card(
          "Latency",
          t
            ? h("div", null,
                h("p", { class: "big" }, `${fmtNum(t.ratio)}×`, h("span", { class: "muted" }, t.ratio <= 1 ? " of ONNX Runtime's time (Prism faster)" : " of ONNX Runtime's time (Prism slower)")),
                bar("Prism", t.prism_ms, Math.max(t.prism_ms, t.onnxruntime_ms), fmtMs(t.prism_ms), "prism"),
                bar("ONNX Runtime", t.onnxruntime_ms, Math.max(t.prism_ms, t.onnxruntime_ms), fmtMs(t.onnxruntime_ms), "ort"),
                h("p", { class: "muted" }, `median of ${t.repeats} runs`),
              )
            : pending(state, "model timing"),
        ),
        card(
          "Accuracy",
          v
            ? h("div", null,
                h("p", { class: `verdict ${v.passed ? "ok" : "bad"}` }, v.passed ? "✔ outputs match ONNX Runtime" : "✘ outputs differ from ONNX Runtime"),
                h("p", null, `max abs error ${fmtSci(v.max_abs_error)} · max rel error ${fmtSci(v.max_rel_error)} · rtol ${fmtSci(v.rtol)} · atol ${fmtSci(v.atol)}`),
              )
            : pending(state, "verification"),
        ),
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
                h("p", { class: "muted" }, `${m.buffers.length} buffers; the arena is ${fmtNum(m.no_sharing_bytes ? (100 * m.arena_bytes) / m.no_sharing_bytes : 0, 1)}% of no sharing`),
              )
            : pending(state, "memory plan"),
        ),
      );
    },
  };
}
