"""``python -m compiler.bench``: Prism against ONNX Runtime over the model set, in one run.

For every model (the nine ``light_*`` models of the onnx wheel with seeded random weights,
``compiler.samples.randomized(name, seed=0)``, since their own weights are all 0.02; YOLOv8n and
PP-OCRv4 det from their wheels at 1x3x320x320; and the models of the kinds users bring that
``compiler.bench_models`` builds with seeded random weights: two transformer encoders, two
depthwise-separable CNNs, a recurrent model, a sub-millisecond encoder) and every thread count of
``--threads`` (default ``1,all``: one thread, then all the CPUs this process may use) it compiles with
``compiler.compile`` (target host, pipeline O2 by default), which runs Prism's code and ONNX Runtime
(CPU, the same number of intra-op threads, sequential) in the same child process on the same inputs,
alternating run by run, and prints one row: threads, Prism ms (median, one call of the entry
function), ONNX Runtime ms (median), ratio Prism/ONNX Runtime, Prism's speedup over its own 1-thread
time in the same child (rows above one thread), max abs error (and pass/fail of the verification,
rtol 1e-3, atol 1e-4 x max|output|), compile s (import + passes + lowering + codegen, wall; a kernel
found in the in-process or the on-disk kernel cache costs no codegen: ``PRISM_KERNEL_CACHE=0`` turns the
disk one off for a first compile's time). A model
whose comparison did not run (ONNX Runtime cannot run it) says ``not verified (<reason>)`` instead of
an error and does not fail the run; a compile failure or a difference does (exit status 1). The last
lines are the geometric means of the ratios per thread count over the models that ran. Timings are
medians and noisy on a shared machine: compare ratios from one run.

``python -m compiler.bench --kernels`` instead times the micro-kernel Conv (with its im2col) on
typical ResNet/Inception layers against numpy's matmul (OpenBLAS sgemm; set
``OPENBLAS_NUM_THREADS=1``) on the same GEMM shape, alternating the two, in GFLOP/s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

import numpy as np

import compiler
from compiler import bench_models, samples

from .bench_models import BENCH_MODELS
from .codegen.compile import compile_kernel
from .ir import Graph, TensorType
from .quant.bench import INT8_MODELS, bench_int8
from .quant.bench import format_table as int8_table
from .runtime.jit import JitModule
from .runtime.pool import available_threads, check_threads
from .schedule.microkernel import try_microkernel
from .targets import get_target

SAMPLE_MODELS = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
                 "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512", "yolov8n",
                 "ppocr_v4_det"]
MODELS = SAMPLE_MODELS + list(BENCH_MODELS)


def bench_model(name: str, *, target: str = "host", pipeline: str = "O2", threads: int | None = None) -> dict[str, Any]:
    """Compile, run, verify and time one model (a sample name or a ``compiler.bench_models`` name) at
    ``threads`` (None: all CPUs); returns its table row as a dict (:func:`result_row`)."""
    shapes = None
    if name in BENCH_MODELS:
        model: Any = str(bench_models.load(name))
    else:
        s = samples.get(name)
        model = samples.randomized(name, seed=0) if s.package is None else samples.fetch(name)
        shapes = s.input_shapes or None
    t0 = time.perf_counter()
    r = compiler.compile(model, target=target, pipeline=pipeline, input_shapes=shapes, threads=threads)
    return result_row(name, r, time.perf_counter() - t0)


def result_row(name: str, r: Any, wall_s: float) -> dict[str, Any]:
    """One model's table row from its ``compiler.CompileResult``: ``model``, ``ok``, ``error``,
    ``wall_s``, ``compile_s`` and, when it compiled, ``prism_ms``, ``onnxruntime_ms`` and ``ratio``
    (None where ONNX Runtime could not run the model), ``max_abs_error``, ``passed``, ``verified``
    (False when the comparison did not run; ``message`` then says why: ``compiler.driver.run.verify``),
    ``kernels``, ``distinct``."""
    row: dict[str, Any] = {"model": name, "ok": r.ok, "error": r.error, "wall_s": round(wall_s, 2)}
    row["threads"] = (r.of_type("model.timed") or [{}])[-1].get("threads") if r.ok else None
    st = r.stage_ms
    row["compile_s"] = round(sum(st.get(k, 0.0) for k in ("import", "passes", "lowering", "codegen")) / 1e3, 2)
    if r.ok:
        t = (r.of_type("model.timed") or [{}])[-1]
        v = (r.of_type("model.verified") or [{}])[-1]
        one = t.get("prism_ms_1t")
        row.update(prism_ms=t.get("prism_ms"), onnxruntime_ms=t.get("onnxruntime_ms"), ratio=t.get("ratio"),
                   speedup=round(one / t["prism_ms"], 3) if one and t.get("prism_ms") else None,
                   max_abs_error=v.get("max_abs_error"), passed=v.get("passed"),
                   verified=bool(v) and v.get("verified") is not False and v.get("passed") is not None,
                   kernels=len(r.of_type("kernel.compiled")),
                   distinct=len({e.get("symbol") for e in r.of_type("kernel.compiled")}))
        if v.get("message"):
            row["message"] = v["message"]
    return row


CONV_SHAPES = [  # (input NCHW, weight OIHW, pads): typical ResNet-50 / Inception layers
    ((1, 64, 56, 56), (64, 64, 3, 3), 1), ((1, 96, 28, 28), (96, 96, 3, 3), 1),
    ((1, 256, 14, 14), (256, 256, 3, 3), 1), ((1, 512, 7, 7), (512, 512, 3, 3), 1),
    ((1, 256, 56, 56), (64, 256, 1, 1), 0), ((1, 1024, 14, 14), (256, 1024, 1, 1), 0),
]


def bench_conv_kernels(repeats: int = 9) -> list[dict[str, Any]]:
    """GFLOP/s of the micro-kernel Conv (incl. its im2col) against numpy's matmul (OpenBLAS sgemm,
    set ``OPENBLAS_NUM_THREADS=1``) on the same GEMM (M = Co, K = Ci*KH*KW, N = OH*OW), one process."""
    rng = np.random.default_rng(0)
    tgt = get_target("host")
    rows = []
    for xs, ws, p in CONV_SHAPES:
        g = Graph("b")
        g.opset_imports = {"": 17}
        x = g.add_input("x", TensorType.of(np.dtype(np.float32), xs))
        w = g.add_constant("w", rng.standard_normal(ws).astype(np.float32))
        n = g.add_node("Conv", [x, w], ["y"], {"pads": [p] * 4}, name="conv")
        n.outputs[0].type = TensorType.of(np.dtype(np.float32), (1, ws[0], xs[2], xs[3]))
        lk = try_microkernel(n, "conv", 17, tgt)
        assert lk is not None
        ck = compile_kernel(lk.func, tgt)
        jit = JitModule([ck.obj])
        arrays = []
        for a in lk.args:
            buf = np.zeros(a.buffer.numel + 1024, np.float32)
            if a.kind == "const":
                assert a.data is not None  # a constant argument carries its data
                buf[:a.buffer.numel] = a.data.reshape(-1)
            elif a.name == "x":
                buf[:a.buffer.numel] = rng.standard_normal(a.buffer.numel)
            arrays.append(buf)
        fn, ptrs = jit.function(ck.symbol, len(arrays)), [a.ctypes.data for a in arrays]
        m_, k_, n_ = ws[0], ws[1] * ws[2] * ws[3], xs[2] * xs[3]
        am, bm = rng.standard_normal((m_, k_)).astype(np.float32), rng.standard_normal((k_, n_)).astype(np.float32)
        ours, theirs = [], []
        fn(*ptrs)
        am @ bm
        for _ in range(repeats):  # alternate, so both see the same load
            t = time.perf_counter()
            fn(*ptrs)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            am @ bm
            theirs.append(time.perf_counter() - t)
        flops = 2 * m_ * k_ * n_
        rows.append({"conv": f"{xs[1]}->{ws[0]} {ws[2]}x{ws[3]} @{xs[2]}x{xs[3]}", "gemm": f"{m_}x{k_}x{n_}",
                     "prism_gflops": flops / float(np.median(ours)) / 1e9,
                     "openblas_gflops": flops / float(np.median(theirs)) / 1e9})
    return rows


def _num(x: float | None, spec: str, width: int) -> str:
    return f"{x:>{width}{spec}}" if x is not None else f"{'-':>{width}}"


def _not_verified(r: dict[str, Any]) -> str:
    """``not verified (<reason>)`` for a row whose comparison with ONNX Runtime did not run."""
    reason = str(r.get("message") or "").strip()
    if reason.lower().startswith("not verified"):
        reason = reason[len("not verified"):].lstrip(" :")
    return f"not verified ({reason or 'no reason given'})"


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table, then the geometric-mean ratio per thread count (and Prism's geometric-
    mean speedup over one thread). A model whose verification did not run says ``not verified
    (<reason>)`` after its numbers; one ONNX Runtime could not run has ``-`` for its time and ratio and
    no part in the geometric mean."""
    head = (f"{'model':<20} {'thr':>3} {'Prism ms':>9} {'ORT ms':>9} {'ratio':>6} {'vs 1t':>6} {'max error':>10} "
            f"{'verified':>8} {'compile s':>9}")
    lines = [head, "-" * len(head)]
    ratios: dict[Any, list[float]] = {}
    speedups: dict[Any, list[float]] = {}
    for r in rows:
        if not r["ok"]:
            err = r["error"] or {}
            lines.append(f"{r['model']:<20} FAILED ({err.get('stage')}): {str(err.get('message'))[:70]}")
            continue
        thr = r.get("threads")
        if r.get("ratio") is not None:
            ratios.setdefault(thr, []).append(r["ratio"])
        if r.get("speedup"):
            speedups.setdefault(thr, []).append(r["speedup"])
        unverified = r.get("verified") is False or r.get("passed") is None
        verdict = "-" if unverified else "pass" if r["passed"] else "FAIL"
        line = (f"{r['model']:<20} {thr if thr is not None else '-':>3} {_num(r.get('prism_ms'), '.3f', 9)} "
                f"{_num(r.get('onnxruntime_ms'), '.3f', 9)} {_num(r.get('ratio'), '.2f', 6)} "
                f"{_num(r.get('speedup'), '.2f', 6)} {_num(None if unverified else r.get('max_abs_error'), '.2e', 10)} "
                f"{verdict:>8} {r['compile_s']:>9.2f}")
        lines.append(f"{line}  {_not_verified(r)}" if unverified else line)
    for thr, xs in sorted(ratios.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        at = f" at {thr} thread{'s' if thr != 1 else ''}" if thr is not None else ""
        sp = f"; Prism {_geomean(speedups[thr]):.2f}x its 1-thread time" if speedups.get(thr) else ""
        lines.append(f"geometric-mean ratio Prism/ONNX Runtime{at} over {len(xs)} models: {_geomean(xs):.2f}{sp}")
    return "\n".join(lines)


def thread_counts(text: str) -> list[int]:
    """``--threads`` text (``1,all``, ``2`` ...) as counts; ``all`` is every CPU this process may use.
    Raises CompileError(stage="request") for a count outside 1..that (``compiler.runtime.pool.check_threads``)."""

    out: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        n = available_threads() if part == "all" else check_threads(int(part) if part.lstrip("-").isdigit() else part)  # type: ignore[arg-type]
        if n not in out:
            out.append(n)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compiler.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated sample or bench model names")
    ap.add_argument("--threads", default="1,all", help="comma-separated thread counts; all: every CPU (default 1,all)")
    ap.add_argument("--target", default="host")
    ap.add_argument("--pipeline", default="O2")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    ap.add_argument("--kernels", action="store_true",
                    help="instead of models: micro-kernel Conv GFLOP/s against OpenBLAS sgemm on the same GEMM")
    ap.add_argument("--precision", choices=("fp32", "int8", "bf16", "fp16"), default="fp32",
                    help="int8: quantize each model of the INT8 set (compiler.quant.bench) and print Prism INT8 "
                         "beside ONNX Runtime FP32 and INT8 with SQNR / top-1 agreement; bf16/fp16 the same "
                         "with quantize{dtype=bf16|fp16}, against ONNX Runtime FP32")
    args = ap.parse_args(argv)
    if args.precision != "fp32":
        names = [m for m in args.models.split(",") if m] if args.models != ",".join(MODELS) else INT8_MODELS
        irows = [bench_int8(n, target=args.target, dtype=args.precision) for n in names]
        print(json.dumps(irows, indent=1) if args.json else int8_table(irows))
        return 0 if all(r["ok"] and r.get("verified") is not False for r in irows) else 1
    if args.kernels:
        krows = bench_conv_kernels()
        if args.json:
            print(json.dumps(krows, indent=1))
        else:
            print(f"{'conv':<24} {'GEMM MxKxN':<16} {'Prism GFLOP/s':>14} {'OpenBLAS GFLOP/s':>17}")
            for r in krows:
                print(f"{r['conv']:<24} {r['gemm']:<16} {r['prism_gflops']:>14.1f} {r['openblas_gflops']:>17.1f}")
        return 0
    rows = []
    counts = thread_counts(args.threads)
    for name in [m for m in args.models.split(",") if m]:
        for n in counts:
            row = bench_model(name, target=args.target, pipeline=args.pipeline, threads=n)
            rows.append(row)
            if not args.json:
                print(format_table([row]).splitlines()[2], file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1) if args.json else format_table(rows))
    return 0 if all(r["ok"] and r.get("passed") is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
