/**
 * Fusion graph pane: the graph after fusion, laid out top to bottom by ELK in a Web Worker,
 * groups as coloured clusters (or one box per group for large graphs), pan and zoom, and the
 * selected node's attributes, IR line and kernel. The selection lives in the URL (?node=).
 */
import type { ElkNode } from "elkjs/lib/elk-api";
import { emptyState, h, replace } from "../dom";
import { count, fmtShape, fmtUs } from "../format";
import { findDefiningLine, parseAttributes, splitLines } from "../irdiff";
import { buildElkGraph, type BuiltGraph } from "../graph/build";
import { controlBlock } from "../graph/control";
import { draw, type Drawing } from "../graph/render";
import { HEAT_BANDS, UNTIMED_COLOUR } from "../graph/heat";
import { nodeOperands, valueTypes } from "../irtypes";
import { CONVERT_COLOUR, FP32_COLOUR, INT8_UNMEASURED, nodePrecisions, opPrecision, SQNR_BANDS } from "../precision";
import { linkTo, navigate } from "../router";
import type { FusedGroup, FusedNode, GraphFused } from "../events";
import { counts } from "../review";
import type { CompilationState } from "../state";
import type { Pane, PaneContext } from "./types";
import { commentIcon, threadWords } from "../icons";

/** Above this many nodes the graph starts collapsed (one box per fused group). */
const COLLAPSE_ABOVE = 800;

let worker: Worker | null = null;
let nextJob = 0;
let inFlight: { reject: (e: Error) => void } | null = null;

/** Lays out in the worker; a new request abandons (terminates) a layout still running. */
function layoutInWorker(graph: ElkNode): Promise<{ graph: ElkNode; ms: number }> {
  if (inFlight && worker) {
    worker.terminate();
    worker = null;
    inFlight.reject(new Error("superseded"));
  }
  worker ??= new Worker(new URL("../graph/layout.worker.ts", import.meta.url), { type: "module" });
  const id = ++nextJob;
  const w = worker;
  return new Promise((resolve, reject) => {
    inFlight = { reject };
    const onMsg = (m: MessageEvent<{ id: number; graph?: ElkNode; ms?: number; error?: string }>) => {
      if (m.data.id !== id) return;
      w.removeEventListener("message", onMsg);
      inFlight = null;
      if (m.data.graph) resolve({ graph: m.data.graph, ms: m.data.ms ?? 0 });
      else reject(new Error(m.data.error ?? "layout failed"));
    };
    w.addEventListener("message", onMsg);
    w.postMessage({ id, graph });
  });
}

/**
 * Every input of a node from its IR line's operands, each with its type and, for a constant, the
 * word "constant" (weights, biases); the fusion graph's edges only where there is no IR line.
 */
function inputsList(ir: string, irLine: string, ins: GraphFused["edges"]): HTMLElement | null {
  const operands = irLine ? nodeOperands(irLine) : [];
  if (!operands.length) {
    return ins.length ? h("div", null, h("h4", null, "inputs"), h("ul", { class: "node-inputs" }, ...ins.map((e) => h("li", null, h("code", null, e.value), ` ${e.dtype}${fmtShape(e.shape)}`)))) : null;
  }
  const types = valueTypes(ir);
  return h("div", null, h("h4", null, `inputs (${operands.length})`), h("ul", { class: "node-inputs" }, ...operands.map((o) => {
    const t = types.get(o);
    return h("li", { dataset: { input: o } }, h("code", null, o), ` ${t?.type ?? "?"}`, t?.constant ? h("span", { class: "muted" }, " constant") : null);
  })));
}

/** The legend of the heat map: the share bands (heat.ts), and how many groups are timed. */
export function heatLegend(timed: number, groups: number): HTMLElement[] {
  return [h("span", { class: "muted" }, "share of kernel time: "),
    ...HEAT_BANDS.map((b) => h("span", { class: "legend-item", dataset: { band: b.label } }, h("span", { class: "swatch heat", style: { background: b.colour } }), b.label)),
    h("span", { class: "legend-item" }, h("span", { class: "swatch heat", style: { background: UNTIMED_COLOUR } }), "not timed"),
    // no fused group drawn (a graph of control-flow nodes: the kernels are the bodies'): no "1 of 0"
    ...(groups > 0 ? [h("span", { class: "muted" }, ` · ${timed} of ${count(groups, "kernel")} timed`)] : [])];
}

