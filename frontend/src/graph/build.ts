/**
 * The fusion graph as an ELK graph (elkjs JSON), pure: the layout worker lays it out, the
 * graph pane draws it. Fused groups become compound nodes (clusters) holding their ops, or,
 * collapsed, one node per group so that very large models stay quick to lay out and draw.
 */
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api";
import type { Dim, GraphFused } from "../events";

export const NODE_H = 36;
const CHAR_W = 7.2;

export interface EdgeInfo {
  value: string;
  dtype: string;
  shape: Dim[];
  /** Number of graph edges merged into this one (collapsed view). */
  count: number;
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
  "elk.layered.spacing.nodeNodeBetweenLayers": "28",
  "elk.spacing.nodeNode": "18",
  "elk.padding": "[top=24,left=10,bottom=10,right=10]",
  "elk.edgeRouting": "POLYLINE",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.layered.crossingMinimization.strategy": "LAYER_SWEEP",
  "elk.layered.thoroughness": "3",
  "elk.json.shapeCoords": "ROOT",
  "elk.json.edgeCoords": "ROOT",
};

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
      rootChildren.push({ id, children: members.map(opNode), layoutOptions: { "elk.padding": "[top=22,left=8,bottom=8,right=8]" } });
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
    elkEdges.push({ id, sources: [s], targets: [t] });
  });
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
