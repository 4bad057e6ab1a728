/**
 * `model.verified` payloads in the three states and a `model.storage` summary, shaped as the
 * compiler sends them (compiler/build.py `run_backend`, compiler/runtime/child.py `_compare`,
 * compiler/runtime/narrow_io.py `describe_storage`), for the verdict and pane tests only.
 */
import type { CompileEvent, ModelVerified, StorageSummary } from "../src/events";
import { EVENTS } from "./fixture";

export const PASSED: ModelVerified = {
  seq: 11, type: "model.verified", ts: 1011, passed: true, verified: true,
  max_abs_error: 1e-6, max_rel_error: 1e-5, rtol: 1e-3, atol: 1e-4, atol_floor: 1e-6,
  outputs: { relu1: { passed: true, max_abs_error: 1e-6, max_rel_error: 1e-5, scale: 3.2, atol_effective: 3.2e-4, rtol: 1e-3, atol: 1e-4 } },
};

export const DIFFER: ModelVerified = {
  seq: 11, type: "model.verified", ts: 1011, passed: false, verified: true,
  max_abs_error: 0.5, max_rel_error: 2, rtol: 1e-3, atol: 1e-4, atol_floor: 1e-6,
  outputs: {
    relu1: { passed: false, max_abs_error: 0.5, max_rel_error: 2, scale: 3.2, atol_effective: 3.2e-4, rtol: 1e-3, atol: 1e-4 },
    // a shape mismatch: the server stores the infinite errors as null (explorer services.events.jsonable)
    extra: { passed: false, max_abs_error: null, max_rel_error: null, message: "shape (2, 3) != (3, 2)" },
  },
};

export const NOT_VERIFIED: ModelVerified = {
  seq: 11, type: "model.verified", ts: 1011, passed: null, verified: false,
  message: "not verified: ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node '')",
  max_abs_error: null, max_rel_error: null, rtol: null, atol: null, outputs: {},
};

/** A float16 model: ONNX Runtime ran it with a lowered ir_version, and its output compared in float16. */
export const FLOAT16_PASSED: ModelVerified = {
  seq: 11, type: "model.verified", ts: 1011, passed: true, verified: true,
  max_abs_error: 0.0009765625, max_rel_error: 0.00048828125, rtol: 0.0009765625, atol: 0.0009765625, atol_floor: 1e-6,
  outputs: { relu1: { passed: true, max_abs_error: 0.0009765625, max_rel_error: 0.00048828125, rtol: 0.0009765625, atol: 0.0009765625, storage: "float16" } },
  notes: ["ONNX Runtime ran the model with ir_version 10 (declared 11, newer than it reads)"],
};

export const STORAGE: StorageSummary = {
  values: [
    { name: "data", role: "input", storage: "float16", compute: "float32" },
    { name: "relu1", role: "output", storage: "float16", compute: "float32" },
  ],
  notes: ["float16 storage computed in float32: inputs widened exactly, results rounded to float16 at the outputs"],
};

/** The fixture's event log with `verified` in place of its model.verified and, if given, a storage summary. */
export function eventsWith(verified: ModelVerified, storage?: StorageSummary): CompileEvent[] {
  return EVENTS.map((e) => {
    if (e.type === "model.verified") return verified;
    if (e.type === "compile.started" && storage) return { ...e, model: { ...e.model, storage } };
    return e;
  });
}
