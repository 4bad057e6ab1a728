/** Kernels: a sortable timing table with a bar chart; one kernel's loop IR, LLVM IR and asm in tabs. */
import { commentGutter, setCommentCounts } from "../commentgutter";
import { codeViewer, diffViewer, type CodeViewer, type DiffViewer } from "../editor";
import { counts, type CodeKind } from "../review";
import { emptyState, h, replace } from "../dom";
import { count, fmtMs, fmtNum, fmtUs } from "../format";
import { kernelRows, sortRows, type KernelRow, type SortKey } from "../kernelrows";
import { loopIr } from "../lang/loopir";
import { llvmIr } from "../lang/llvmir";
import { asmView, type AsmView } from "./asmview";
import type { ProvSelection, ProvText } from "../provenance";
import { defaultPanes, kernelProvenance } from "./kernelprov";
import { nodeTexts, panePicker, tabPane } from "./kernelpanes";
import { linkTo, navigate } from "../router";
import { rooflineChart, rooflinePoints } from "./roofline";
import type { KernelState } from "../state";
import { KERNEL_TABS, PANE_TEXTS, type KernelTab, type PaneText } from "../urlstate";
import type { Pane, PaneContext } from "./types";
import { commentCount, commentIcon, threadWords } from "../icons";

// Each time cell carries its own unit (fmtUs: "812 µs", "3.41 ms"), so the header names the measure, not a unit.
const COLUMNS: { key: SortKey; label: string; numeric: boolean; title?: string }[] = [
  { key: "kernel", label: "kernel", numeric: false },
  { key: "ops", label: "ops", numeric: false },
  { key: "us", label: "median time", numeric: true, title: "median time of one call at the compilation's thread count (µs below 1 ms, else ms)" },
  { key: "share", label: "share", numeric: true },
  { key: "gflops", label: "GFLOP/s", numeric: true },
  { key: "gbps", label: "GB/s", numeric: true },
  { key: "us1", label: "1 thread", numeric: true, title: "the same kernel's median time on one thread (timed when the compilation ran on more)" },
  { key: "source", label: "schedule", numeric: false, title: "where the kernel's schedule came from: this run (found by this compilation's tuning), database (found earlier by any compilation, the tuning database), or default (the rule-based schedule)" },
];

const TAB_CODE: Partial<Record<KernelTab, CodeKind>> = { loop: "loop", llvm: "llvm", opt: "llvm_optimized", asm: "asm" };
const TAB_PROV: Partial<Record<KernelTab, ProvText>> = { loop: "loop", llvm: "llvm", opt: "opt", asm: "asm" };
const TAB_LABEL: Record<KernelTab, string> = { loop: "Loop IR", llvm: "LLVM IR", opt: "Optimized LLVM IR", optdiff: "LLVM IR diff", asm: "Assembly" };

function tabText(k: KernelState | undefined, tab: KernelTab): string | undefined {
  if (!k) return undefined;
  if (tab === "loop") return k.lowered?.loop_ir;
  if (tab === "llvm") return k.compiled?.llvm_ir;
  if (tab === "opt" || tab === "optdiff") return k.compiled?.llvm_ir_optimized;
  return k.compiled?.asm;
}

