// @vitest-environment happy-dom
/** Precision: node colours from op types and the accuracy report, the layer table's sort, the pipeline
 * that keeps one layer in FP32, and the summary's precision card (speed beside accuracy). */
import { describe, expect, it } from "vitest";
import type { CompileEvent, FusedNode, ModelAccuracy, ModelTimed } from "../src/events";
import { summaryPane } from "../src/panes/summary";
import { excludePipeline, fmtDb, layerRows, nodePrecisions, opPrecision, precisionPipeline, sortRows, sqnrColour, SQNR_BANDS } from "../src/precision";
import { reduceAll } from "../src/state";
import { EVENTS } from "./fixture";

const ACC: ModelAccuracy = {
  seq: 0, type: "model.accuracy", ts: 0, dtype: "int8", method: "QDQ model in ONNX Runtime ...", samples: 8,
  calibration: { method: "minmax", samples: 8, random: false, activation: "u8", per_channel: true },
  layers: [
    { node: "conv1", op: "Conv", output: "r1", precision: "int8", sqnr_db: 38.0, max_abs_error: 0.09 },
    { node: "conv2", op: "Conv", output: "c2", precision: "int8", sqnr_db: 12.5, max_abs_error: 0.5 },
    { node: "fc", op: "Gemm", output: null, precision: "int8", sqnr_db: null, max_abs_error: null },
    { node: "add", op: null, output: null, precision: "fp32", sqnr_db: null, max_abs_error: null },
  ],
  outputs: { y: { sqnr_db: 39.29, max_abs_error: 0.04, max_rel_error: 0.2, top1: 1, top5: 1 } },
  criterion: { min_sqnr_db: 20, min_top1: 0.99, passed: true, reasons: [] },
  fallbacks: [{ node: "add", layer_sqnr_db: 8.1, output_sqnr_db_before: 15.2, output_sqnr_db_after: 39.29, passed: true }],
};

const node = (id: string, op_type: string): FusedNode => ({ id, name: id, op_type, group: null });

describe("precision of nodes", () => {
  it("integer ops are int8 painted by SQNR, Q/DQ convert, a layer kept in FP32 is fp32", () => {
    expect(opPrecision("QLinearConv")).toBe("int8");
    expect(opPrecision("QuantizeLinear")).toBe("convert");
    expect(opPrecision("Softmax")).toBe("fp32");
    const m = nodePrecisions([node("conv1", "QLinearConv"), node("conv2", "QLinearConv"), node("add", "Add"), node("q", "QuantizeLinear")], ACC);
    expect(m.get("conv1")).toEqual({ precision: "int8", sqnr_db: 38, colour: SQNR_BANDS[1].colour });
    expect(m.get("conv2")?.colour).toBe(SQNR_BANDS[3].colour);
    expect(m.get("add")?.precision).toBe("fp32");
    expect(m.get("q")?.precision).toBe("convert");
    expect(sqnrColour(45)).toBe(SQNR_BANDS[0].colour);
    expect(sqnrColour(5)).toBe(SQNR_BANDS[4].colour);
    expect(fmtDb(999)).toBe("equal");
  });
});

describe("bf16 / fp16 layers", () => {
  it("a Conv the report computed in bf16 is bf16, painted by its SQNR; the legend names bf16 and no Q/DQ", async () => {
    const bf: ModelAccuracy = { ...ACC, dtype: "bf16", fallbacks: [], layers: [
      { node: "conv1", op: "Conv", output: "c1", precision: "bf16", sqnr_db: 47.2, max_abs_error: 0.01 },
      { node: "fc", op: "Gemm", output: "y", precision: "fp32", sqnr_db: null, max_abs_error: null }] };
    const m = nodePrecisions([node("conv1", "Conv"), node("fc", "Gemm"), node("relu", "Relu")], bf);
    expect(m.get("conv1")).toEqual({ precision: "bf16", sqnr_db: 47.2, colour: SQNR_BANDS[0].colour });
    expect(m.get("fc")?.precision).toBe("fp32");
    expect(m.get("relu")?.precision).toBe("fp32");
    const { precisionLegend } = await import("../src/panes/graph");
    const text = precisionLegend("bf16").map((e) => e.textContent).join(" ");
    expect(text).toContain("bf16 ≥ 40 dB");
    expect(text).not.toContain("quantize / dequantize");
  });
});

