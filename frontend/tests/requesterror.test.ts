// @vitest-environment happy-dom
/** A refused compile request shown by the field it names, in the form's words (src/requesterror.ts). */
import { describe, expect, it } from "vitest";
import { errorField, formWords, placeRequestError } from "../src/requesterror";

const places = () => Object.fromEntries(["input_shapes", "dim_ranges", "threads"].map((f) => {
  const el = document.createElement("p");
  el.hidden = true;
  return [f, el];
})) as Record<string, HTMLElement>;

describe("errorField", () => {
  it("reads the services' field, else DRF's one detail key, else nothing", () => {
    expect(errorField({ error: "dim range N=1..4: ...", stage: "request", field: "dim_ranges" })).toBe("dim_ranges");
    expect(errorField({ error: "tune_budget_s: must be ...", detail: { tune_budget_s: ["must be ..."] } })).toBe("tune_budget_s");
    expect(errorField({ error: "a, b", detail: { a: ["x"], b: ["y"] } })).toBeNull();
    expect(errorField({ error: "not a valid ONNX model", stage: "import" })).toBeNull();
    expect(errorField({ detail: "JSON parse error" })).toBeNull();
    expect(errorField(null)).toBeNull();
  });
});

describe("placeRequestError", () => {
  it("a shape error goes by the inputs, not the pipeline; the Compile line says where", () => {
    const p = places();
    const piped: string[] = [];
    const msg = "input 'x' of shape [100000000, 3, 16, 16] has 76800000000 elements, above the limit of 1000000000";
    const under = placeRequestError(400, "input_shapes", msg, p, (m) => piped.push(m));
    expect(piped).toEqual([]);
    expect(p.input_shapes.hidden).toBe(false);
    expect(p.input_shapes.textContent).toBe(msg);
    expect(p.dim_ranges.hidden).toBe(true);
    expect(under).toBe("Not compiled: see Input shapes above.");
  });

  it("a pipeline error goes under the pipeline; a new error clears the last one's place", () => {
    const p = places();
    placeRequestError(400, "threads", "option 'threads' must be a positive integer, got 0", p, () => {});
    const piped: string[] = [];
    const under = placeRequestError(400, "pipeline", "unknown pass 'bogus'; valid passes: a, b", p, (m) => piped.push(m));
    expect(piped).toEqual(["unknown pass 'bogus'; valid passes: a, b"]);
    expect(p.threads.hidden).toBe(true);
    expect(p.threads.textContent).toBe("");
    expect(under).toContain("pipeline");
  });

  it("no field, a field without a place, or not a 400: the message under Compile only", () => {
    const p = places();
    const piped: string[] = [];
    expect(placeRequestError(400, null, "not a valid ONNX model", p, (m) => piped.push(m))).toBe("not a valid ONNX model");
    expect(placeRequestError(400, "options", "unknown option 'x'", p, (m) => piped.push(m))).toBe("unknown option 'x'");
    expect(placeRequestError(503, "pipeline", "queue down", p, (m) => piped.push(m))).toBe("queue down");
    expect(piped).toEqual([]);
    expect(Object.values(p).every((el) => el.hidden)).toBe(true);
  });
});

describe("formWords", () => {
  it("says the compiler's API-syntax hints as what to write in the form", () => {
    const range = formWords(`dim range N=1..4: no input shape names 'N' (e.g. input_shapes={"images": ["N", 3, 224, 224]})`);
    expect(range).toBe("dim range N=1..4: no input shape names 'N' (write it in a shape field of the inputs table)");
    expect(range).not.toContain("input_shapes=");
    const unbound = formWords("the shape of input 'x': dim 'B' is neither an integer nor a dim with a range; give one with dim_ranges={'B': (MIN, MAX)}");
    expect(unbound).toBe("the shape of input 'x': dim 'B' is neither an integer nor a dim with a range; give it a range in the Dim range field (B=MIN..MAX)");
    expect(formWords("input 'data_0': dim 0 is 1 in the model, but input_shapes gives 100000000")).toBe("input 'data_0': dim 0 is 1 in the model, but the shape field gives 100000000");
    // a message without API syntax is unchanged
    expect(formWords("unknown pass 'bogus'; valid passes: a, b")).toBe("unknown pass 'bogus'; valid passes: a, b");
  });
});
