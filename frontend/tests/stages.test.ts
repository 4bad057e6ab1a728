import { describe, expect, it } from "vitest";
import { reduce, reduceAll } from "../src/state";
import { stageProgress, stageStatus } from "../src/stages";
import type { CompileEvent } from "../src/events";
import { EVENTS } from "./fixture";

/**
 * A log that fails at run, as a crash of the generated code before the first kernel gives it
 * (compiler.runtime.process.run_child): three fused groups lowered and compiled, none timed.
 */
function failedAtRun(): CompileEvent[] {
  const head = EVENTS.slice(0, 5); // started, two passes
  const fused: CompileEvent = {
    seq: 5, type: "graph.fused", ts: 1005,
    nodes: ["a", "b", "c"].map((x, i) => ({ id: `n${i}`, name: x, op_type: "Relu", group: `g${i}` })),
    edges: [],
    groups: [0, 1, 2].map((i) => ({ id: `g${i}`, kernel: `k${i}`, kind: "elementwise", nodes: [`n${i}`] })),
  };
  const out: CompileEvent[] = [...head, fused];
  for (const i of [0, 1, 2]) out.push({ seq: out.length, type: "kernel.lowered", ts: 1006, kernel: `k${i}`, group: `g${i}`, loop_ir: "", schedule: [] });
  for (const i of [0, 1, 2]) out.push({ seq: out.length, type: "kernel.compiled", ts: 1007, kernel: `k${i}`, llvm_ir: "", llvm_ir_optimized: "", asm: "", compile_ms: 1 });
  out.push({ seq: out.length, type: "compile.failed", ts: 1008, stage: "run", message: "generated code crashed before the first kernel: exited with status 1" });
  return out;
}

const statuses = (events: CompileEvent[]) => stageStatus(reduceAll(events));

describe("stage strip", () => {
  it("on a compilation that failed at run: earlier stages done with their counts, run failed with none timed, verify not reached", () => {
    const p = stageProgress(reduceAll(failedAtRun()));
    expect(p).toEqual({
      import: { status: "done", detail: "" },
      passes: { status: "done", detail: "2/2" },
      lowering: { status: "done", detail: "3/3" },
      codegen: { status: "done", detail: "3/3" },
      run: { status: "failed", detail: "0/3 timed" },
      verify: { status: "unreached", detail: "" },
    });
  });

  it("is the same live, event by event, at the end, as on the reopened page (any order)", () => {
    const log = failedAtRun();
    let s = reduceAll([]);
    const seen: string[] = [];
    for (const e of log) {
      s = reduce(s, e);
      const st = stageStatus(s);
      seen.push(Object.values(st).join(","));
      // Live, never a done stage after one that is not done, never two running.
      const v = Object.values(st);
      expect(v.filter((x) => x === "running").length).toBeLessThanOrEqual(1);
      const firstNotDone = v.findIndex((x) => x !== "done");
      if (firstNotDone >= 0) expect(v.slice(firstNotDone).includes("done")).toBe(false);
    }
    expect(seen[1]).toBe("done,running,waiting,waiting,waiting,waiting"); // pass 0 started
    expect(seen[7]).toBe("done,done,running,waiting,waiting,waiting"); // 2 of 3 kernels lowered
    expect(seen[9]).toBe("done,done,done,running,waiting,waiting"); // 1 of 3 compiled
    const reopened = stageProgress(reduceAll([...log].reverse()));
    expect(stageProgress(s)).toEqual(reopened);
  });

  it("shows partial counts on the stage that failed and nothing on those not reached", () => {
    const log = failedAtRun().slice(0, 8); // started, passes, fused, two of three lowered
    log.push({ seq: 8, type: "compile.failed", ts: 2, stage: "lowering", message: "no lowering for If", node: "c", op: "If" });
    const p = stageProgress(reduceAll(log));
    expect(p.lowering).toEqual({ status: "failed", detail: "2/3" });
    expect([p.codegen.status, p.run.status, p.verify.status]).toEqual(["unreached", "unreached", "unreached"]);
    expect(p.codegen.detail + p.run.detail).toBe("");
  });

  it("puts a failure outside the six stages on the first incomplete one", () => {
    const log: CompileEvent[] = [EVENTS[0], EVENTS[1], { seq: 2, type: "compile.failed", ts: 2, stage: "shape", message: "cannot infer" }];
    expect(statuses(log)).toEqual({ import: "done", passes: "failed", lowering: "unreached", codegen: "unreached", run: "unreached", verify: "unreached" });
    const atImport: CompileEvent[] = [{ seq: 0, type: "compile.failed", ts: 2, stage: "import", message: "not ONNX" }];
    expect(Object.values(statuses(atImport))).toEqual(["failed", "unreached", "unreached", "unreached", "unreached", "unreached"]);
  });

  it("marks no stage failed when the job was lost from the queue before the compiler started", () => {
    const lost: CompileEvent[] = [{ seq: 0, type: "compile.failed", ts: 2, stage: "queue", message: "lost 3 times", reason: "queue_lost" } as CompileEvent];
    expect(Object.values(statuses(lost))).toEqual(Array(6).fill("unreached"));
  });

  it("marks a stage that produced nothing before the failure as skipped, not done", () => {
    // Benchmark off: no run events; verification fails to run.
    const log = failedAtRun().slice(0, -1);
    log.push({ seq: log.length, type: "compile.failed", ts: 3, stage: "verify", message: "ONNX Runtime failed" });
    const st = statuses(log);
    expect(st.run).toBe("skipped");
    expect(st.verify).toBe("failed");
  });

  it("says how verification came out on a finished compilation", () => {
    const p = stageProgress(reduceAll(EVENTS));
    expect(p.verify).toEqual({ status: "done", detail: "passed" });
    expect(p.run).toEqual({ status: "done", detail: "1/1 timed" });
    const mismatch = EVENTS.map((e) => (e.type === "model.verified" ? { ...e, passed: false } : e));
    expect(stageProgress(reduceAll(mismatch)).verify.detail).toBe("mismatch");
  });

  it("waits before any event", () => {
    expect(Object.values(statuses([]))).toEqual(Array(6).fill("waiting"));
  });
});
