/// <reference lib="webworker" />
/**
 * Runs ELK off the main thread: receives `{id, graph}`, answers `{id, graph}` laid out or
 * `{id, error}`. elk.bundled.js runs its own code synchronously inside this worker.
 */
import ELK from "elkjs/lib/elk.bundled.js";
import type { ElkNode } from "elkjs/lib/elk-api";

const elk = new ELK();

self.onmessage = async (m: MessageEvent<{ id: number; graph: ElkNode }>) => {
  const { id, graph } = m.data;
  const t0 = performance.now();
  try {
    const out = await elk.layout(graph);
    (self as unknown as Worker).postMessage({ id, graph: out, ms: performance.now() - t0 });
  } catch (e) {
    (self as unknown as Worker).postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
};
