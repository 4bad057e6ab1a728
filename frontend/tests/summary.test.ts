// @vitest-environment happy-dom
/** The summary pane in a DOM (happy-dom): the three accuracy states, notes and the storage line, all as text. */
import { describe, expect, it } from "vitest";
import type { DimRangePlan, ModelVerified } from "../src/events";
import { summaryPane, unbrokenNumbers } from "../src/panes/summary";
import { reduceAll } from "../src/state";
import { DIFFER, eventsWith, FLOAT16_PASSED, NOT_VERIFIED, PASSED, STORAGE } from "./verification";

function render(events: ReturnType<typeof eventsWith>, meta: unknown = null): HTMLElement {
  const pane = summaryPane();
  pane.update({ id: "abc", state: reduceAll(events), view: { page: "compilation", id: "abc", view: "summary" } as never, meta: meta as never });
  return pane.el;
}

function card(el: HTMLElement, title: string): HTMLElement {
  const c = [...el.querySelectorAll(".card")].find((x) => x.querySelector("h3")?.textContent === title);
  if (!c) throw new Error(`no ${title} card`);
  return c as HTMLElement;
}

const text = (el: Element) => (el.textContent ?? "").replace(/\s+/g, " ");

describe("unbrokenNumbers", () => {
  it("puts each number, exponent and all, in a nowrap span and leaves the words breakable", () => {
    const parts = unbrokenNumbers("max abs error 9.54e-7 · rtol 0.5 · x 12");
    expect(parts.map((p) => (typeof p === "string" ? p : `[${p.textContent}]`)).join("")).toBe("max abs error [9.54e-7] · rtol [0.5] · x [12]");
    expect(parts.filter((p) => typeof p !== "string").every((p) => (p as HTMLElement).className === "nowrap")).toBe(true);
  });
});

describe("summary pane: accuracy", () => {
  it("passed", () => {
    const acc = card(render(eventsWith(PASSED)), "Accuracy");
    expect(acc.querySelector(".verdict.ok")?.textContent).toBe("✔ outputs match ONNX Runtime");
    expect(text(acc)).toContain("max abs error 1.00e-6 · max rel error 1.00e-5 · rtol 1.00e-3 · atol 3.20e-4 applied (1.00e-4 × max|y| with max|y| 3.20e+0)");
    // every number is one unbreakable span, so a number never wraps at its exponent's "-"
    const parts = [...acc.querySelectorAll(".verdict-detail .nowrap")].map((x) => x.textContent);
    expect(parts).toEqual(["1.00e-6", "1.00e-5", "1.00e-3", "3.20e-4", "1.00e-4", "3.20e+0"]);
    expect(acc.querySelector("table")).toBeNull(); // one float32 output: the headline says it all
    expect(acc.classList.contains("card-wide")).toBe(false);
  });

  it("outputs differ, with a row per output", () => {
    const acc = card(render(eventsWith(DIFFER)), "Accuracy");
    expect(acc.querySelector(".verdict.bad")?.textContent).toBe("✘ outputs differ from ONNX Runtime");
    const rows = [...acc.querySelectorAll("tbody tr")].map((r) => [...r.querySelectorAll("td")].map((td) => td.textContent));
    expect(rows).toEqual([
      ["relu1", "differ", "5.00e-1", "2.00e+0", "1.00e-3", "3.20e-4", ""],
      ["extra", "differ: shape (2, 3) != (3, 2)", "–", "–", "–", "–", ""],
    ]);
    expect(acc.classList.contains("card-wide")).toBe(true); // the table gets the summary's whole width
    expect([...acc.querySelectorAll("thead th")].map((th) => th.textContent)).toContain("atol applied");
    const atol = acc.querySelector("tbody td.atol") as HTMLElement;
    expect(atol.title).toBe("applied 3.20e-4 = 1.00e-4 × max|y| with max|y| 3.20e+0");
    expect(text(acc.querySelector(".atol-rule") as Element)).toBe("atol applied = 1.00e-4 × max|y| of each output, at least 1.00e-6; hover a value for its numbers");
    // numbers sit in cells that do not wrap (styles.css: table.grid .num)
    expect([...acc.querySelectorAll("tbody tr:first-child td.num")].map((td) => td.textContent?.slice(0, 7))).toEqual(["5.00e-1", "2.00e+0", "1.00e-3", "3.20e-4"]);
  });

  it("not verified: the reason, never 'differ', no error numbers", () => {
    const acc = card(render(eventsWith(NOT_VERIFIED)), "Accuracy");
    expect(acc.querySelector(".verdict.unverified")?.textContent).toBe("○ not verified against ONNX Runtime");
    expect(acc.querySelector(".verdict-reason")?.textContent).toBe("ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node '')");
    expect(acc.querySelector(".verdict.bad, .verdict.ok")).toBeNull();
    expect(text(acc)).not.toMatch(/differ|match|max abs/);
  });

  it("shows the notes and a narrow output's storage type and tolerance", () => {
    const acc = card(render(eventsWith(FLOAT16_PASSED)), "Accuracy");
    expect([...acc.querySelectorAll(".notes li")].map((li) => li.textContent)).toEqual(FLOAT16_PASSED.notes);
    expect([...acc.querySelectorAll("tbody td")].map((td) => td.textContent)).toEqual(["relu1", "match", "9.77e-4", "4.88e-4", "9.77e-4", "9.77e-4", "float16"]);
  });

  it("renders a message as text, never as HTML", () => {
    const evil: ModelVerified = { ...NOT_VERIFIED, message: "not verified: <img src=x onerror=alert(1)>", notes: ["<b>bold</b>"] };
    const acc = card(render(eventsWith(evil)), "Accuracy");
    expect(acc.querySelector("img, b")).toBeNull();
    expect(acc.querySelector(".verdict-reason")?.textContent).toBe("<img src=x onerror=alert(1)>");
    expect(acc.querySelector(".notes li")?.textContent).toBe("<b>bold</b>");
  });
});

