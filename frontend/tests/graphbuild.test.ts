import { describe, expect, it } from "vitest";
import ELK from "elkjs/lib/elk.bundled.js";
import { buildElkGraph } from "../src/graph/build";
import { reduceAll } from "../src/state";
import type { GraphFused } from "../src/events";
import { EVENTS } from "./fixture";

/** A DenseNet-like graph: blocks of BN-Relu-Conv whose inputs are Concats of all earlier outputs. */
export function denseGraph(blocks: number): GraphFused {
  const nodes: GraphFused["nodes"] = [];
  const edges: GraphFused["edges"] = [];
  const groups: GraphFused["groups"] = [];
  let prev = "n_in";
  nodes.push({ id: "n_in", name: "conv0", op_type: "Conv", group: null });
  const outs: string[] = [prev];
  for (let b = 0; b < blocks; b++) {
    const ids = ["cat", "bn", "relu", "conv"].map((k) => `n_${k}${b}`);
    ["Concat", "BatchNormalization", "Relu", "Conv"].forEach((op, i) => nodes.push({ id: ids[i], name: `${op}_${b}`, op_type: op, group: i === 0 ? null : `g${b}` }));
    groups.push({ id: `g${b}`, kernel: `fused_bn_relu_conv_${b}`, kind: "injective", nodes: ids.slice(1) });
    for (const o of outs.slice(-6)) edges.push({ source: o, target: ids[0], value: `${o}_out`, dtype: "float32", shape: [1, 32, 56, 56] });
    for (let i = 1; i < 4; i++) edges.push({ source: ids[i - 1], target: ids[i], value: `${ids[i - 1]}_out`, dtype: "float32", shape: [1, 32, 56, 56] });
    outs.push(ids[3]);
    prev = ids[3];
  }
  return { seq: 0, ts: 0, type: "graph.fused", nodes, edges, groups };
}

describe("buildElkGraph", () => {
  it("puts grouped ops in clusters", () => {
    const g = reduceAll(EVENTS).fusion!;
    const b = buildElkGraph(g, false);
    expect(b.root.children?.map((c) => c.id)).toEqual(["g:g0"]);
    expect(b.root.children?.[0].children?.map((c) => c.id)).toEqual(["n0", "n1"]);
    expect(b.root.edges).toHaveLength(1);
    expect(b.edges.get("e0")?.shape).toEqual([1, 8, 16, 16]);
  });

  it("collapses groups into one node and merges their edges", () => {
    const g = denseGraph(10);
    const b = buildElkGraph(g, true);
    const kinds = [...b.kinds.values()];
    expect(kinds.filter((k) => k === "group")).toHaveLength(10);
    expect(kinds.filter((k) => k === "op")).toHaveLength(11);
    // No edge stays inside a group, and no two edges join the same pair.
    const pairs = b.root.edges!.map((e) => `${e.sources[0]}>${e.targets[0]}`);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(pairs.some((p) => p.split(">")[0] === p.split(">")[1])).toBe(false);
  });

  it("lays out a 1,700-node graph", async () => {
    const g = denseGraph(425);
    expect(g.nodes.length).toBeGreaterThan(1700);
    const t = performance.now();
    const out = await new ELK().layout(buildElkGraph(g, true).root);
    const ms = performance.now() - t;
    console.log(`collapsed layout of ${g.nodes.length} nodes: ${ms.toFixed(0)} ms`);
    expect(out.width).toBeGreaterThan(0);
  }, 120000);
});
