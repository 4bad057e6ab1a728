"""``python -m compiler.bench``: Prism against ONNX Runtime over the model set, in one run.

For every model (the nine ``light_*`` models of the onnx wheel with seeded random weights,
``compiler.samples.randomized(name, seed=0)``, since their own weights are all 0.02; YOLOv8n and
PP-OCRv4 det from their wheels at 1x3x320x320) it compiles with ``compiler.compile`` (target host,
pipeline O2 by default), which runs both Prism's code and ONNX Runtime (CPU, 1 intra-op thread,
sequential) in the same child process on the same inputs, and prints one row: Prism ms (median),
ONNX Runtime ms (median), ratio Prism/ONNX Runtime, max abs error (and pass/fail of the
verification, rtol 1e-3, atol 1e-4 x max|output|), compile s (import + passes + lowering + codegen,
wall). The last line is the geometric mean of the ratios over the models that ran. Timings are
single-thread medians and noisy on a shared machine: compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

MODELS = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2", "light_resnet50",
          "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512", "yolov8n", "ppocr_v4_det"]


def bench_model(name: str, *, target: str = "host", pipeline: str = "O2") -> dict[str, Any]:
    """Compile, run, verify and time one model; returns its table row as a dict."""
    import compiler
    from compiler import samples

    s = samples.get(name)
    model = samples.randomized(name, seed=0) if s.package is None else samples.fetch(name)
    t0 = time.perf_counter()
    r = compiler.compile(model, target=target, pipeline=pipeline, input_shapes=s.input_shapes or None)
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {"model": name, "ok": r.ok, "error": r.error, "wall_s": round(wall, 2)}
    st = r.stage_ms
    row["compile_s"] = round(sum(st.get(k, 0.0) for k in ("import", "passes", "lowering", "codegen")) / 1e3, 2)
    if r.ok:
        t = (r.of_type("model.timed") or [{}])[-1]
        v = (r.of_type("model.verified") or [{}])[-1]
        row.update(prism_ms=t.get("prism_ms"), onnxruntime_ms=t.get("onnxruntime_ms"), ratio=t.get("ratio"),
                   max_abs_error=v.get("max_abs_error"), passed=v.get("passed"),
                   kernels=len(r.of_type("kernel.compiled")),
                   distinct=len({e.get("symbol") for e in r.of_type("kernel.compiled")}))
    return row


def format_table(rows: list[dict[str, Any]]) -> str:
    head = f"{'model':<20} {'Prism ms':>9} {'ORT ms':>9} {'ratio':>6} {'max error':>10} {'verified':>8} {'compile s':>9}"
    lines = [head, "-" * len(head)]
    ratios = []
    for r in rows:
        if not r["ok"]:
            err = r["error"] or {}
            lines.append(f"{r['model']:<20} FAILED ({err.get('stage')}): {str(err.get('message'))[:70]}")
            continue
        ratios.append(r["ratio"])
        lines.append(f"{r['model']:<20} {r['prism_ms']:>9.2f} {r['onnxruntime_ms']:>9.2f} {r['ratio']:>6.2f} "
                     f"{r['max_abs_error']:>10.2e} {'pass' if r['passed'] else 'FAIL':>8} {r['compile_s']:>9.2f}")
    if ratios:
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"geometric-mean ratio Prism/ONNX Runtime over {len(ratios)} models: {g:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compiler.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated sample names")
    ap.add_argument("--target", default="host")
    ap.add_argument("--pipeline", default="O2")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    args = ap.parse_args(argv)
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        row = bench_model(name, target=args.target, pipeline=args.pipeline)
        rows.append(row)
        if not args.json:
            print(format_table([row]).splitlines()[-1 if not row["ok"] else 2], file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1) if args.json else format_table(rows))
    return 0 if all(r["ok"] and r.get("passed") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
