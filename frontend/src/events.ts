/**
 * The compiler's event stream, typed: one interface per row of DESIGN.md's "Events" table.
 *
 * Every event is `{seq, type, ts, ...payload}`; `seq` counts from 0 with no gaps within one
 * compilation, `ts` is Unix seconds. Fields may be added by the compiler, never renamed, so
 * every payload interface is open to extra fields and the reducer ignores unknown types.
 */

export type Dim = number | string | null;

export interface TensorInfo {
  name: string;
  dtype: string;
  shape: Dim[];
}

/** One graph input or output whose declared (storage) type is narrower than the type Prism computes in. */
export interface StorageValue {
  name: string;
  role: "input" | "output";
  /** The declared element type, e.g. "float16", "bfloat16", "float8e4m3fn". */
  storage: string;
  /** The element type the kernels compute in, e.g. "float32". */
  compute: string;
}

/**
 * `model.storage` (compiler.api.legalize_model, compiler.runtime.narrow_io.describe_storage): present
 * only for a model with narrow element types; `notes` are sentences for the user, e.g.
 * "float16 storage computed in float32: inputs widened exactly, results rounded to float16 ...".
 */
export interface StorageSummary {
  values: StorageValue[];
  notes: string[];
}

export interface ModelInfo {
  name: string;
  sha256: string;
  opset?: number;
  inputs: TensorInfo[];
  outputs: TensorInfo[];
  storage?: StorageSummary;
  [extra: string]: unknown;
}

export type RemarkKind = "applied" | "missed" | "analysis";

/** One optimization decision: `nodes` are graph node names, `data` its numbers. */
export interface Remark {
  kind: RemarkKind;
  pass: string;
  message: string;
  nodes: string[];
  data?: Record<string, unknown>;
}

export interface EventBase {
  seq: number;
  ts: number;
}

export interface CompileStarted extends EventBase {
  type: "compile.started";
  model: ModelInfo;
  target: string;
  /** The pipeline with presets expanded, e.g. `fold-constants,fuse-ops{max-group-size=16}`. */
  pipeline: string;
  compiler_version?: string;
}

export type PassOptions = Record<string, unknown>;

export interface PassStarted extends EventBase {
  type: "pass.started";
  index: number;
  name: string;
  options: PassOptions;
}

export interface PassStats {
  nodes?: number;
  groups?: number;
  constant_bytes?: number;
  [extra: string]: unknown;
}

export interface PassFinished extends EventBase {
  type: "pass.finished";
  index: number;
  name: string;
  options: PassOptions;
  duration_ms: number;
  changed: boolean;
  /** Printed graph IR after the pass (one node a line). */
  ir: string;
  stats: PassStats;
  remarks: Remark[];
}

export interface FusedNode {
  id: string;
  name: string;
  op_type: string;
  group: string | null;
  attributes?: Record<string, unknown>;
}

export interface FusedEdge {
  source: string;
  target: string;
  value: string;
  dtype: string;
  shape: Dim[];
}

export interface FusedGroup {
  id: string;
  kernel: string;
  kind: string;
  nodes: string[];
}

export interface GraphFused extends EventBase {
  type: "graph.fused";
  nodes: FusedNode[];
  edges: FusedEdge[];
  groups: FusedGroup[];
}

export interface BufferPlan {
  value: string;
  offset: number;
  size: number;
  first: number;
  last: number;
}

export interface MemoryPlanned extends EventBase {
  type: "memory.planned";
  arena_bytes: number;
  no_sharing_bytes: number;
  lower_bound_bytes: number;
  buffers: BufferPlan[];
}

export interface KernelLowered extends EventBase {
  type: "kernel.lowered";
  kernel: string;
  group: string;
  loop_ir: string;
  schedule: unknown;
}

export interface KernelCompiled extends EventBase {
  type: "kernel.compiled";
  kernel: string;
  llvm_ir: string;
  llvm_ir_optimized: string;
  asm: string;
  compile_ms: number;
}

export interface KernelTimed extends EventBase {
  type: "kernel.timed";
  kernel: string;
  median_us: number;
  flops: number;
  bytes: number;
  gflops: number;
  gbps: number;
}

export interface ModelTimed extends EventBase {
  type: "model.timed";
  prism_ms: number;
  /** null when ONNX Runtime could not run the model (e.g. no CPU kernel for an op in bfloat16). */
  onnxruntime_ms: number | null;
  /** prism_ms / onnxruntime_ms: below 1 means Prism is faster; null without an ONNX Runtime time. */
  ratio: number | null;
  repeats: number;
  /** The same kernels run one ctypes call each from Python (prism_ms: one call of the entry function). */
  prism_kernel_calls_ms?: number;
  /** Present for a quantized compilation: the precision Prism ran at ("int8"). */
  precision?: string;
  /** ONNX Runtime on the equivalent QDQ model (the same quantization), in the same run. */
  onnxruntime_int8_ms?: number | null;
  /** prism_ms / onnxruntime_int8_ms. */
  ratio_int8?: number | null;
}

