"""Compilations with a realistic stored event log (passes with IR and remarks, a fusion graph,
kernels with code) and users, for the review and access tests (no compiler run needed)."""

from __future__ import annotations

from explorer.compilations.models import Compilation, CompilationEvent, ModelUpload, UploadedModel

IR_BEFORE = """graph @net(%x: f32[1, 3, 8, 8]) {
  %w = constant f32[4, 3, 3, 3] <digest 1>
  %r0 = Conv(%x, %w) {kernel_shape = [3, 3]} : f32[1, 4, 6, 6]  // conv_1
  %r1 = Relu(%r0) : f32[1, 4, 6, 6]  // relu_1
  return %r1
}"""
IR_FUSED = """graph @net(%x: f32[1, 3, 8, 8]) {
  %w = constant f32[4, 3, 3, 3] <digest 1>
  %r1 = prism.fused_group @fused_conv2d_relu_0 [out-elementwise-fusable](%x, %w) : f32[1, 4, 6, 6] {
    %r0 = Conv(%x, %w) {kernel_shape = [3, 3]} : f32[1, 4, 6, 6]  // conv_1
    %r1 = Relu(%r0) : f32[1, 4, 6, 6]  // relu_1
  }
  return %r1
}"""
ASM = "fused_conv2d_relu_0:\n  vxorps %zmm0, %zmm0, %zmm0\n  vfmadd231ps %zmm1, %zmm2, %zmm0\n  ret"


def events(passes: list[str], fused: bool = True) -> list[dict]:
    """A compile log: compile.started, a pass.finished per name (IR after fuse-ops is fused), a
    graph.fused and a kernel when `fused`, compile.finished."""
    out: list[dict] = [{"type": "compile.started", "pipeline": ",".join(passes)}]
    fuse_at = passes.index("fuse-ops") if "fuse-ops" in passes else len(passes)
    for i, name in enumerate(passes):
        remarks = [{"kind": "applied", "pass": name, "message": "fused Conv conv_1 with Relu relu_1",
                    "nodes": ["conv_1", "relu_1"], "data": {}}] if name == "fuse-ops" else []
        ir = IR_FUSED if fused and i >= fuse_at else IR_BEFORE
        out.append({"type": "pass.finished", "index": i, "name": name, "options": {}, "duration_ms": 1.0,
                    "changed": True, "ir": ir, "stats": {}, "remarks": remarks})
    if fused:
        out.append({"type": "graph.fused", "nodes": [
            {"id": "n0", "name": "conv_1", "op_type": "Conv", "group": "fused_conv2d_relu_0"},
            {"id": "n1", "name": "relu_1", "op_type": "Relu", "group": "fused_conv2d_relu_0"}],
            "edges": [], "groups": [{"id": "fused_conv2d_relu_0", "kernel": "fused_conv2d_relu_0",
                                     "kind": "out-elementwise-fusable", "nodes": ["n0", "n1"]}]})
        out.append({"type": "kernel.lowered", "kernel": "fused_conv2d_relu_0", "group": "fused_conv2d_relu_0",
                    "loop_ir": "for i in 0..4:\n  store", "schedule": None})
        out.append({"type": "kernel.compiled", "kernel": "fused_conv2d_relu_0", "llvm_ir": "define void @k()",
                    "llvm_ir_optimized": "define void @k()", "asm": ASM, "compile_ms": 1.0})
    out.append({"type": "compile.finished", "duration_ms": 5.0, "stage_ms": {}})
    return out


def model(sha: str = "cd" * 32, owner=None, visibility: str = "unlisted") -> UploadedModel:
    m, _ = UploadedModel.objects.get_or_create(sha256=sha, defaults=dict(
        name="net.onnx", size=1, opset=17, file=f"models/{sha[:2]}/{sha}.onnx"))
    ModelUpload.objects.get_or_create(model=m, owner=owner, visibility=visibility, defaults={"name": "net.onnx"})
    return m


def compilation(owner=None, visibility: str = "unlisted", passes=("fold-constants", "fuse-ops"),
                fused: bool = True, the_model: UploadedModel | None = None, **fields) -> Compilation:
    comp = Compilation.objects.create(model=the_model or model(), target="host", pipeline=",".join(passes),
                                      compiler_version="t", cache_key=fields.pop("cache_key", "key"),
                                      status="succeeded", owner=owner, visibility=visibility, **fields)
    for seq, e in enumerate(events(list(passes), fused)):
        CompilationEvent.objects.create(compilation=comp, seq=seq, type=e["type"], ts=1.0 + seq,
                                        payload={k: v for k, v in e.items() if k != "type"})
    return comp
