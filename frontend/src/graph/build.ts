/**
 * The fusion graph as an ELK graph (elkjs JSON), pure: the layout worker lays it out, the
 * graph pane draws it. Fused groups become compound nodes (clusters) holding their ops, or,
 * collapsed, one node per group so that very large models stay quick to lay out and draw.
 * Each edge carries its shape as a label that ELK places (so labels never overlap), and each
 * cluster its kernel name as a label it is made wide enough for.
 */
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api";
import type { Dim, GraphFused } from "../events";

export const NODE_H = 36;
const CHAR_W = 7.2;
/** Edge labels: 9 px monospace, about 5.5 px a character (render.ts draws them at ELK's positions). */
const LABEL_CHAR_W = 5.5;
export const EDGE_LABEL_H = 11;
/** Cluster labels: 11 px bold sans, at most about 7 px a character. */
const CLUSTER_CHAR_W = 7;
export const CLUSTER_LABEL_H = 14;

export interface EdgeInfo {
  value: string;
  dtype: string;
  shape: Dim[];
  /** Number of graph edges merged into this one (collapsed view). */
  count: number;
}

/** An edge's label: the tensor shape, compact (`1×64×55×55`, `?` for an unknown dim; scalar `[]`). */
export function edgeLabelText(shape: Dim[]): string {
  return shape.length ? shape.map((d) => (d === null ? "?" : String(d))).join("×") : "[]";
}

export function edgeLabelWidth(text: string): number {
  return Math.ceil(4 + LABEL_CHAR_W * text.length);
}

/** Width a cluster needs for its whole kernel name (centred, 6 px to spare on each side). */
export function clusterLabelWidth(text: string): number {
  return Math.ceil(12 + CLUSTER_CHAR_W * text.length);
}

export interface BuiltGraph {
  root: ElkNode;
  /** Edge id -> tensor it carries. */
  edges: Map<string, EdgeInfo>;
  /** Node id (fused node id or `g:<group id>`) -> kind of box. */
  kinds: Map<string, "op" | "group" | "cluster">;
}

export function nodeWidth(...lines: string[]): number {
  return Math.max(60, Math.min(320, 16 + CHAR_W * Math.max(...lines.map((l) => l.length))));
}

export const LAYOUT_OPTIONS: Record<string, string> = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.spacing.nodeNode": "18",
  "elk.padding": "[top=24,left=10,bottom=10,right=10]",
  "elk.edgeRouting": "POLYLINE",
  // Every edge carries its shape as an inline label (EDGE_LABEL_OPTIONS): ELK lays it out as a box
  // of its own between the layers, so no two labels and no label and node overlap; the layers are
  // spaced for that (a label adds a layer, so the gaps around it are kept small).
  "elk.layered.spacing.nodeNodeBetweenLayers": "16",
  "elk.layered.spacing.edgeNodeBetweenLayers": "4",
  "elk.layered.spacing.edgeEdgeBetweenLayers": "4",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.layered.crossingMinimization.strategy": "LAYER_SWEEP",
  "elk.layered.thoroughness": "3",
  "elk.json.shapeCoords": "ROOT",
  "elk.json.edgeCoords": "ROOT",
};

/** Above this many edges, shape labels get no room of their own in the layout (time). */
export const LABELLED_EDGES_MAX = 1500;

/** An edge label's options: centred on its edge (the edge runs through it; render.ts paints it over). */
export const EDGE_LABEL_OPTIONS: Record<string, string> = { "elk.edgeLabels.inline": "true", "elk.edgeLabels.placement": "CENTER" };

/**
 * A cluster's options: its name centred at the top, inside (ELK reserves the room above the ops),
 * room at the bottom for its kernel's time (render.ts paintTimes), and side padding `side` px. ELK ignores a minimum size on a cluster laid out with its parent
 * (INCLUDE_CHILDREN), so the padding is what makes a cluster as wide as its name.
 */
function clusterOptions(side: number): Record<string, string> {
  return {
    "elk.padding": `[top=6,left=${side},bottom=15,right=${side}]`,
    "elk.nodeLabels.placement": "[H_CENTER, V_TOP, INSIDE]",
  };
}

const MIN_SIDE = 8;

/** Side padding for a cluster whose name is `labelW` wide over content about `contentW` wide. */
function sidePadding(labelW: number, contentW: number): number {
  return Math.max(MIN_SIDE, Math.ceil((labelW - contentW) / 2));
}

/**
 * After a layout: widens (in `input`, by side padding) each cluster that came out narrower than
 * its name needs, so the next layout of `input` fits every name. Returns whether any changed.
 */
export function widenNarrowClusters(laid: ElkNode, input: ElkNode): boolean {
  const widths = new Map<string, number>();
  const walk = (n: ElkNode) => (n.children ?? []).forEach((c) => {
    if (c.children?.length) widths.set(c.id, c.width ?? 0);
    walk(c);
  });
  walk(laid);
  let changed = false;
  const fix = (n: ElkNode) => (n.children ?? []).forEach((c) => {
    const label = c.labels?.[0];
    const w = widths.get(c.id);
    if (label && w !== undefined && w < clusterLabelWidth(label.text ?? "")) {
      const m = /left=(\d+)/.exec(String(c.layoutOptions?.["elk.padding"] ?? ""));
      const side = (m ? Number(m[1]) : MIN_SIDE) + Math.ceil((clusterLabelWidth(label.text ?? "") - w) / 2);
      c.layoutOptions = { ...c.layoutOptions, ...clusterOptions(side) };
      changed = true;
    }
    fix(c);
  });
  fix(input);
  return changed;
}

