import { describe, expect, it } from "vitest";
import { overview, type CompareSide } from "../src/pages/compareRows";
import { reduceAll } from "../src/state";
import { appliedAtol, describeVerification, headerVerdict, outputRows, shortVerdict, storageKinds, storageLines, storageNotes, verdictKind } from "../src/verdict";
import { DIFFER, eventsWith, FLOAT16_PASSED, NOT_VERIFIED, PASSED, STORAGE } from "./verification";

describe("verdict", () => {
  it("tells the three states apart", () => {
    expect(verdictKind(PASSED)).toBe("passed");
    expect(verdictKind(DIFFER)).toBe("differ");
    expect(verdictKind(NOT_VERIFIED)).toBe("not-verified");
    // a log from before `verified` existed: passed true/false decides
    const { verified: _, ...old } = DIFFER;
    expect(verdictKind(old)).toBe("differ");
    // passed null without the flag is still not a difference
    expect(verdictKind({ ...NOT_VERIFIED, verified: undefined })).toBe("not-verified");
  });

  it("says why a run did not verify and never calls it a difference", () => {
    const d = describeVerification(NOT_VERIFIED);
    expect(d.headline).toBe("○ not verified against ONNX Runtime");
    expect(d.reason).toBe("ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node '')");
    expect(d.detail).toBeNull();
    expect(d.headline).not.toMatch(/differ|match/);
    expect(outputRows(NOT_VERIFIED)).toEqual([]);
    expect(shortVerdict(NOT_VERIFIED)).toBe("not verified (ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node ''))");
    expect(describeVerification({ ...NOT_VERIFIED, message: undefined }).reason).toBe("no reason given");
  });

  it("gives the errors of a verified run and each output's own tolerance and storage", () => {
    expect(describeVerification(PASSED)).toMatchObject({ kind: "passed", headline: "✔ outputs match ONNX Runtime", reason: null, detail: "max abs error 1.00e-6 · max rel error 1.00e-5 · rtol 1.00e-3 · atol 3.20e-4 applied (1.00e-4 × max|y| with max|y| 3.20e+0)" });
    expect(describeVerification(DIFFER).headline).toBe("✘ outputs differ from ONNX Runtime");
    expect(shortVerdict(PASSED)).toBe("✔ match (max abs 1.00e-6)");
    expect(shortVerdict(DIFFER)).toBe("✘ differ (max abs 5.00e-1)");
    expect(shortVerdict(undefined)).toBe("–");
    expect(outputRows(DIFFER)).toEqual([
      ["relu1", "differ", "5.00e-1", "2.00e+0", "1.00e-3", "3.20e-4", "", "1.00e-4 × max|y|", "1.00e-4 × max|y| with max|y| 3.20e+0"],
      ["extra", "differ: shape (2, 3) != (3, 2)", "–", "–", "–", "–", "", "", ""],
    ]);
    // a log without atol_effective: the nominal atol is what it says
    expect(outputRows(FLOAT16_PASSED)).toEqual([["relu1", "match", "9.77e-4", "4.88e-4", "9.77e-4", "9.77e-4", "float16", "", ""]]);
    expect(describeVerification(FLOAT16_PASSED).detail).toContain("· atol 9.77e-4");
    expect(describeVerification(FLOAT16_PASSED).notes).toEqual(["ONNX Runtime ran the model with ir_version 10 (declared 11, newer than it reads)"]);
    expect(describeVerification(PASSED).notes).toEqual([]);
  });

  it("gives the atol the check applied, not the nominal one (child.py _compare: max(atol * max|y|, floor))", () => {
    // light_squeezenet at O2: nominal 2.5e-3, max|y| 16.28 -> 0.0407 applied
    const one: typeof PASSED = { ...PASSED, atol: 2.5e-3, outputs: { y: { passed: true, max_abs_error: 9.54e-7, max_rel_error: 1e-6, rtol: 1e-3, atol: 2.5e-3, scale: 16.28, atol_effective: 2.5e-3 * 16.28 } } };
    expect(describeVerification(one).detail).toContain("atol 4.07e-2 applied (2.50e-3 × max|y| with max|y| 1.63e+1)");
    expect(describeVerification(one).detail).not.toContain("atol 2.50e-3 ·");
    expect(outputRows(one)[0].slice(5)).toEqual(["4.07e-2", "", "2.50e-3 × max|y|", "2.50e-3 × max|y| with max|y| 1.63e+1"]);
    // all-zero output: the floor is what applied
    expect(appliedAtol({ atol: 1e-4, scale: 0, atol_effective: 1e-6 })).toEqual({ applied: "1.00e-6", nominal: "1.00e-4 × max|y|", explained: "1.00e-4 × max|y| with max|y| 0, raised to the floor 1.00e-6" });
    // several outputs: the loosest applied
    const two: typeof PASSED = { ...PASSED, outputs: { a: one.outputs!.y, b: { ...one.outputs!.y, scale: 1, atol_effective: 2.5e-3 } } };
    expect(describeVerification(two).detail).toContain("atol up to 4.07e-2 applied (each output's atol × its max|y|)");
  });
});