/** The legend of the precision colouring: the SQNR bands of the reduced-precision nodes (``dtype``: int8,
 * bf16 or fp16), unmeasured ones, Q/DQ (int8 only), fp32. */
export function precisionLegend(dtype = "int8"): HTMLElement[] {
  const item = (colour: string, label: string) => h("span", { class: "legend-item" }, h("span", { class: "swatch", style: { background: colour } }), label);
  return [h("span", { class: "muted" }, "precision: "), ...SQNR_BANDS.map((b) => item(b.colour, `${dtype} ${b.label}`)),
    item(INT8_UNMEASURED, `${dtype} (no SQNR)`), ...(dtype === "int8" ? [item(CONVERT_COLOUR, "quantize / dequantize")] : []),
    item(FP32_COLOUR, "fp32")];
}

export function graphPane(): Pane {
  const collapse = h("input", { type: "checkbox", class: "graph-collapse" });
  const status = h("span", { class: "muted graph-status" });
  const fitBtn = h("button", { class: "btn", title: "Fit to view" }, "fit");
  const zin = h("button", { class: "btn", title: "Zoom in" }, "+");
  const zout = h("button", { class: "btn", title: "Zoom out" }, "−");
  const find = h("input", { type: "search", class: "graph-find", placeholder: "Find node (name or op)", "aria-label": "Find node", list: "graph-node-names" });
  const names = h("datalist", { id: "graph-node-names" });
  const canvas = h("div", { class: "graph-canvas" });
  const side = h("aside", { class: "graph-side" });
  const legend = h("div", { class: "graph-legend", "aria-label": "Legend" });
  const heat = h("input", { type: "checkbox", class: "graph-heat", checked: true });
  const el = h("section", { class: "graph", "aria-label": "Fusion graph" },
    h("div", { class: "graph-controls" }, h("label", null, collapse, " one box per fused group"), h("label", { title: "colour each fused group by its share of the model's kernel time" }, heat, " colour by time"), fitBtn, zin, zout, find, names, status),
    legend, h("div", { class: "graph-main" }, canvas, side));
  let ctx: PaneContext | null = null;
  let fusion: GraphFused | undefined;
  let emptyShown: boolean | null = null; // the empty state on the canvas: for an ended compilation or not
  let drawing: Drawing | null = null;
  let built: BuiltGraph | null = null;
  let shownNode: string | null | undefined;
  let userChoseCollapse = false;
  let clicked = false;
  let nodes = new Map<string, FusedNode>();
  let groups = new Map<string, { group: FusedGroup; index: number }>();

  let byName = new Map<string, FusedNode>();
  let lastReview: PaneContext["review"];
  const findNode = (name: string): FusedNode | undefined => byName.get(name) ?? nodes.get(name);
  const boxFor = (n: FusedNode): string => (collapse.checked && n.group && groups.has(n.group) ? `g:${n.group}` : n.id);

  let precision: ReturnType<typeof nodePrecisions> | undefined;
  let paintedKernels: unknown = null;
  const timedKernels = () => {
    const out = new Map<string, number>();
    for (const k of ctx?.state.kernels.values() ?? []) if (k.timed) out.set(k.name, k.timed.median_us);
    return out;
  };
  /** Kernel times and the heat map on the drawn graph, and the legend of what is painted. */
  const paint = () => {
    paintedKernels = ctx?.state.kernels ?? null;
    const kernelUs = timedKernels();
    drawing?.paintTimes(kernelUs, heat.checked && kernelUs.size > 0);
    // the drawn groups' kernels only: a control-flow body's kernels are timed but not drawn here
    const drawnTimed = [...groups.values()].filter((g) => kernelUs.has(g.group.kernel)).length;
    replace(legend, ...(heat.checked && kernelUs.size ? heatLegend(drawnTimed, groups.size) : []),
      ...(precision ? precisionLegend(ctx?.state.accuracy?.dtype ?? "int8") : []));
  };
  heat.addEventListener("change", paint);

  let generation = 0;
  const layout = async () => {
    if (!fusion) return;
    const mine = ++generation;
    drawing = null;
    replace(canvas, h("div", { class: "graph-wait" }, h("span", { class: "spinner" }), ` laying out ${count(fusion.nodes.length, "node")}…`));
    const f = fusion;
    built = buildElkGraph(f, collapse.checked);
    const t0 = performance.now();
    try {
      const { graph } = await layoutInWorker(built.root);
      if (mine !== generation) return; // a newer layout (other graph or grouping) was asked for
      const kernelUs = timedKernels();
      precision = ctx?.state.accuracy || f.nodes.some((n) => opPrecision(n.op_type) === "int8")
        ? nodePrecisions(f.nodes, ctx?.state.accuracy) : undefined;
      drawing = draw({ laid: graph, built, nodes, groups, kernelUs, precision, onSelect: select });
      paint();
      replace(canvas, drawing.svg, drawing.minimap);
      markCommented();
      drawing.home();
      replace(status, `${count(f.nodes.length, "node")}, ${count(f.groups.length, "group")}, ${count(f.edges.length, "edge")} · layout ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      shownNode = undefined;
      showSelection(true);
    } catch (e) {
      if (mine !== generation) return;
      replace(canvas, emptyState("The graph could not be laid out.", e instanceof Error ? e.message : String(e)));
    }
  };

  /** A badge (speech-bubble icon and count) on each node with open comment threads (a corner of its box). */
  const markCommented = () => {
    if (!drawing) return;
    for (const old of drawing.svg.querySelectorAll(".comment-count")) old.remove();
    const byNode = ctx?.review ? counts(ctx.review).nodes : new Map<string, number>();
    for (const [name, n] of byNode) {
      const node = findNode(name);
      const box = node ? drawing.svg.querySelector(`g.gnode[data-id="${CSS.escape(boxFor(node))}"]`) : null;
      if (!box) continue;
      const ns = "http://www.w3.org/2000/svg";
      const badge = document.createElementNS(ns, "g");
      badge.setAttribute("class", "comment-count");
      const icon = commentIcon();
      for (const [k, v] of [["x", "-8"], ["y", "-12"], ["width", "11"], ["height", "11"]]) icon.setAttribute(k, v);
      const text = document.createElementNS(ns, "text");
      text.setAttribute("x", "4");
      text.setAttribute("y", "-2");
      text.textContent = String(n);
      const title = document.createElementNS(ns, "title");
      title.textContent = threadWords(n);
      badge.append(title, icon, text);
      box.appendChild(badge);
    }
  };

  function select(boxId: string) {
    if (!ctx) return;
    let name: string | null = null;
    if (boxId.startsWith("g:")) {
      const g = groups.get(boxId.slice(2));
      const first = g?.group.nodes[0];
      name = first ? (nodes.get(first)?.name ?? first) : null;
    } else name = nodes.get(boxId)?.name ?? boxId;
    clicked = true;
    navigate({ page: "compilation", id: ctx.id, view: "graph", node: name });
  }

  const showSelection = (center: boolean) => {
    if (!ctx || ctx.view.view !== "graph") return;
    const name = ctx.view.node;
    if (name === shownNode) return;
    shownNode = name;
    const n = name ? findNode(name) : undefined;
    if (drawing) {
      const c = drawing.select(n ? boxFor(n) : null);
      if (c && center) drawing.centerOn(c);
    }
    renderSide(ctx.state, name, n);
  };

  const renderSide = (state: CompilationState, name: string | null, n: FusedNode | undefined) => {
    if (!ctx) return;
    const id = ctx.id;
    if (!name) return replace(side, h("p", { class: "muted" }, "Click a node to see its attributes, IR line and kernel."));
    if (!n) return replace(side, h("h3", null, name), h("p", { class: "muted" }, "This node is not in the fused graph (an earlier pass may have removed or renamed it)."));
    const g = n.group ? groups.get(n.group)?.group : undefined;
    const ins = fusion?.edges.filter((e) => e.target === n.id) ?? [];
    const outs = fusion?.edges.filter((e) => e.source === n.id) ?? [];
    const lastPass = state.passes.length - 1;
    const ir = lastPass >= 0 ? state.passes[lastPass].ir : "";
    const line = ir ? findDefiningLine(ir, [n.name, ...outs.map((e) => e.value)]) : null;
    const irLine = line !== null ? splitLines(ir)[line - 1] : "";
    const attrs: [string, string][] = n.attributes
      ? Object.entries(n.attributes).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])
      : parseAttributes(irLine);
    const nComments = ctx.review ? (counts(ctx.review).nodes.get(n.name) ?? 0) : 0;
    const onComment = ctx.onComment;
    replace(side,
      h("h3", null, n.name),
      onComment ? h("button", { class: "btn small comment-node", on: { click: () => onComment({ kind: "node", node: n.name }) } }, commentIcon(), " Comment on this node") : null,
      nComments ? linkTo(h("a", { class: "node-comments" }, ` ${nComments} open thread(s)`), { page: "compilation", id, view: "comments", kind: "node" }) : null,
      h("p", null, h("strong", null, n.op_type), ` · id ${n.id}`),
      controlBlock(id, n) ?? (g ? h("p", null, "kernel ", linkTo(h("a", null, g.kernel), { page: "compilation", id, view: "kernel", kernel: g.kernel, tab: "loop" }), ` (${g.kind}, ${g.nodes.length} ops${state.kernels.get(g.kernel)?.timed ? `, ${fmtUs(state.kernels.get(g.kernel)?.timed?.median_us)}` : ""})`,
        " · ", linkTo(h("a", { class: "show-code", title: "open the kernel's loop IR and assembly with this node's lines marked" }, "show code"), { page: "compilation", id, view: "kernel", kernel: g.kernel, tab: "loop", node: n.name })) : h("p", { class: "muted" }, "not in a fused group")),
      attrs.length ? h("h4", null, "attributes") : null,
      attrs.length ? h("table", { class: "attrs" }, h("tbody", null, ...attrs.map(([k, v]) => h("tr", null, h("td", null, k), h("td", null, h("code", null, v)))))) : null,
      inputsList(ir, irLine, ins),
      outs.length ? h("div", null, h("h4", null, "outputs"), h("ul", null, ...outs.map((e) => h("li", null, h("code", null, e.value), ` ${e.dtype}${fmtShape(e.shape)}`)))) : null,
      line !== null
        ? h("div", null, h("h4", null, "IR line ", linkTo(h("a", null, `(pass ${lastPass}, line ${line})`), { page: "compilation", id, view: "pass", pass: lastPass, diff: false, line })), h("pre", { class: "ir-line" }, irLine.trim()))
        : h("p", { class: "muted" }, "No IR line found for this node."),
    );
  };

  find.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || !ctx || !fusion) return;
    const q = find.value.trim().toLowerCase();
    if (!q) return;
    const hit = fusion.nodes.find((n) => n.name.toLowerCase() === q) ?? fusion.nodes.find((n) => n.name.toLowerCase().includes(q) || n.op_type.toLowerCase() === q);
    if (hit) navigate({ page: "compilation", id: ctx.id, view: "graph", node: hit.name });
    else replace(status, `No node matches “${find.value.trim()}”.`);
  });

  collapse.addEventListener("change", () => {
    userChoseCollapse = true;
    void layout();
  });
  fitBtn.addEventListener("click", () => drawing?.fit());
  zin.addEventListener("click", () => drawing?.zoomBy(1.25));
  zout.addEventListener("click", () => drawing?.zoomBy(0.8));

  return {
    el,
    update(c) {
      ctx = c;
      if (c.view.view !== "graph") return;
      if (!c.state.fusion) {
        // No graph.fused event (yet, or at all: a pipeline without fuse-ops, such as O0/O1, has none).
        const ended = Boolean(c.state.finished || c.state.failed);
        if (fusion !== undefined || emptyShown !== ended) {
          fusion = undefined;
          emptyShown = ended;
          replace(canvas, emptyState(ended ? "No fusion graph in this compilation." : "No fusion graph yet.",
            ended ? "Its pipeline ran no fuse-ops pass (O0 and O1 have none), or it ended before operator fusion." : "It appears when the fusion pass has run."));
          replace(side);
        }
        return;
      }
      if (c.state.fusion !== fusion) {
        fusion = c.state.fusion;
        emptyShown = null;
        nodes = new Map(fusion.nodes.map((n) => [n.id, n]));
        byName = new Map(fusion.nodes.map((n) => [n.name, n]));
        replace(names, ...fusion.nodes.slice(0, 5000).map((n) => h("option", { value: n.name })));
        groups = new Map(fusion.groups.map((g, index) => [g.id, { group: g, index }]));
        if (!userChoseCollapse) collapse.checked = fusion.nodes.length > COLLAPSE_ABOVE;
        void layout();
        return;
      }
      if (drawing && c.state.kernels !== paintedKernels) paint(); // kernel.timed arrived: repaint in place
      if (c.review !== lastReview) {
        lastReview = c.review;
        shownNode = undefined; // counts changed: redraw the side panel and the badges
        markCommented();
      }
      showSelection(!clicked);
      clicked = false;
    },
    destroy() {
      drawing = null;
    },
  };
}
