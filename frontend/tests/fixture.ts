/** A hand-written event log of a tiny compilation, for the reducer's unit tests only. */
import type { CompileEvent } from "../src/events";

const IR0 = `%conv1 = Conv(%data, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 8, 16, 16]
%relu1 = Relu(%conv1) : f32[1, 8, 16, 16]
%unused = Identity(%w) : f32[8, 3, 3, 3]
return %relu1
`;
const IR1 = `%conv1 = Conv(%data, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 8, 16, 16]
%relu1 = Relu(%conv1) : f32[1, 8, 16, 16]
return %relu1
`;

export const EVENTS: CompileEvent[] = [
  {
    seq: 0, type: "compile.started", ts: 1000,
    model: { name: "tiny", sha256: "ab", opset: 17, inputs: [{ name: "data", dtype: "float32", shape: [1, 3, 16, 16] }], outputs: [{ name: "relu1", dtype: "float32", shape: [1, 8, 16, 16] }] },
    target: "host", pipeline: "eliminate-dead-code,fuse-ops{max-group-size=16}", compiler_version: "0.1",
  },
  { seq: 1, type: "pass.started", ts: 1001, index: 0, name: "eliminate-dead-code", options: {} },
  {
    seq: 2, type: "pass.finished", ts: 1002, index: 0, name: "eliminate-dead-code", options: {}, duration_ms: 1.5, changed: true,
    ir: IR1, stats: { nodes: 2 },
    remarks: [{ kind: "applied", pass: "eliminate-dead-code", message: "removed unused", nodes: ["unused"], data: {} }],
  },
  { seq: 3, type: "pass.started", ts: 1003, index: 1, name: "fuse-ops", options: { "max-group-size": 16 } },
  {
    seq: 4, type: "pass.finished", ts: 1004, index: 1, name: "fuse-ops", options: { "max-group-size": 16 }, duration_ms: 2, changed: true,
    ir: IR1, stats: { nodes: 2, groups: 1 },
    remarks: [{ kind: "applied", pass: "fuse-ops", message: "fused Relu into Conv", nodes: ["conv1", "relu1"], data: {} }],
  },
  {
    seq: 5, type: "graph.fused", ts: 1005,
    nodes: [{ id: "n0", name: "conv1", op_type: "Conv", group: "g0" }, { id: "n1", name: "relu1", op_type: "Relu", group: "g0" }],
    edges: [{ source: "n0", target: "n1", value: "conv1", dtype: "float32", shape: [1, 8, 16, 16] }],
    groups: [{ id: "g0", kernel: "fused_conv1_relu1", kind: "out-elementwise-fusable", nodes: ["n0", "n1"] }],
  },
  { seq: 6, type: "memory.planned", ts: 1006, arena_bytes: 8192, no_sharing_bytes: 16384, lower_bound_bytes: 8192, buffers: [] },
  { seq: 7, type: "kernel.lowered", ts: 1007, kernel: "fused_conv1_relu1", group: "g0", loop_ir: "for i in range(8):\n  ...", schedule: [] },
  { seq: 8, type: "kernel.compiled", ts: 1008, kernel: "fused_conv1_relu1", llvm_ir: "define void @k() {\n ret void\n}", llvm_ir_optimized: "define void @k() {\n ret void\n}", asm: "k:\n  ret", compile_ms: 12 },
  { seq: 9, type: "kernel.timed", ts: 1009, kernel: "fused_conv1_relu1", median_us: 40, flops: 1000, bytes: 2000, gflops: 0.025, gbps: 0.05 },
  { seq: 10, type: "model.timed", ts: 1010, prism_ms: 0.05, onnxruntime_ms: 0.04, ratio: 1.25, repeats: 50 },
  { seq: 11, type: "model.verified", ts: 1011, passed: true, max_abs_error: 1e-6, max_rel_error: 1e-5, rtol: 1e-4, atol: 1e-5 },
  { seq: 12, type: "compile.finished", ts: 1012, duration_ms: 120, stage_ms: { import: 5, passes: 4, lowering: 10, codegen: 60, run: 30, verify: 11 } },
];

export { IR0, IR1 };