describe("summary pane: storage and latency", () => {
  it("says the storage and compute types and the storage notes in the model card", () => {
    const model = card(render(eventsWith(NOT_VERIFIED, STORAGE)), "Model");
    expect([...model.querySelectorAll(".storage-line")].map((p) => p.textContent)).toEqual(["Storage: float16 storage, float32 compute: input data; output relu1"]);
    expect([...model.querySelectorAll(".storage .notes li")].map((li) => li.textContent)).toEqual(STORAGE.notes);
  });

  it("has no storage line for a float32 model", () => {
    expect(card(render(eventsWith(PASSED)), "Model").querySelector(".storage")).toBeNull();
  });

  it("times Prism alone when ONNX Runtime did not run", () => {
    const events = eventsWith(NOT_VERIFIED).map((e) => (e.type === "model.timed" ? { ...e, onnxruntime_ms: null, ratio: null } : e));
    const lat = card(render(events), "Latency");
    expect(text(lat)).toContain("ONNX Runtime did not run this model");
    expect(text(lat)).not.toMatch(/faster|slower|–×/);
    expect(lat.querySelectorAll(".hbar")).toHaveLength(1);
  });
});

describe("summary pane: input values", () => {
  it("shows an input bound to a value in the model card", () => {
    const events = eventsWith(PASSED).map((e) => (e.type === "compile.started"
      ? { ...e, model: { ...e.model, inputs: [...e.model.inputs, { name: "mode", dtype: "int64", shape: [] }], input_values: { mode: [3] } } } : e));
    const cell = card(render(events), "Model").querySelector(".input-value");
    expect(cell?.textContent).toBe("bound to value 3");
  });
});

