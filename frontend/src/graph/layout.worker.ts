/// <reference lib="webworker" />
/**
 * Runs ELK off the main thread: receives `{id, graph}`, answers `{id, graph}` laid out or
 * `{id, error}`. elk.bundled.js runs its own code synchronously inside this worker. A layout in
 * which a cluster came out narrower than its name is redone with that cluster widened.
 */
import ELK from "elkjs/lib/elk.bundled.js";
import type { ElkNode } from "elkjs/lib/elk-api";
import { layoutFitting } from "./build";

const elk = new ELK();

self.onmessage = async (m: MessageEvent<{ id: number; graph: ElkNode }>) => {
  const { id, graph } = m.data;
  const t0 = performance.now();
  try {
    const out = await layoutFitting((g) => elk.layout(g), graph);
    (self as unknown as Worker).postMessage({ id, graph: out, ms: performance.now() - t0 });
  } catch (e) {
    (self as unknown as Worker).postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
};