/** One layer of the accuracy report (compiler/quant/session.py): int8 with its SQNR, or kept in fp32. */
export interface AccuracyLayer {
  node: string;
  op: string | null;
  output: string | null;
  precision: "int8" | "fp32" | string;
  /** 20·log10(‖x‖/‖x−y‖) against FP32 in dB; 999 when equal; null for an fp32 layer. */
  sqnr_db: number | null;
  max_abs_error: number | null;
}

/** Whole-model figures per output against FP32 (compiler/quant/accuracy.py `compare`). */
export interface AccuracyOutput {
  sqnr_db: number | null;
  max_abs_error: number;
  max_rel_error: number;
  top1?: number;
  top5?: number;
}

export interface AccuracyFallback {
  node: string;
  layer_sqnr_db: number;
  output_sqnr_db_before: number;
  output_sqnr_db_after: number;
  passed: boolean;
}

export interface ModelAccuracy extends EventBase {
  type: "model.accuracy";
  dtype: string;
  method: string;
  samples: number;
  calibration: { method: string; samples: number; random: boolean; activation: string; per_channel: boolean };
  layers: AccuracyLayer[];
  outputs: Record<string, AccuracyOutput>;
  criterion: { min_sqnr_db: number; min_top1: number; passed: boolean; reasons: string[] };
  fallbacks: AccuracyFallback[];
}

/**
 * One output's comparison with ONNX Runtime (compiler/runtime/child.py `_compare`). Its
 * `rtol`/`atol` are its own (a narrow output's are its storage type's); `storage` names that type;
 * `message` says why it failed outright (e.g. "shape (2, 3) != (3, 2)"). Errors are null where
 * they were not finite (the server stores no NaN or infinity).
 */
export interface OutputVerification {
  passed: boolean;
  max_abs_error: number | null;
  max_rel_error: number | null;
  rtol?: number;
  atol?: number;
  scale?: number;
  atol_effective?: number;
  storage?: string;
  message?: string;
  [extra: string]: unknown;
}

/**
 * The comparison with ONNX Runtime (compiler/build.py `run_backend`). Three states:
 * - verified and `passed: true`: the outputs match;
 * - verified and `passed: false`: they differ;
 * - `verified: false`, `passed: null`, null errors and tolerances: the comparison did not run
 *   (ONNX Runtime could not run the model); `message` says why, e.g. "not verified: ONNX Runtime
 *   has no CPU kernel for Relu(14) in bfloat16 (node '')".
 * Logs from before `verified` existed lack it; they always verified. `notes` are remarks on how
 * the reference ran (e.g. "ONNX Runtime ran the model with ir_version 10 (declared 11 ...)").
 */
export interface ModelVerified extends EventBase {
  type: "model.verified";
  passed: boolean | null;
  verified?: boolean;
  message?: string;
  notes?: string[];
  max_abs_error: number | null;
  max_rel_error: number | null;
  /** The loosest of the outputs' tolerances. */
  rtol: number | null;
  atol: number | null;
  atol_floor?: number;
  outputs?: Record<string, OutputVerification>;
}

export const STAGES = ["import", "passes", "lowering", "codegen", "run", "verify"] as const;
export type Stage = (typeof STAGES)[number];

export interface CompileFinished extends EventBase {
  type: "compile.finished";
  duration_ms: number;
  stage_ms: Partial<Record<Stage, number>>;
}

export interface CompileFailed extends EventBase {
  type: "compile.failed";
  stage: string;
  message: string;
  pass?: string;
  node?: string;
  kernel?: string;
  /** The ONNX op of `node`, where known. */
  op?: string;
  /** Set by the service when it ended the log itself: "worker_lost", "time_limit", "internal". */
  reason?: string;
}

export type CompileEvent =
  | CompileStarted
  | PassStarted
  | PassFinished
  | GraphFused
  | MemoryPlanned
  | KernelLowered
  | KernelCompiled
  | KernelTimed
  | ModelTimed
  | ModelAccuracy
  | ModelVerified
  | CompileFinished
  | CompileFailed;

export type EventType = CompileEvent["type"];

/** An event of a type this build does not know; kept in the log, ignored by the reducer. */
export interface UnknownEvent extends EventBase {
  type: string;
  [extra: string]: unknown;
}

export const EVENT_TYPES: readonly EventType[] = [
  "compile.started",
  "pass.started",
  "pass.finished",
  "graph.fused",
  "memory.planned",
  "kernel.lowered",
  "kernel.compiled",
  "kernel.timed",
  "model.timed",
  "model.verified",
  "model.accuracy",
  "compile.finished",
  "compile.failed",
];

export function isKnownEvent(e: { type: string }): e is CompileEvent {
  return (EVENT_TYPES as readonly string[]).includes(e.type);
}

/** Checks the envelope of a message from the wire; throws on anything that is not an event. */
export function parseEvent(raw: unknown): CompileEvent | UnknownEvent {
  if (typeof raw !== "object" || raw === null) throw new Error("event is not an object");
  const o = raw as Record<string, unknown>;
  if (typeof o.seq !== "number" || !Number.isInteger(o.seq) || o.seq < 0) {
    throw new Error("event has no integer seq");
  }
  if (typeof o.type !== "string") throw new Error("event has no type");
  return o as unknown as CompileEvent | UnknownEvent;
}
