/**
 * The fusion graph's minimap: the whole laid-out graph in a corner (fused groups and loose op
 * nodes as boxes, the time colours included), the part in view as a frame; a click or a drag on
 * it moves the view there.
 */
import type { ElkNode } from "elkjs/lib/elk-api";
import { svg } from "../dom";
import type { BuiltGraph } from "./build";

const WIDTH = 180;
const MAX_HEIGHT = 140;

export interface Minimap {
  readonly el: SVGSVGElement;
  /** The view: its transform (translate tx, ty then scale k) and size in screen px. */
  setView(tx: number, ty: number, k: number, width: number, height: number): void;
  /** Reads each box's fill again (after the heat map repainted the graph). */
  repaint(): void;
}

/** `jump(x, y)` centres the view on a point of the graph (graph coordinates). */
export function minimap(laid: ElkNode, built: BuiltGraph, boxFill: (id: string) => string, jump: (x: number, y: number) => void): Minimap {
  const w = Math.max(1, laid.width ?? 1);
  const hgt = Math.max(1, laid.height ?? 1);
  const s = Math.min(WIDTH / w, MAX_HEIGHT / hgt);
  const el = svg("svg", { class: "graph-minimap", width: Math.ceil(w * s), height: Math.ceil(hgt * s), viewBox: `0 0 ${w} ${hgt}`, "aria-label": "Minimap" });
  const rects: [string, SVGElement][] = [];
  for (const c of laid.children ?? []) {
    const kind = built.kinds.get(c.id);
    const r = svg("rect", { x: c.x ?? 0, y: c.y ?? 0, width: c.width ?? 0, height: c.height ?? 0, fill: boxFill(c.id), class: `mm-${kind ?? "op"}` });
    rects.push([c.id, r]);
    el.appendChild(r);
  }
  const frame = svg("rect", { class: "mm-view", x: 0, y: 0, width: w, height: hgt });
  el.appendChild(frame);
  const at = (e: PointerEvent) => {
    const r = el.getBoundingClientRect();
    jump(((e.clientX - r.left) / r.width) * w, ((e.clientY - r.top) / r.height) * hgt);
  };
  let dragging = false;
  el.addEventListener("pointerdown", (e) => {
    e.stopPropagation();
    dragging = true;
    el.setPointerCapture(e.pointerId);
    at(e);
  });
  el.addEventListener("pointermove", (e) => dragging && at(e));
  el.addEventListener("pointerup", () => (dragging = false));
  return {
    el,
    repaint() {
      for (const [id, r] of rects) r.setAttribute("fill", boxFill(id));
    },
    setView(tx, ty, k, vw, vh) {
      frame.setAttribute("x", String(-tx / k));
      frame.setAttribute("y", String(-ty / k));
      frame.setAttribute("width", String(Math.max(0, vw / k)));
      frame.setAttribute("height", String(Math.max(0, vh / k)));
    },
  };
}