describe("layer table", () => {
  it("sorts by SQNR worst first (missing last) and by error", () => {
    const rows = layerRows(ACC);
    expect(sortRows(rows, "sqnr_db", true).map((r) => r.node)).toEqual(["conv2", "conv1", "fc", "add"]);
    expect(sortRows(rows, "sqnr_db", false).map((r) => r.node)).toEqual(["conv1", "conv2", "fc", "add"]);
    expect(sortRows(rows, "max_abs_error", false)[0].node).toBe("conv2");
  });
});

describe("excludePipeline", () => {
  const P = "fold-qdq,fold-constants,quantize{dtype=int8},fuse-ops,plan-memory";
  it("adds the layer to the quantize pass's exclude list", () => {
    expect(excludePipeline(P, "conv2")).toBe("fold-qdq,fold-constants,quantize{dtype=int8 exclude=conv2},fuse-ops,plan-memory");
    const once = excludePipeline(P, "conv2") as string;
    expect(excludePipeline(once, "conv1")).toContain("quantize{dtype=int8 exclude=conv2;conv1}");
    expect(excludePipeline(once, "conv2")).toBeNull();
  });
  it("refuses a pipeline without quantize and names the option syntax cannot carry", () => {
    expect(excludePipeline("O2", "conv1")).toBeNull();
    expect(excludePipeline(P, "a,b")).toBeNull();
    expect(excludePipeline(P, "x y")).toBeNull();
  });
  it("keeps a fixed-point group as written (the server's expanded pipelines start with one)", () => {
    const G = "fixed-point(resolve-sequences,inline-control-flow),resolve-sequences{final=true},quantize{dtype=int8},fuse-ops";
    expect(excludePipeline(G, "conv2")).toBe("fixed-point(resolve-sequences,inline-control-flow),resolve-sequences{final=true},quantize{dtype=int8 exclude=conv2},fuse-ops");
    expect(excludePipeline("fixed-point(quantize{dtype=int8})", "conv2")).toBeNull();
  });
});

describe("summary: precision card", () => {
  it("shows accuracy against FP32 beside ONNX Runtime FP32 and INT8 times, the criterion, fallbacks and layers", () => {
    const events: CompileEvent[] = EVENTS.map((e) => e.type === "model.timed"
      ? ({ ...e, prism_ms: 2, onnxruntime_ms: 4, ratio: 0.5, precision: "int8", onnxruntime_int8_ms: 2.5, ratio_int8: 0.8 } as ModelTimed) : e);
    events.splice(events.length - 1, 0, { ...ACC, seq: events.length - 1 });
    const pane = summaryPane();
    pane.update({ id: "abc", state: reduceAll(events), view: { page: "compilation", id: "abc", view: "summary" } as never,
      meta: { id: "abc", status: "succeeded", target: "host", pipeline: "quantize{dtype=int8}", input_shapes: {}, model: { id: "m1" } } });
    const card = pane.el.querySelector(".precision") as HTMLElement;
    const text = (card.textContent ?? "").replace(/\s+/g, " ");
    expect(text).toContain("Precision: INT8 against FP32");
    expect(text).toContain("criterion met");
    expect(text).toContain("0.50× ONNX Runtime FP32");
    expect(text).toContain("0.80× ONNX Runtime INT8");
    expect(text).toContain("add back to FP32 (SQNR 8.1 dB across it): worst output 15.2 dB → 39.3 dB");
    const order = [...card.querySelectorAll("table.layers tbody tr")].map((tr) => tr.getAttribute("data-node"));
    expect(order).toEqual(["conv2", "conv1", "fc", "add"]);
    (card.querySelector('button[data-sort="max_abs_error"]') as HTMLButtonElement).click();
    expect(card.querySelector("table.layers tbody tr")?.getAttribute("data-node")).toBe("conv1");
    const keep = card.querySelector('tr[data-node="conv2"] button.keep-fp32') as HTMLButtonElement;
    expect(keep.disabled).toBe(false);
    expect(pane.el.textContent).toContain("ONNX Runtime INT8");
  });
});

