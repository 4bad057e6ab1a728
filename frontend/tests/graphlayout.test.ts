/**
 * The fusion graph's layout with ELK itself (elk.bundled.js, as the layout worker runs it): shape
 * labels get boxes of their own, and every cluster is wide enough for its whole kernel name.
 */
import { describe, expect, it } from "vitest";
import ELK from "elkjs/lib/elk.bundled.js";
import type { ElkNode } from "elkjs/lib/elk-api";
import { buildElkGraph, clusterLabelWidth, edgeLabelText, LABELLED_EDGES_MAX, layoutFitting, widenNarrowClusters } from "../src/graph/build";
import type { GraphFused } from "../src/events";

/**
 * SqueezeNet's shape: a stem, then `fires` fire modules (squeeze Conv+Relu, two expand Conv+Relu
 * branches, a Concat of both), each op group a cluster with a long kernel name.
 */
export function fireGraph(fires: number): GraphFused {
  const nodes: GraphFused["nodes"] = [];
  const edges: GraphFused["edges"] = [];
  const groups: GraphFused["groups"] = [];
  let n = 0;
  const group = (kernel: string, ops: string[]): string[] => {
    const gid = `g${groups.length}`;
    const ids = ops.map((op) => {
      const id = `n${n++}`;
      nodes.push({ id, name: `${op.toLowerCase()}_${id}`, op_type: op, group: gid });
      return id;
    });
    groups.push({ id: gid, kernel: `${kernel}_${groups.length}`, kind: "out-elementwise-fusable", nodes: ids });
    for (let i = 1; i < ids.length; i++) edges.push({ source: ids[i - 1], target: ids[i], value: `${ids[i - 1]}_out`, dtype: "float32", shape: [1, 64, 111, 111] });
    return ids;
  };
  const link = (a: string, b: string, shape: number[]) => edges.push({ source: a, target: b, value: `${a}_out`, dtype: "float32", shape });
  let prev = group("fused_conv2d_relu", ["Conv", "Relu"]).at(-1)!;
  for (let f = 0; f < fires; f++) {
    const squeeze = group("fused_conv2d_relu", ["Conv", "Relu"]);
    const left = group("fused_conv2d_relu", ["Conv", "Relu"]);
    const right = group("fused_conv2d_relu", ["Conv", "Relu"]);
    const cat = group("fused_concat", ["Concat"]);
    link(prev, squeeze[0], [1, 128, 55, 55]);
    link(squeeze[1], left[0], [1, 16, 55, 55]);
    link(squeeze[1], right[0], [1, 16, 55, 55]);
    link(left[1], cat[0], [1, 64, 55, 55]);
    link(right[1], cat[0], [1, 64, 55, 55]);
    prev = cat[0];
  }
  return { seq: 0, ts: 0, type: "graph.fused", nodes, edges, groups };
}

interface Box { id: string; x: number; y: number; w: number; h: number }

const overlap = (a: Box, b: Box) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** Edge label boxes, op boxes, cluster label boxes and clusters of a laid-out graph. */
function boxes(laid: ElkNode) {
  const labels: Box[] = [];
  const ops: Box[] = [];
  const clusters: (Box & { name: string })[] = [];
  const visit = (n: ElkNode) => {
    for (const c of n.children ?? []) {
      if (c.children?.length) {
        const l = c.labels?.[0];
        clusters.push({ id: c.id, x: c.x!, y: c.y!, w: c.width!, h: c.height!, name: l?.text ?? "" });
        if (l) ops.push({ id: `${c.id}:label`, x: l.x!, y: l.y!, w: l.width!, h: l.height! });
        visit(c);
      } else ops.push({ id: c.id, x: c.x!, y: c.y!, w: c.width!, h: c.height! });
    }
    for (const e of n.edges ?? []) for (const l of e.labels ?? []) labels.push({ id: e.id, x: l.x!, y: l.y!, w: l.width!, h: l.height! });
  };
  visit(laid);
  return { labels, ops, clusters };
}

const layout = (root: ElkNode) => {
  const elk = new ELK();
  return layoutFitting((g) => elk.layout(g), root);
};

describe("fusion graph layout", () => {
  it("gives every shape label its own box: no two overlap, none covers an op or a cluster name", async () => {
    const g = fireGraph(4);
    const laid = await layout(buildElkGraph(g, false).root);
    const { labels, ops } = boxes(laid);
    expect(labels).toHaveLength(g.edges.length);
    for (const l of labels) expect(Number.isFinite(l.x) && Number.isFinite(l.y) && l.w > 0).toBe(true);
    const hits: string[] = [];
    labels.forEach((a, i) => {
      for (const b of labels.slice(i + 1)) if (overlap(a, b)) hits.push(`${a.id}/${b.id}`);
      for (const o of ops) if (overlap(a, o)) hits.push(`${a.id}/${o.id}`);
    });
    expect(hits).toEqual([]);
  }, 60000);

  it("makes every cluster as wide as its whole kernel name", async () => {
    const g = fireGraph(3);
    g.groups[5].kernel = "fused_conv2d_batch_normalization_relu_with_a_long_name_5";
    const { clusters } = boxes(await layout(buildElkGraph(g, false).root));
    expect(clusters.map((c) => c.name).sort()).toEqual(g.groups.map((x) => x.kernel).sort());
    for (const c of clusters) expect(c.w, c.name).toBeGreaterThanOrEqual(clusterLabelWidth(c.name));
  }, 60000);

  it("widens a cluster that came out narrower than its name, and only then", async () => {
    const g = fireGraph(1);
    const root = buildElkGraph(g, false).root;
    const laid = await new ELK().layout(structuredClone(root));
    expect(widenNarrowClusters(laid, structuredClone(root))).toBe(false);
    const squeezed = structuredClone(laid);
    squeezed.children![0].width = 40;
    const input = structuredClone(root);
    expect(widenNarrowClusters(squeezed, input)).toBe(true);
    expect(String(input.children![0].layoutOptions?.["elk.padding"])).not.toBe(String(root.children![0].layoutOptions?.["elk.padding"]));
  }, 60000);

  it("labels a collapsed graph's edges too, and leaves labels out of very large layouts", () => {
    const small = buildElkGraph(fireGraph(2), true).root;
    expect(small.edges!.every((e) => e.labels?.length === 1)).toBe(true);
    const big = buildElkGraph(fireGraph(Math.ceil(LABELLED_EDGES_MAX / 7) + 1), false).root;
    expect(big.edges!.length).toBeGreaterThan(LABELLED_EDGES_MAX);
    expect(big.edges!.some((e) => e.labels?.length)).toBe(false);
  });
});

describe("edgeLabelText", () => {
  it("writes a shape compactly, unknown dims as ?", () => {
    expect(edgeLabelText([1, 64, 55, 55])).toBe("1×64×55×55");
    expect(edgeLabelText([null, "N", 3])).toBe("?×N×3");
    expect(edgeLabelText([])).toBe("[]");
  });
});