/**
 * Lays out `graph` with `layout` (ELK's), then again with the clusters that came out narrower than
 * their names widened (at most twice; a copy of `graph` is laid out each time).
 */
export async function layoutFitting(layout: (g: ElkNode) => Promise<ElkNode>, graph: ElkNode): Promise<ElkNode> {
  const input = structuredClone(graph);
  let out = await layout(structuredClone(input));
  for (let i = 0; i < 2 && widenNarrowClusters(out, input); i++) out = await layout(structuredClone(input));
  return out;
}

/** Ops inside clusters, or one box per group when `collapse` is true. */
export function buildElkGraph(g: GraphFused, collapse: boolean): BuiltGraph {
  const kinds = new Map<string, "op" | "group" | "cluster">();
  const edges = new Map<string, EdgeInfo>();
  const nodeGroup = new Map<string, string | null>();
  const groupIds = new Set(g.groups.map((x) => x.id));
  for (const n of g.nodes) nodeGroup.set(n.id, n.group !== null && groupIds.has(n.group) ? n.group : null);
  const opNode = (n: GraphFused["nodes"][number]): ElkNode => {
    kinds.set(n.id, "op");
    return { id: n.id, width: nodeWidth(n.op_type, n.name), height: NODE_H };
  };
  const rootChildren: ElkNode[] = [];
  const byGroup = new Map<string, GraphFused["nodes"]>();
  for (const n of g.nodes) {
    const gid = nodeGroup.get(n.id);
    if (gid) byGroup.set(gid, [...(byGroup.get(gid) ?? []), n]);
    else rootChildren.push(opNode(n));
  }
  for (const grp of g.groups) {
    const id = `g:${grp.id}`;
    const members = byGroup.get(grp.id) ?? [];
    if (collapse) {
      kinds.set(id, "group");
      const ops = members.map((m) => m.op_type).join("+");
      rootChildren.push({ id, width: nodeWidth(grp.kernel, ops.length > 40 ? `${ops.slice(0, 40)}…` : ops), height: NODE_H });
    } else {
      kinds.set(id, "cluster");
      // The kernel name is the cluster's label; the side padding makes room for all of it over
      // the widest member or inner edge label (widenNarrowClusters corrects a wrong guess).
      const w = clusterLabelWidth(grp.kernel);
      const children = members.map(opNode);
      const inner = new Set(members.map((m) => m.id));
      const labelWs = g.edges.filter((e) => inner.has(e.source) && inner.has(e.target)).map((e) => edgeLabelWidth(edgeLabelText(e.shape)));
      const contentW = Math.max(0, ...children.map((c) => c.width ?? 0), ...labelWs);
      rootChildren.push({
        id,
        children,
        labels: [{ id: `${id}:label`, text: grp.kernel, width: w - 12, height: CLUSTER_LABEL_H }],
        layoutOptions: clusterOptions(sidePadding(w, contentW)),
      });
    }
  }
  const endpoint = (nodeId: string): string | null => {
    if (!nodeGroup.has(nodeId)) return null;
    const gid = nodeGroup.get(nodeId);
    return collapse && gid ? `g:${gid}` : nodeId;
  };
  const elkEdges: ElkExtendedEdge[] = [];
  const seen = new Map<string, string>();
  g.edges.forEach((e, i) => {
    const s = endpoint(e.source);
    const t = endpoint(e.target);
    if (s === null || t === null || s === t) return;
    const key = `${s}\u0000${t}\u0000${e.value}`;
    const pairKey = `${s}\u0000${t}`;
    const existing = seen.get(collapse ? pairKey : key);
    if (existing) {
      const info = edges.get(existing);
      if (info) info.count++;
      return;
    }
    const id = `e${i}`;
    seen.set(collapse ? pairKey : key, id);
    edges.set(id, { value: e.value, dtype: e.dtype, shape: e.shape, count: 1 });
    const text = edgeLabelText(e.shape);
    elkEdges.push({ id, sources: [s], targets: [t], labels: [{ id: `${id}:label`, text, width: edgeLabelWidth(text), height: EDGE_LABEL_H, layoutOptions: EDGE_LABEL_OPTIONS }] });
  });
  // A label is a node more for ELK: past LABELLED_EDGES_MAX edges the layout would take twice as
  // long, so the labels are left out of it (render.ts then draws each beside its edge's middle).
  if (elkEdges.length > LABELLED_EDGES_MAX) for (const e of elkEdges) delete e.labels;
  return { root: { id: "root", layoutOptions: LAYOUT_OPTIONS, children: rootChildren, edges: elkEdges }, edges, kinds };
}

/** A distinct colour per group index (golden-angle hue steps). */
export function groupColour(index: number): string {
  const hue = (index * 137.508) % 360;
  return `hsl(${hue.toFixed(1)}, 70%, 88%)`;
}

export function groupStroke(index: number): string {
  const hue = (index * 137.508) % 360;
  return `hsl(${hue.toFixed(1)}, 55%, 45%)`;
}
