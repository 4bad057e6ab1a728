/**
 * Draws a laid-out ELK graph as SVG: clusters (fused groups) in distinct colours, op nodes,
 * edges with their tensor shapes, and pan/zoom by drag and wheel. All labels are text nodes.
 */
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api";
import { svg } from "../dom";
import { fmtShape, fmtUs } from "../format";
import type { FusedGroup, FusedNode } from "../events";
import { fmtDb, type NodePrecision } from "../precision";
import { edgeLabelText, groupColour, groupStroke, type BuiltGraph } from "./build";
import { heatBand, heatInk, timeShares, UNTIMED_COLOUR } from "./heat";
import { minimap } from "./minimap";

/** How long after the last pan or zoom input the graph's text is drawn again (ms). */
export const MOVING_REST_MS = 150;

export interface DrawInput {
  laid: ElkNode;
  built: BuiltGraph;
  nodes: Map<string, FusedNode>;
  groups: Map<string, { group: FusedGroup; index: number }>;
  /** Measured time of each kernel in µs, where timed (shown on its group). */
  kernelUs: Map<string, number>;
  /** Each op node's precision and colour (precision.ts): int8 nodes painted by their SQNR. */
  precision?: Map<string, NodePrecision>;
  onSelect(id: string): void;
}

export interface Drawing {
  readonly svg: SVGSVGElement;
  /** The whole graph small, with the part in view framed (minimap.ts); the pane puts it in a corner. */
  readonly minimap: SVGSVGElement;
  /** Marks one box as selected (op id or `g:<group>`); returns its centre, if drawn. */
  select(id: string | null): { x: number; y: number } | null;
  centerOn(p: { x: number; y: number }): void;
  fit(): void;
  /** A readable start: the whole graph if it fits at 50% or more, else its top at 60-100%. */
  home(): void;
  zoomBy(f: number): void;
  /**
   * Shows each kernel's time (µs and share of the timed total) on its cluster, and with `heat`
   * paints the clusters by their share (heat.ts bands; untimed ones grey), else in group colours.
   * Called again as `kernel.timed` events arrive: in place, no new layout.
   */
  paintTimes(kernelUs: ReadonlyMap<string, number>, heat: boolean): void;
}

/**
 * Cuts the middle of `text` to what fits in `width` px at ~6.6 px a character. Cluster labels are
 * sized by ELK to their whole name (build.ts), so this only bites on a name wider than the layout
 * could give; the whole name is always in the cluster's tooltip.
 */
function fitText(text: string, width: number): string {
  const n = Math.max(4, Math.floor(width / 6.6));
  if (text.length <= n) return text;
  const tail = Math.ceil((n - 1) / 2);
  return `${text.slice(0, n - 1 - tail)}…${text.slice(text.length - tail)}`; // the end tells kernels apart
}

/**
 * The shape label of an edge in the box ELK reserved for it on the edge (no two labels and no
 * label and node overlap), over the edge's line; beside the edge's middle for a layout without one.
 */
function edgeLabel(e: ElkExtendedEdge, text: string, pts: { x: number; y: number }[], title: string): SVGGElement {
  const l = e.labels?.[0];
  let box: { x: number; y: number; w: number; h: number };
  if (l && l.x !== undefined && l.y !== undefined) box = { x: l.x, y: l.y, w: l.width ?? 0, h: l.height ?? 11 };
  else {
    const i = Math.floor(pts.length / 2);
    const mx = pts.length === 2 ? (pts[0].x + pts[1].x) / 2 : pts[i].x;
    const my = pts.length === 2 ? (pts[0].y + pts[1].y) / 2 : (pts[i].y + pts[Math.max(0, i - 1)].y) / 2;
    box = { x: mx + 4, y: my - 9, w: 0, h: 11 };
  }
  const parts: SVGElement[] = box.w ? [svg("rect", { x: box.x, y: box.y, width: box.w, height: box.h, rx: 2 })] : [];
  return svg("g", { class: "edge-label" }, ...parts,
    svg("text", { x: box.x + box.w / 2, y: box.y + box.h - 2.5, "text-anchor": box.w ? "middle" : "start" }, text),
    svg("title", {}, title));
}