describe("storage", () => {
  it("says the storage and compute types per group of values", () => {
    expect(storageLines(STORAGE)).toEqual(["float16 storage, float32 compute: input data; output relu1"]);
    expect(storageKinds(STORAGE)).toBe("float16 storage, float32 compute");
    expect(storageNotes(STORAGE)).toEqual(STORAGE.notes);
    const mixed = { values: [
      { name: "a", role: "input" as const, storage: "bfloat16", compute: "float32" },
      { name: "b", role: "input" as const, storage: "bfloat16", compute: "float32" },
      { name: "q", role: "output" as const, storage: "int4", compute: "int8" },
    ], notes: [] };
    expect(storageLines(mixed)).toEqual(["bfloat16 storage, float32 compute: inputs a, b", "int4 storage, int8 compute: output q"]);
    expect(storageKinds(mixed)).toBe("bfloat16 storage, float32 compute; int4 storage, int8 compute");
  });
  it("is empty for a model without narrow types", () => {
    expect(storageLines(undefined)).toEqual([]);
    expect(storageKinds(undefined)).toBe("–");
    expect(storageNotes(undefined)).toEqual([]);
  });
});

describe("compare overview", () => {
  const side = (events: ReturnType<typeof eventsWith>): CompareSide => ({ state: reduceAll(events), meta: null, missing: false });
  const row = (rows: ReturnType<typeof overview>, label: string) => rows.find((r) => r[0] === label);

  it("shows match against not verified, the storage types and the notes", () => {
    const rows = overview(side(eventsWith(PASSED)), side(eventsWith({ ...NOT_VERIFIED, notes: ["ONNX Runtime ran the model with ir_version 10 (declared 11, newer than it reads)"] }, STORAGE)));
    expect(row(rows, "accuracy")).toEqual(["accuracy", "✔ match (max abs 1.00e-6)", "not verified (ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node ''))"]);
    expect(row(rows, "storage")).toEqual(["storage", "–", "float16 storage, float32 compute"]);
    expect(row(rows, "notes")?.[1]).toBe("–");
    expect(row(rows, "notes")?.[2]).toBe(`${STORAGE.notes[0]} · ONNX Runtime ran the model with ir_version 10 (declared 11, newer than it reads)`);
  });

  it("shows a difference and has no ONNX Runtime ratio when ONNX Runtime did not run", () => {
    const noOrt = eventsWith(NOT_VERIFIED).map((e) => (e.type === "model.timed" ? { ...e, onnxruntime_ms: null, ratio: null } : e));
    const rows = overview(side(eventsWith(DIFFER)), side(noOrt));
    expect(row(rows, "accuracy")?.[1]).toBe("✘ differ (max abs 5.00e-1)");
    expect(row(rows, "ONNX Runtime latency")).toEqual(["ONNX Runtime latency", "40 µs", "–", ""]);
    expect(row(rows, "Prism / ONNX Runtime")).toEqual(["Prism / ONNX Runtime", "1.25×", "–"]);
  });
});

describe("header verdict", () => {
  it("shows a failed verification beside a succeeded status, and why a run was not verified", () => {
    expect(headerVerdict(undefined)).toBeNull();
    expect(headerVerdict(PASSED)?.text).toBe("verified");
    const differ = headerVerdict(DIFFER);
    expect(differ?.kind).toBe("differ");
    expect(differ?.text).toBe("verification failed");
    expect(differ?.title).toMatch(/^✘ outputs differ from ONNX Runtime \(max abs error /);
    const crashed = headerVerdict({ ...NOT_VERIFIED, message: "not verified: ONNX Runtime failed (killed by SIGFPE)" });
    expect(crashed).toEqual({ kind: "not-verified", text: "not verified", title: "not verified: ONNX Runtime failed (killed by SIGFPE)" });
  });
});