export function kernelsPane(): Pane {
  const table = h("div", { class: "kernels-table" });
  const detail = h("div", { class: "kernel-detail" });
  const el = h("section", { class: "kernels", "aria-label": "Kernels" }, table, detail);
  let sortKey: SortKey = "us";
  let desc = true;
  let ctx: PaneContext | null = null;
  let lastTable: unknown[] = [];
  let lastDetail: unknown[] = [];
  let viewer: CodeViewer | DiffViewer | null = null;
  let asmShown: AsmView | null = null;
  let rooflineOpen = false;
  // The pinned provenance selection (kernelprov.ts): a clicked line or ONNX node, or ?node= from the graph.
  let pinned: { kernel: string; sel: ProvSelection } | null = null;
  let companions: CodeViewer[] = [];
  const dropCompanions = () => {
    for (const c of companions) c.destroy();
    companions = [];
  };

  const renderTable = (force = false) => {
    if (!ctx) return;
    const { id, state, view } = ctx;
    const selected = view.view === "kernel" ? view.kernel : null;
    const key = [state.kernels, state.fusion, selected, sortKey, desc, ctx.review, state.timing, ctx.tuning];
    const kernelComments = ctx.review ? counts(ctx.review).kernels : new Map<string, number>();
    if (!force && key.every((x, i) => x === lastTable[i])) return;
    lastTable = key;
    const rows = sortRows(kernelRows(state, ctx.tuning), sortKey, desc);
    if (rows.length === 0) {
      replace(table, emptyState("No kernels yet.", state.finished || state.failed ? "This compilation produced no kernels (the back end did not run)." : "Kernels appear when fusion and lowering run."));
      return;
    }
    const maxUs = Math.max(0, ...rows.map((r) => r.us ?? 0));
    const head = h("tr", null, ...COLUMNS.map((c) => {
      const th = h("th", { class: c.numeric ? "num sortable" : "sortable", title: c.title, "aria-sort": c.key === sortKey ? (desc ? "descending" : "ascending") : "none" }, c.label, c.key === sortKey ? (desc ? " ▾" : " ▴") : "");
      th.addEventListener("click", () => {
        if (sortKey === c.key) desc = !desc;
        else {
          sortKey = c.key;
          desc = c.numeric;
        }
        renderTable(true);
      });
      return th;
    }), h("th", { class: "chart" }, "time"));
    const tr = (r: KernelRow) =>
      h("tr", { class: r.kernel === selected ? "selected" : "", dataset: { kernel: r.kernel } },
        h("td", null, linkTo(h("a", null, r.kernel), { page: "compilation", id, view: "kernel", kernel: r.kernel, tab: view.view === "kernel" ? view.tab : "loop" }),
          ctx?.onComment ? h("button", { class: "btn tiny comment-kernel-row", title: `Comment on kernel ${r.kernel}${kernelComments.get(r.kernel) ? ` (${threadWords(kernelComments.get(r.kernel) ?? 0)})` : ""}`, "aria-label": `Comment on kernel ${r.kernel}${kernelComments.get(r.kernel) ? ` (${threadWords(kernelComments.get(r.kernel) ?? 0)})` : ""}`, on: { click: () => ctx?.onComment?.({ kind: "kernel", kernel: r.kernel }) } }, kernelComments.get(r.kernel) ? commentCount(kernelComments.get(r.kernel) ?? 0) : commentIcon()) : null),
        h("td", { class: "ops", title: r.ops.join(", ") }, r.ops.length ? `${r.ops.length}: ${r.ops.slice(0, 4).join("+")}${r.ops.length > 4 ? "+…" : ""}` : "–"),
        h("td", { class: "num" }, fmtUs(r.us ?? undefined)),
        h("td", { class: "num" }, r.share === null ? "–" : `${(100 * r.share).toFixed(1)}%`),
        h("td", { class: "num" }, fmtNum(r.gflops ?? undefined)),
        h("td", { class: "num" }, fmtNum(r.gbps ?? undefined)),
        h("td", { class: "num", title: r.us1 !== null && r.us ? `${fmtNum(r.us1 / r.us)}x faster on ${r.threads} threads` : "" }, r.us1 === null ? "–" : fmtUs(r.us1)),
        h("td", { class: `sched-src${r.source ? ` src-${r.source.replace(" ", "-")}` : ""}`, title: r.sourceNote }, r.source ?? "–"),
        h("td", { class: "chart" }, h("span", { class: "bar", style: { width: `${maxUs > 0 && r.us !== null ? (100 * r.us) / maxUs : 0}%` } })),
      );
    const timed = rows.filter((r) => r.us !== null);
    const totalUs = timed.reduce((s, r) => s + (r.us ?? 0), 0);
    const threads = timed.find((r) => r.threads !== null)?.threads;
    const at = threads ? ` at ${threads} thread${threads > 1 ? "s" : ""}${threads > 1 ? " (one thread in the last column)" : ""}` : "";
    const points = rooflinePoints(state);
    const roof = points.length ? h("details", { class: "roofline-box", open: rooflineOpen }, h("summary", null, `Roofline (${count(points.length, "kernel")})`),
      rooflineChart(points, (kernel) => navigate({ page: "compilation", id, view: "kernel", kernel, tab: view.view === "kernel" ? view.tab : "loop" }), state.timing?.ceilings)) : null;
    roof?.addEventListener("toggle", () => (rooflineOpen = (roof as HTMLDetailsElement).open));
    replace(table,
      roof,
      state.tuneApplied ? h("p", { class: "muted tune-applied" }, state.tuneApplied.message) : null,
      h("p", { class: "muted" }, count(rows.length, "kernel"), timed.length ? `, ${timed.length} timed${at}, sum ${fmtMs(totalUs / 1000)}` : ", not timed (code only or not run yet)"),
      h("table", { class: "grid" }, h("thead", null, head), h("tbody", null, ...rows.map(tr))),
    );
    const sel = table.querySelector<HTMLElement>("tr.selected");
    if (sel) table.scrollTop = Math.max(0, sel.offsetTop - table.clientHeight / 2);
  };

  const renderDetail = () => {
    if (!ctx) return;
    const { id, state, view } = ctx;
    if (view.view !== "kernel") {
      viewer?.destroy();
      dropCompanions();
      viewer = null;
      lastDetail = [];
      replace(detail, rowsHint(state.kernels.size));
      return;
    }
    const k = state.kernels.get(view.kernel);
    const text = tabText(k, view.tab);
    const code = TAB_CODE[view.tab];
    const lineCounts = () => {
      const prefix = `${view.kernel}:${code}:`;
      const all = ctx?.review ? counts(ctx.review).codeLines : new Map<string, number>();
      return new Map([...all].filter(([x]) => x.startsWith(prefix)).map(([x, n]) => [Number(x.slice(prefix.length)), n]));
    };
    const chosen: PaneText[] = view.panes ?? defaultPanes(view.tab);
    const key = [view.kernel, view.tab, text, k?.lowered?.schedule, k?.timed, view.line, view.node, k?.compiled, k?.lowered,
      chosen.join(","), state.passes.length];
    if (key.every((x, i) => x === lastDetail[i])) {
      const shownCounts = (m: Map<number, number>): Map<number, number> => {
        if (!asmShown) return m;
        const out = new Map<number, number>();
        for (const [l, n] of m) {
          const at = asmShown.shownLine(l);
          if (at !== null) out.set(at, n);
        }
        return out;
      };
      if (viewer && "view" in viewer) setCommentCounts(viewer.view, shownCounts(lineCounts()));
      return;
    }
    lastDetail = key;
    viewer?.destroy();
    dropCompanions();
    viewer = null;
    asmShown = null;
    if (view.node) pinned = { kernel: view.kernel, sel: { node: view.node } };
    const tabs = h("div", { class: "tabs", role: "tablist" }, ...KERNEL_TABS.map((t) =>
      linkTo(h("a", { class: `tab${t === view.tab ? " active" : ""}`, role: "tab", "aria-selected": t === view.tab ? "true" : "false", dataset: { tab: t } }, TAB_LABEL[t], tabText(k, t) === undefined ? " (–)" : ""), { page: "compilation", id, view: "kernel", kernel: view.kernel, tab: t }),
    ));
    const group = k?.group ?? state.fusion?.groups.find((g) => g.kernel === view.kernel)?.id;
    const firstNode = state.fusion?.groups.find((g) => g.id === group)?.nodes[0];
    const firstName = firstNode ? (state.fusion?.nodes.find((n) => n.id === firstNode)?.name ?? firstNode) : null;
    const facts = h("p", { class: "muted" },
      group ? `group ${group}` : "",
      firstName ? " · " : "",
      firstName ? linkTo(h("a", { class: "kernel-in-graph" }, "show in the fusion graph"), { page: "compilation", id, view: "graph", node: firstName }) : null,
      k?.compiled ? ` · compiled in ${fmtMs(k.compiled.compile_ms)}` : "",
      k?.timed ? ` · ${fmtUs(k.timed.median_us)} · ${fmtNum(k.timed.gflops)} GFLOP/s · ${fmtNum(k.timed.gbps)} GB/s` : "",
    );
    const host = h("div", { class: "cm-host prov-main" });
    // the panes stand in source-to-machine order around the tab's own text (the LLVM IR diff first)
    const own = tabPane(view.tab);
    const beside = chosen.filter((t) => t !== own);
    const sides = new Map(beside.map((t) => [t, h("div", { class: "cm-host prov-companion", dataset: { pane: t } })]));
    // (the tab's own text stays first in the DOM, where the page's other code and tests find it; CSS order places them)
    host.style.order = String(own === null ? -1 : PANE_TEXTS.indexOf(own));
    for (const [t, side] of sides) side.style.order = String(PANE_TEXTS.indexOf(t));
    const pair = h("div", { class: "prov-pair" }, host, ...sides.values());
    const symbols = Object.fromEntries([...state.kernels].filter(([, x]) => x.compiled?.symbol).map(([name, x]) => [String(x.compiled?.symbol), name]));
    const target = state.started?.target ?? "host";
    const texts = nodeTexts(state);
    const p = kernelProvenance(k, { pinned: pinned?.kernel === view.kernel ? pinned.sel : null, onPin: (sel) => (pinned = { kernel: view.kernel, sel }), target, symbols, nodeTexts: texts });
    const has = (t: PaneText) => (t === "onnx" || t === "graph" ? texts[t] !== undefined : tabText(k, t) !== undefined);
    const picker = panePicker(view.tab, beside, has, (panes) => navigate({ ...view, panes }));
    const provText = TAB_PROV[view.tab];
    const schedule = k?.lowered?.schedule;
    const onComment = ctx.onComment;
    const kernelName = view.kernel;
    replace(detail, h("h2", null, "Kernel ", h("code", null, view.kernel),
      onComment ? h("button", { class: "btn small comment-kernel", on: { click: () => onComment({ kind: "kernel", kernel: kernelName }) } }, commentIcon(), " Comment on kernel") : null), facts,
      schedule !== undefined && schedule !== null && view.tab === "loop" ? h("details", { class: "schedule" }, h("summary", null, "Schedule"), h("pre", null, typeof schedule === "string" ? schedule : JSON.stringify(schedule, null, 2))) : null,
      tabs, picker, p.strip, p.status, pair);
    if (!k && !state.fusion?.groups.some((g) => g.kernel === view.kernel)) {
      host.appendChild(emptyState(`No kernel named “${view.kernel}” ${state.finished || state.failed ? "in this compilation" : "yet"}.`));
    } else if (text === undefined) {
      host.appendChild(emptyState(`No ${TAB_LABEL[view.tab]} for this kernel${state.finished || state.failed ? "." : " yet."}`));
    } else if (view.tab === "optdiff") {
      host.classList.add("diff");
      detail.insertBefore(h("div", { class: "diff-labels" }, h("span", null, "LLVM IR as generated"), h("span", null, "after LLVM's optimization passes")), pair);
      viewer = diffViewer(host, k?.compiled?.llvm_ir ?? "", text, llvmIr);
    } else if (view.tab === "asm") {
      const bar = h("div", { class: "asm-bar" });
      detail.insertBefore(bar, pair);
      asmShown = asmView(host, bar, text, {
        target, symbols, counts: lineCounts(),
        onComment: onComment ? (line, t) => onComment({ kind: "code_line", kernel: kernelName, code: "asm", line, text: t }) : undefined,
        rerender: () => ((lastDetail = []), renderDetail()), extensions: [p.extension("asm", () => asmShown?.origin)],
      });
      const shownAsm = asmShown;
      viewer = shownAsm.viewer;
      p.attach(shownAsm.viewer.view, "asm", () => shownAsm.origin);
    } else {
      const gutter = onComment && code ? [commentGutter(lineCounts(), (line, t) => onComment({ kind: "code_line", kernel: kernelName, code, line, text: t }))] : [];
      const cv = codeViewer(host, text, view.tab === "loop" ? loopIr : llvmIr, undefined, [...gutter, provText ? p.extension(provText) : []]);
      viewer = cv;
      if (provText) p.attach(cv.view, provText);
    }
    for (const [t, side] of sides) {
      const v = viewer && text !== undefined ? p.pane(side, t) : null;
      if (v) companions.push(v);
      else side.remove();
    }
    pair.classList.toggle("single", !companions.length);
    pair.classList.toggle("many", companions.length > 1);
    p.apply(true);
    // ?line=<k> (a code-line comment's anchor): the original line, through the assembly filter.
    if (view.line !== undefined && viewer) viewer.markLine(asmShown ? asmShown.shownLine(view.line) : view.line);
  };

  return {
    el,
    update(c) {
      ctx = c;
      // The list alone flows with the page (all of its height); beside a kernel's code it scrolls in a box.
      el.classList.toggle("with-detail", c.view.view === "kernel");
      renderTable();
      renderDetail();
    },
    destroy: () => {
      viewer?.destroy();
      dropCompanions();
    },
  };
}

function rowsHint(n: number): HTMLElement | string {
  return n ? h("p", { class: "muted" }, "Select a kernel to see its loop IR, LLVM IR and assembly.") : "";
}