export function draw(input: DrawInput): Drawing {
  const { laid, built, nodes, groups } = input;
  const root = svg("svg", { class: "graph-svg", role: "img", "aria-label": "Fusion graph" });
  const world = svg("g", { class: "graph-world" });
  const clusterLayer = svg("g");
  const edgeLayer = svg("g", { class: "edges" });
  const nodeLayer = svg("g", { class: "nodes" });
  world.append(clusterLayer, edgeLayer, nodeLayer);
  const defs = svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "6", markerHeight: "6", orient: "auto-start-reverse" }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" })));
  root.append(defs, world);
  const timeOf = (kernel: string) => {
    const us = input.kernelUs.get(kernel);
    return us === undefined ? "" : ` · ${fmtUs(us)}`;
  };
  const boxes = new Map<string, SVGGElement>();
  const centres = new Map<string, { x: number; y: number }>();
  /** Per kernel: its cluster's (or group box's) rect, its group index, and the text that shows its time. */
  const paintable = new Map<string, { rect: SVGElement; index: number; time: SVGElement; base: string }>();

  const box = (n: ElkNode, cls: string, fill: string, stroke: string, line1: string, line2: string, tip: string) => {
    const x = n.x ?? 0;
    const y = n.y ?? 0;
    const w = n.width ?? 0;
    const hgt = n.height ?? 0;
    const g = svg("g", { class: `gnode ${cls}`, transform: `translate(${x},${y})`, tabindex: "0", "data-id": n.id },
      svg("rect", { width: w, height: hgt, rx: 4, fill, stroke }),
      svg("text", { x: w / 2, y: 15, class: "gnode-op" }, line1),
      svg("text", { x: w / 2, y: 29, class: "gnode-name" }, line2.length > 44 ? `${line2.slice(0, 43)}…` : line2),
      svg("title", {}, tip),
    );
    g.addEventListener("click", (e) => {
      e.stopPropagation();
      input.onSelect(n.id);
    });
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter") input.onSelect(n.id);
    });
    boxes.set(n.id, g);
    centres.set(n.id, { x: x + w / 2, y: y + hgt / 2 });
    nodeLayer.appendChild(g);
  };

  const visit = (n: ElkNode) => {
    for (const c of n.children ?? []) {
      const kind = built.kinds.get(c.id);
      if (kind === "cluster") {
        const info = groups.get(c.id.slice(2));
        const i = info?.index ?? 0;
        const rect = svg("g", { class: "cluster", "data-id": c.id },
          svg("rect", { x: c.x ?? 0, y: c.y ?? 0, width: c.width ?? 0, height: c.height ?? 0, rx: 6, fill: groupColour(i), stroke: groupStroke(i) }),
          svg("text", { x: (c.x ?? 0) + (c.width ?? 0) / 2, y: (c.labels?.[0]?.y ?? c.y ?? 0) + 11, class: "cluster-label" }, fitText(info ? info.group.kernel : c.id, (c.width ?? 0) - 8)),
          svg("title", {}, info ? `${info.group.kernel} (${info.group.kind}, ${info.group.nodes.length} ops)${timeOf(info.group.kernel)}` : c.id),
        );
        rect.addEventListener("click", (e) => {
          e.stopPropagation();
          input.onSelect(c.id);
        });
        if (info) {
          const time = svg("text", { x: (c.x ?? 0) + (c.width ?? 0) - 4, y: (c.y ?? 0) + (c.height ?? 0) - 3, class: "cluster-time" }, "");
          rect.appendChild(time);
          paintable.set(info.group.kernel, { rect: rect.querySelector("rect") as SVGElement, index: i, time, base: "" });
        }
        clusterLayer.appendChild(rect);
        boxes.set(c.id, rect);
        centres.set(c.id, { x: (c.x ?? 0) + (c.width ?? 0) / 2, y: (c.y ?? 0) + (c.height ?? 0) / 2 });
        visit(c);
      } else if (kind === "group") {
        const info = groups.get(c.id.slice(2));
        const i = info?.index ?? 0;
        const ops = info ? info.group.nodes.map((id) => nodes.get(id)?.op_type ?? "?").join("+") : "";
        const kernel = info?.group.kernel ?? c.id;
        box(c, "group", groupColour(i), groupStroke(i), kernel, `${ops}${timeOf(kernel)}`, `${kernel}${info ? ` (${info.group.kind}, ${info.group.nodes.length} ops: ${ops})` : ""}${timeOf(kernel)}`);
        const g = boxes.get(c.id);
        if (g) paintable.set(kernel, { rect: g.querySelector("rect") as SVGElement, index: i, time: g.querySelector(".gnode-name") as SVGElement, base: ops });
      } else {
        const fn = nodes.get(c.id);
        const p = input.precision?.get(c.id);
        const ptip = p ? ` · ${p.precision}${p.sqnr_db !== null ? ` · SQNR ${fmtDb(p.sqnr_db)}` : ""}` : "";
        box(c, `op${p ? ` prec-${p.precision}` : ""}`, p?.colour ?? "#fff", p?.precision === "int8" ? "#2b5c8a" : "#667",
          fn?.op_type ?? "?", fn?.name ?? c.id, `${fn?.op_type ?? "?"} ${fn?.name ?? c.id}${ptip}`);
      }
    }
  };
  visit(laid);

  const edgeList: ElkExtendedEdge[] = [];
  const collect = (n: ElkNode) => {
    edgeList.push(...(n.edges ?? []));
    (n.children ?? []).forEach(collect);
  };
  collect(laid);
  const labelLayer = svg("g", { class: "edge-labels" });
  for (const e of edgeList) {
    const info = built.edges.get(e.id);
    const title = info ? `${info.value}: ${info.dtype}${fmtShape(info.shape)}${info.count > 1 ? ` (+${info.count - 1} more)` : ""}` : "";
    let pts: { x: number; y: number }[] = [];
    for (const s of e.sections ?? []) {
      pts = [s.startPoint, ...(s.bendPoints ?? []), s.endPoint];
      const d = pts.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
      edgeLayer.appendChild(svg("path", { d, class: "edge", "marker-end": "url(#arrow)" }, svg("title", {}, title)));
    }
    if (info && pts.length) labelLayer.appendChild(edgeLabel(e, edgeLabelText(info.shape), pts, title));
  }
  edgeLayer.appendChild(labelLayer);

  // Pan and zoom.
  let tx = 0;
  let ty = 0;
  let k = 1;
  const mini = minimap(laid, built, (id) => boxes.get(id)?.querySelector("rect")?.getAttribute("fill") ?? "#dde1e7", (x, y) => {
    const r = root.getBoundingClientRect();
    tx = r.width / 2 - x * k;
    ty = r.height / 2 - y * k;
    apply();
  });
  const apply = () => {
    world.setAttribute("transform", `translate(${tx},${ty}) scale(${k})`);
    root.classList.toggle("far", k < 0.55);
    const r = root.getBoundingClientRect();
    mini.setView(tx, ty, k, r.width, r.height);
  };
  const zoomAt = (f: number, cx: number, cy: number) => {
    const nk = Math.min(4, Math.max(0.02, k * f));
    tx = cx - ((cx - tx) * nk) / k;
    ty = cy - ((cy - ty) * nk) / k;
    k = nk;
    apply();
  };
  // While the user pans or zooms, text is not drawn (as Cytoscape.js's hideLabelsOnViewport): its
  // raster is most of a frame's cost on a large graph (DenseNet-121: about half); it returns
  // MOVING_REST_MS after the last input. Programmatic moves (fit, the buttons, the minimap) keep it.
  let rest = 0;
  const moving = () => {
    root.classList.add("moving");
    clearTimeout(rest);
    rest = window.setTimeout(() => root.classList.remove("moving"), MOVING_REST_MS);
  };
  root.addEventListener("wheel", (e) => {
    e.preventDefault();
    moving();
    const r = root.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag: { x: number; y: number; tx: number; ty: number } | null = null;
  root.addEventListener("pointerdown", (e) => {
    if ((e.target as Element).closest(".gnode")) return;
    drag = { x: e.clientX, y: e.clientY, tx, ty };
    root.setPointerCapture(e.pointerId);
  });
  root.addEventListener("pointermove", (e) => {
    if (!drag) return;
    moving();
    tx = drag.tx + e.clientX - drag.x;
    ty = drag.ty + e.clientY - drag.y;
    apply();
  });
  root.addEventListener("pointerup", () => (drag = null));

  let selected: string | null = null;
  return {
    svg: root,
    minimap: mini.el,
    paintTimes(kernelUs, heat) {
      const shares = timeShares(kernelUs);
      for (const [kernel, p] of paintable) {
        const us = kernelUs.get(kernel);
        const share = shares.get(kernel);
        const band = heatBand(share);
        p.rect.setAttribute("fill", heat ? (band?.colour ?? UNTIMED_COLOUR) : groupColour(p.index));
        p.rect.closest("g")?.classList.toggle("heat-dark", heat && heatInk(band) === "#fff");
        const text = us === undefined ? "" : `${fmtUs(us)} · ${(100 * (share ?? 0)).toFixed(share !== undefined && share < 0.1 ? 1 : 0)}%`;
        p.time.textContent = p.base ? (text ? `${p.base} · ${text}` : p.base) : text;
        if (band && heat) p.rect.closest("g")?.setAttribute("data-heat", band.label);
        else p.rect.closest("g")?.removeAttribute("data-heat");
      }
      mini.repaint();
    },
    select(id) {
      if (selected) boxes.get(selected)?.classList.remove("selected");
      selected = id;
      if (!id) return null;
      boxes.get(id)?.classList.add("selected");
      return centres.get(id) ?? null;
    },
    centerOn(p) {
      const r = root.getBoundingClientRect();
      k = Math.max(k, 0.8);
      tx = r.width / 2 - p.x * k;
      ty = r.height / 2 - p.y * k;
      apply();
    },
    fit() {
      const r = root.getBoundingClientRect();
      const w = laid.width ?? 1;
      const hh = laid.height ?? 1;
      k = Math.min(1.5, Math.max(0.02, Math.min((r.width || 800) / w, (r.height || 600) / hh) * 0.95));
      tx = ((r.width || 800) - w * k) / 2;
      ty = 10;
      apply();
    },
    home() {
      const r = root.getBoundingClientRect();
      const vw = r.width || 800;
      const vh = r.height || 600;
      const w = laid.width ?? 1;
      const all = Math.min(vw / w, vh / (laid.height ?? 1)) * 0.95;
      if (all >= 0.5) return this.fit();
      k = Math.max(0.6, Math.min(1, (vw / w) * 0.95));
      tx = Math.max(10, (vw - w * k) / 2);
      ty = 10;
      apply();
    },
    zoomBy(f) {
      const r = root.getBoundingClientRect();
      zoomAt(f, r.width / 2, r.height / 2);
    },
  };
}
