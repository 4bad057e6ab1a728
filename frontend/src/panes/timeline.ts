/** Pass timeline: every pass with its time, changed or unchanged, remark count; filterable. */
import { h, replace } from "../dom";
import { fmtMs } from "../format";
import { linkTo, navigate } from "../router";
import { PASS_OVERHEAD_WORDS, passTimes } from "../stages";
import { counts, type ReviewState } from "../review";
import type { CompilationState } from "../state";
import type { CompilationView } from "../urlstate";
import type { Pane, PaneContext } from "./types";
import { commentCount, threadWords } from "../icons";

export function optionsText(o: Record<string, unknown> | undefined): string {
  if (!o) return "";
  const parts = Object.entries(o).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

/** " (ONNX-level, round 2)": what a pass of the ONNX model before import says in its tooltip. */
export function levelWords(p: { level?: string; iteration?: number }): string {
  if (p.level !== "onnx") return p.iteration ? ` (round ${p.iteration})` : "";
  return ` (ONNX-level: rewrites the ONNX model before import${p.iteration ? `, round ${p.iteration} of its fixed-point group` : ""})`;
}

/** "35 remarks": opens the remarks filtered to this pass (a span, as the row itself is a link). */
function remarksLink(id: string, pass: string, n: number): HTMLElement {
  const words = `${n} remark${n === 1 ? "" : "s"}`;
  const el = h("span", { class: "pass-remarks", role: "link", tabindex: n ? "0" : undefined, title: n ? `${words} this pass made: show them` : undefined }, n ? words : "");
  const go = (e: Event) => {
    e.preventDefault();
    e.stopPropagation();
    navigate({ page: "compilation", id, view: "remarks", pass });
  };
  if (n) {
    el.addEventListener("click", go);
    el.addEventListener("keydown", (e) => e.key === "Enter" && go(e));
  }
  return el;
}

export function timelinePane(): Pane {
  const search = h("input", { type: "search", placeholder: "Search passes", "aria-label": "Search passes", class: "timeline-search" });
  const hide = h("input", { type: "checkbox", class: "timeline-hide" });
  const list = h("ol", { class: "timeline-list" });
  const total = h("div", { class: "timeline-total" });
  const el = h(
    "section",
    { class: "timeline", "aria-label": "Pass timeline" },
    h("h2", null, "Passes"),
    h("div", { class: "timeline-controls" }, search, h("label", null, hide, " hide unchanged")),
    list,
    total,
  );
  let last: { state: CompilationState; view: CompilationView; q: string; hide: boolean; review?: ReviewState } | null = null;
  let ctx: PaneContext | null = null;

  const render = () => {
    if (!ctx) return;
    const { id, state, view } = ctx;
    const q = search.value.trim().toLowerCase();
    if (last && last.state === state && last.view === view && last.q === q && last.hide === hide.checked && last.review === ctx.review) return;
    last = { state, view, q, hide: hide.checked, review: ctx.review };
    const commented = ctx.review ? counts(ctx.review).passes : new Map<number, number>();
    const selected = view.view === "pass" ? view.pass : -1;
    const maxMs = Math.max(1e-9, ...state.passes.map((p) => p.duration_ms));
    const rows: HTMLElement[] = [];
    state.passes.forEach((p, i) => {
      if (hide.checked && !p.changed) return;
      if (q && !p.name.toLowerCase().includes(q)) return;
      const nRemarks = p.remarks?.length ?? 0;
      const a = linkTo(
        h(
          "a",
          { class: "timeline-link", title: `${p.name}${optionsText(p.options)}${levelWords(p)}: ${p.changed ? "changed" : "unchanged"}, ${nRemarks} remarks, ${fmtMs(p.duration_ms)}` },
          h("span", { class: "pass-index" }, String(i)),
          h("span", { class: "pass-name", title: `${p.name}${optionsText(p.options)}` }, p.name),
          h("span", { class: "pass-time" }, fmtMs(p.duration_ms)),
          h("span", { class: "pass-meta" },
            h("span", { class: `pass-changed ${p.changed ? "is-changed" : "is-unchanged"}` }, p.changed ? "changed" : "unchanged"),
            remarksLink(id, p.name, nRemarks),
            h("span", { class: "pass-comments", title: commented.get(i) ? threadWords(commented.get(i) ?? 0) : undefined, "aria-label": commented.get(i) ? threadWords(commented.get(i) ?? 0) : undefined }, commented.get(i) ? commentCount(commented.get(i) ?? 0) : "")),
          h("span", { class: "pass-bar-track", title: "share of the slowest pass's time" }, h("span", { class: "pass-bar", style: { width: `${(100 * p.duration_ms) / maxMs}%` } })),
        ),
        { page: "compilation", id, view: "pass", pass: i, diff: view.view === "pass" ? view.diff : false },
      );
      rows.push(h("li", { class: `timeline-row${i === selected ? " selected" : ""}${p.level === "onnx" ? " level-onnx" : ""}`, dataset: { index: String(i), name: p.name } }, a));
    });
    if (state.running && !ctx.state.failed) {
      rows.push(h("li", { class: "timeline-row running" }, h("span", { class: "pass-index" }, String(state.passes.length)), h("span", { class: "pass-name", title: state.running.name }, state.running.name), h("span", { class: "spinner", "aria-label": "running" })));
    }
    const waiting = state.plannedPasses.slice(state.passes.length + (state.running ? 1 : 0));
    if (!state.failed && !state.finished) {
      waiting.forEach((name, j) => {
        if (q && !name.toLowerCase().includes(q)) return;
        rows.push(h("li", { class: "timeline-row waiting" }, h("span", { class: "pass-index" }, String(state.passes.length + (state.running ? 1 : 0) + j)), h("span", { class: "pass-name", title: name }, name)));
      });
    }
    if (rows.length === 0) rows.push(h("li", { class: "empty" }, state.passes.length ? "No pass matches." : "No pass has run yet."));
    replace(list, rows);
    const pt = passTimes(state);
    const changed = state.passes.filter((p) => p.changed).length;
    // The sum of the passes' own times; the stage strip's wall time also has the IR snapshots etc.
    replace(total, state.passes.length
      ? h("span", { title: pt.wall === null ? "the sum of the passes' own times" : `the passes' own times add up to ${fmtMs(pt.inPasses)}; the passes stage took ${fmtMs(pt.wall)} wall, the other ${fmtMs(pt.other ?? 0)} in ${PASS_OVERHEAD_WORDS}` },
          `${state.passes.length} passes, ${changed} changed, ${fmtMs(pt.inPasses)} in passes`,
          pt.inModel > 0 ? ` + ${fmtMs(pt.inModel)} in ONNX-level passes (import stage)` : "",
          pt.wall !== null ? ` (stage ${fmtMs(pt.wall)} wall with IR snapshots and verification)` : "")
      : "");
  };
  search.addEventListener("input", render);
  hide.addEventListener("change", render);
  return {
    el,
    update(c) {
      ctx = c;
      render();
    },
  };
}