describe("summary: details that arrive after the last event", () => {
  it("draws the card again when the compilation's details come, so keep-in-FP32 is offered", () => {
    const events: CompileEvent[] = [...EVENTS];
    events.splice(events.length - 1, 0, { ...ACC, seq: events.length - 1 });
    const state = reduceAll(events);
    const view = { page: "compilation", id: "abc", view: "summary" } as never;
    const pane = summaryPane();
    pane.update({ id: "abc", state, view, meta: null });
    const before = pane.el.querySelector('.precision tr[data-node="conv2"] button.keep-fp32') as HTMLButtonElement;
    expect(before.disabled).toBe(true);
    pane.update({ id: "abc", state, view, meta: { id: "abc", status: "succeeded", target: "host", pipeline: "fixed-point(inline-control-flow),quantize{dtype=int8}", input_shapes: {}, model: { id: "m1" } } });
    const after = pane.el.querySelector('.precision tr[data-node="conv2"] button.keep-fp32') as HTMLButtonElement;
    expect(after.disabled).toBe(false);
  });
});

describe("compare: layer by layer", () => {
  it("aligns an FP32 and an INT8 compilation by layer with SQNR and time saved", async () => {
    const { layerAlign } = await import("../src/pages/compareRows");
    const fusion = { seq: 0, type: "graph.fused" as const, ts: 0, nodes: [], edges: [], groups: [{ id: "g", kernel: "k_conv1", kind: "out-elementwise-fusable", nodes: ["conv1"] }] };
    const kernels = (us: number) => new Map([["k_conv1", { name: "k_conv1", timed: { median_us: us } }]]);
    const fp32 = { state: { ...reduceAll([]), fusion, kernels: kernels(100) } as never, meta: null, missing: false };
    const int8 = { state: { ...reduceAll([]), fusion, kernels: kernels(40), accuracy: ACC } as never, meta: null, missing: false };
    const rows = layerAlign(fp32, int8) as string[][];
    expect(rows[0].slice(0, 4)).toEqual(["conv1", "fp32", "int8", "38.0 dB"]);
    expect(rows[0][6]).toContain("60");
    expect(layerAlign(fp32, fp32)).toBeNull();
  });
});

describe("precisionPipeline (the compile form's precision field)", () => {
  it("leaves the pipeline as written for fp32 and appends quantize with the dtype otherwise", () => {
    expect(precisionPipeline("O2", "fp32")).toBe("O2");
    expect(precisionPipeline("O2", "int8")).toBe("O2,quantize{dtype=int8}");
    expect(precisionPipeline(" O1 ", "fp16")).toBe("O1,quantize{dtype=fp16}");
    expect(precisionPipeline("", "bf16")).toBe("quantize{dtype=bf16}");
  });

  it("names the problem for an unknown precision or a pipeline that already quantizes", () => {
    expect(() => precisionPipeline("O2", "int4")).toThrow(/precision int4 is not one of fp32, int8, bf16, fp16/);
    expect(() => precisionPipeline("O2,quantize{dtype=bf16}", "int8")).toThrow(/already has a quantize pass/);
    expect(precisionPipeline("O2,quantize{dtype=bf16}", "fp32")).toBe("O2,quantize{dtype=bf16}");
  });

  it("colours a lookup table as an int8 op", () => {
    expect(opPrecision("QLinearLookup")).toBe("int8");
  });
});