describe("summary pane: dim ranges", () => {
  const meta = (ranges: Record<string, [number, number]>) => ({ id: "abc", status: "succeeded", target: "host", pipeline: "", input_shapes: { data: ["N", 3, 16, 16] }, model: { name: "m.onnx" }, dim_ranges: ranges });
  /** The fixture compiled with data declared [N, 3, 16, 16] (output [N, 8, 16, 16] or `outShape`) and `plan` as the memory plan's dim_range remark. */
  const ranged = (plan: DimRangePlan | undefined, outShape: (number | string | null)[] = ["N", 8, 16, 16], boundN = 1) => eventsWith(PASSED).map((e) => {
    if (e.type === "pass.finished") return { ...e, ir: `graph @tiny(%data: f32[${boundN}, 3, 16, 16]) {\n  %relu1 = Relu(%data) : f32[${boundN}, 8, 16, 16]\n  return %relu1\n}\n` };
    if (e.type === "compile.started") return { ...e, model: { ...e.model, inputs: [{ ...e.model.inputs[0], shape: ["N", 3, 16, 16] }], outputs: [{ ...e.model.outputs[0], shape: outShape }] } };
    if (e.type === "memory.planned" && plan) return { ...e, dim_range: plan };
    return e;
  });
  const lines = (el: HTMLElement) => [...card(el, "Model").querySelectorAll(".dim-range")].map((x) => x.textContent);
  const outShape = (el: HTMLElement) => card(el, "Model").querySelector('tr[data-io="relu1"] .bound-shape')?.textContent;
  const RUNTIME: DimRangePlan = { dim: "N", min: 1, max: 8, mode: "run-time", message: "one set of kernels compiled for N=1 serves N=1..8: N is a run-time argument of the entry function (1 kernel takes N inside its loops, 0 of them GEMM-class; 1 kernel over per-sample buffers loop N times (k: not proven))" };

  it("a run-time range: one set of kernels, the compiler's own reason, the output's batch axis as N", () => {
    const el = render(ranged(RUNTIME), meta({ N: [1, 8] }));
    expect(lines(el)).toEqual(["One artifact for N = 1..8: one set of kernels compiled for N = 1 serves every size, N a run-time loop bound; the passes and kernels shown are N = 1's, the memory N = 8's"]);
    expect(card(el, "Model").querySelector(".dim-range-detail")?.textContent).toBe(RUNTIME.message);
    // the passes bound relu1 at N = 1: shown as the ranged dim, like the input
    expect(outShape(el)).toBe("[N, 8, 16, 16]");
    expect(card(el, "Model").querySelector('tr[data-io="data"] .bound-shape')?.textContent).toBe("[N, 3, 16, 16]");
  });

  it("an output declared with another symbol is shown as the ranged dim when bound to its shown size", () => {
    expect(outShape(render(ranged(RUNTIME, ["unk__0", 8, 16, 16]), meta({ N: [1, 8] })))).toBe("[N, 8, 16, 16]");
    // a fixed declared axis stays a number
    expect(outShape(render(ranged(RUNTIME, [1, 8, 16, 16]), meta({ N: [1, 8] })))).toBe("[1, 8, 16, 16]");
  });

  it("a specialized range: each size compiled, the events are the maximum's", () => {
    const plan: DimRangePlan = { dim: "N", min: 1, max: 8, mode: "specialized", message: "specialized: one compilation per size of N (8), every kernel for its size; N is not a run-time argument because node 'bn' computes across samples" };
    const el = render(ranged(plan, ["unk__0", 8, 16, 16], 8), meta({ N: [1, 8] }));
    expect(lines(el)).toEqual(["One artifact for N = 1..8: each size of N compiled and specialized; the passes, kernels and memory shown are N = 8's"]);
    expect(card(el, "Model").querySelector(".dim-range-detail")?.textContent).toContain("node 'bn' computes across samples");
    expect(outShape(el)).toBe("[N, 8, 16, 16]"); // bound at N = 8, the size shown
    // a symbolic output axis bound to another size than the shown one is not the ranged dim
    expect(outShape(render(ranged(plan, ["unk__0", 8, 16, 16], 1), meta({ N: [1, 8] })))).toBe("[1, 8, 16, 16]");
  });

  it("two ranged dims: the other dim specialized per the remark, the batch dim at run time", () => {
    const plan: DimRangePlan = { ...RUNTIME, message: `S=16..32 specialized: one compilation per size of S (17), each serving N=1..8; ${RUNTIME.message}` };
    const el = render(ranged(plan), meta({ N: [1, 8], S: [16, 32] }));
    expect(lines(el)).toEqual([
      "One artifact for N = 1..8: one set of kernels compiled for N = 1 serves every size, N a run-time loop bound; the passes and kernels shown are N = 1's, the memory N = 8's",
      "One artifact for S = 16..32: each size of S compiled and specialized; the passes, kernels and memory shown are S = 32's",
    ]);
  });

  it("before the memory plan only the range is stated; no range, no line", () => {
    expect(lines(render(ranged(undefined).filter((e) => e.type !== "memory.planned"), meta({ N: [1, 8] })))).toEqual(["One artifact for N = 1..8 (how the range is served is known once memory is planned)"]);
    expect(card(render(eventsWith(PASSED)), "Model").querySelector(".dim-range")).toBeNull();
  });
});

describe("summary pane: memory", () => {
  const withPlan = (arena: number, noSharing: number, n: number) => eventsWith(PASSED).map((e) => (e.type === "memory.planned"
    ? { ...e, arena_bytes: arena, no_sharing_bytes: noSharing, lower_bound_bytes: arena, buffers: Array.from({ length: n }, (_, i) => ({ value: `v${i}`, offset: 0, size: arena, first: i, last: i })) }
    : e));
  it("counts one buffer in the singular", () => {
    expect(text(card(render(withPlan(4096, 8192, 1)), "Memory"))).toContain("1 buffer; the arena is 50.0% of no sharing");
  });
  it("says an empty plan is empty, not a percentage of nothing", () => {
    const memory = text(card(render(withPlan(0, 0, 0)), "Memory"));
    expect(memory).toContain("0 buffers: the model needs no intermediate memory, so the arena is empty");
    expect(memory).not.toContain("of no sharing");
  });
});
