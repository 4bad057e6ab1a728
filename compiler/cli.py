"""Command line: ``python -m compiler compile MODEL --target host --pipeline O2 --input-shape
NAME=1,3,224,224 --print-after-all --emit-dir DIR --json --check-passes [--verify] [--benchmark]``.

MODEL is an ONNX file or a sample name (``python -m compiler.samples list``). A CompileError is
printed as one line on stderr and the exit status is 2; never a traceback. ``--json`` prints the
report of DESIGN.md "Command line" (``CompileResult.to_dict()``). ``--emit-dir`` writes per-pass IR
(``NN-<pass>.ir``), per-kernel loop IR / LLVM IR / assembly where the back end emitted them, and
``report.json``. Other commands: ``inspect MODEL``, ``passes``, ``pipelines``, ``targets``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from . import api, samples
from .api import compile as compile_model
from .api import inspect_model
from .errors import CLI_SYNTAX, CompileError
from .frontend import parse_input_shape
from .frontend.dim_range import parse_dim_range
from .frontend.input_values import parse_input_value
from .result import json_default
from .runtime.pool import available_threads, check_threads
from .tune.errors import TuneError


def _mib(n: Any) -> str:
    return f"{n / 2**20:.2f} MiB" if isinstance(n, int | float) else "?"


def _memory_lines(mem: dict[str, Any]) -> list[str]:
    arena, none, low = mem.get("arena_bytes"), mem.get("no_sharing_bytes"), mem.get("lower_bound_bytes")
    lines = [f"memory: arena {arena} bytes ({_mib(arena)}), no sharing {none} bytes ({_mib(none)}), "
             f"max-live lower bound {low} bytes ({_mib(low)})"]
    if isinstance(arena, int | float) and arena > 0 and isinstance(none, int | float) and isinstance(low, int | float):
        lines.append(f"memory: no-sharing / arena = {none / arena:.2f}x, arena / lower bound = "
                     f"{arena / low if low else float('inf'):.3f}x")
    rng = mem.get("dim_range")
    if rng:  # --dim-range: how the range is served (compiler.driver.dim_range)
        lines.append(f"dim range {rng['dim']}={rng['min']}..{rng['max']} ({rng['mode']}): {rng['message']}")
    return lines


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:120] or "_"


def _emit_files(emit_dir: Path, report: dict[str, Any], events: list[dict[str, Any]]) -> None:
    emit_dir.mkdir(parents=True, exist_ok=True)
    for p in report["passes"]:  # a model pass's snapshot is ONNX text (onnx.printer), a graph pass's the graph IR
        suffix = ".onnx.txt" if p.get("level") == "onnx" else ".ir"
        (emit_dir / f"{p['index']:02d}-{_safe(p['name'])}{suffix}").write_text(p["ir"] + "\n")
    for e in events:
        k = _safe(str(e.get("kernel", "")))
        if e["type"] == "kernel.lowered" and e.get("loop_ir"):
            (emit_dir / f"{k}.loop").write_text(str(e["loop_ir"]) + "\n")
        if e["type"] == "kernel.compiled":
            for key, suffix in (("llvm_ir", ".ll"), ("llvm_ir_optimized", ".opt.ll"), ("asm", ".s")):
                if e.get(key):
                    (emit_dir / f"{k}{suffix}").write_text(str(e[key]))
    (emit_dir / "report.json").write_text(json.dumps(report, indent=1, default=json_default) + "\n")


def _print_event(e: dict[str, Any], args: argparse.Namespace) -> None:
    t = e["type"]
    if t == "compile.started":
        m = e["model"]
        print(f"compiling {m['name']} (opset {m['opset']}, sha256 {m['sha256'][:12]}) for {e['target']}")
        print(f"pipeline: {e['pipeline'] or '(empty)'}")
        for name, vals in (m.get("input_values") or {}).items():
            print(f"input value: {name} = {', '.join(map(str, vals))} (bound: a constant of the compiled model)")
        for note in (m.get("storage") or {}).get("notes", []):  # narrow storage types (compiler.driver.request.legalize_model)
            print(f"storage: {note}")
    elif t == "pass.finished":
        s = e["stats"]
        counts = f"onnx nodes {s.get('nodes')}, initializers {s.get('initializers')}" if e.get("level") == "onnx" \
            else f"nodes {s.get('nodes')}, groups {s.get('groups')}"
        print(f"[{e['index']:2d}] {e['name']:<34} {e['duration_ms']:9.1f} ms  "
              f"{'changed' if e['changed'] else 'unchanged':<9}  {counts}, "
              f"constants {_mib(s.get('constant_bytes'))}, remarks {len(e['remarks'])}")
        if args.remarks:
            for r in e["remarks"]:
                print(f"     {r['kind']:<8} {r['message']}")
        if args.print_after_all:
            print(f"// ----- IR Dump After {e['name']} (pass {e['index']}) -----")
            print(e["ir"])
    elif t == "graph.fused" and e.get("control"):  # run-time If/Loop/Scan (compiler.driver.control)
        for d in e["control"]:
            print(f"control flow: {d['op']} {d['node']!r}: {d['decision']} ({', '.join(d['bodies'])})")
    elif t == "tune.applied":
        for w in e["warnings"]:
            print(f"warning: {w}", file=sys.stderr)
        print(e["message"])
    elif t == "memory.planned":
        for line in _memory_lines(e):
            print(line)
    elif t == "model.timed":
        print(f"model: prism {e.get('prism_ms')} ms, onnxruntime {e.get('onnxruntime_ms')} ms, "
              f"ratio {e.get('ratio')}" + (f"; onnxruntime int8 {e.get('onnxruntime_int8_ms')} ms, ratio "
                                           f"{e.get('ratio_int8')}" if "onnxruntime_int8_ms" in e else ""))
    elif t == "model.accuracy":
        c = e["criterion"]
        outs = ", ".join(f"{k}: SQNR {v['sqnr_db']} dB" + (f", top-1 {100 * v['top1']:.1f}%" if "top1" in v else "")
                         for k, v in e["outputs"].items())
        print(f"accuracy vs FP32 ({e['samples']} samples): {outs}; criterion {'passed' if c['passed'] else 'FAILED'}")
    elif t == "model.verified" and e.get("verified") is False:
        print(f"verification: {e.get('message')}")
    elif t == "model.verified":
        print(f"verification: {'passed' if e.get('passed') else 'FAILED'} (max abs error {e.get('max_abs_error')}, "
              f"max rel error {e.get('max_rel_error')})")
        for note in e.get("notes", []):
            print(f"verification: note: {note}")
    elif t == "compile.finished":
        stages = ", ".join(f"{k} {v:.0f} ms" for k, v in e["stage_ms"].items())
        print(f"compiled in {e['duration_ms']:.0f} ms ({stages})")


def _resolve_model(model: str, shapes: dict[str, list[int]]) -> tuple[str, dict[str, list[int]] | None]:
    if not Path(model).exists() and model in samples.SAMPLES:
        path = samples.fetch(model)
        sample_shapes = samples.SAMPLES[model].input_shapes
        merged = {**sample_shapes, **shapes}
        return str(path), (merged or None)
    return model, (shapes or None)


def cmd_compile(args: argparse.Namespace) -> int:
    shapes: dict[str, list[Any]] = {}
    for text in args.input_shape or []:
        name, dims = parse_input_shape(text)
        shapes[name] = dims
    model, input_shapes = _resolve_model(args.model, shapes)
    if args.tune_budget is not None:  # tune first, into --tuning-db, then compile with it
        if not args.tuning_db:
            raise CompileError("request", "--tune-budget needs --tuning-db FILE (where the tuned schedules go)")
        from .tune import (
            tune_model,  # deferred: compiler.tune sits above the driver (and loads XGBoost)
        )

        tune_model(model if args.random_weights is None else samples.randomized(model, seed=args.random_weights),
                   budget_s=args.tune_budget, database=args.tuning_db, target=args.target, pipeline=args.pipeline,
                   input_shapes=input_shapes, threads=args.threads,
                   on_event=None if args.json else _print_tune_event)
    values = dict(parse_input_value(text) for text in args.input_value or []) or None
    ranges = dict(parse_dim_range(text) for text in args.dim_range or []) or None
    check_threads(args.threads)  # a one-line usage error before anything is read
    if args.random_weights is not None:
        model = samples.randomized(model, seed=args.random_weights)  # type: ignore[assignment]
    on_event = None if args.json else (lambda e: _print_event(e, args))
    result = compile_model(model, target=args.target, pipeline=args.pipeline, input_shapes=input_shapes,
                           input_values=values, dim_ranges=ranges, on_event=on_event, verify=args.verify, benchmark=args.benchmark,
                           check_passes=args.check_passes, backend=not args.no_backend,
                           calibration_data=args.calibration_data, threads=args.threads, tuning_db=args.tuning_db)
    report = result.to_dict()
    if args.emit_dir:
        _emit_files(Path(args.emit_dir), report, result.events)
    if args.json:
        print(result.to_json(indent=1))
    elif args.check_passes and result.ok and any(c.get("passed") is None for c in result.checks):
        print("check-passes: skipped: " + "; ".join(c["skipped"] for c in result.checks if c.get("passed") is None))
    elif args.check_passes and result.ok:
        what = "the legalized model (float32 compute)" if (result.model or {}).get("storage") else "the original model"
        print(f"check-passes: every pass matches ONNX Runtime on {what} (rtol 1e-4, atol 1e-5)")
    if not result.ok:
        err = result.error or {}
        where = "".join(f" [{k} {err[k]}]" for k in ("pass", "node", "kernel") if err.get(k))
        print(f"error: {err.get('stage')}: {err.get('message')}{where}", file=sys.stderr)
        return 2
    return 0


def _print_tune_event(e: dict[str, Any]) -> None:
    t = e["type"]
    if t == "tune.started":
        print(f"tuning {e['model']} for {e['target']}: {len(e['tasks'])} workloads of {e['kernels']} kernels, "
              f"budget {e['budget_s']:g} s, {e['threads']} thread(s)")
    elif t == "tune.progress" and "measuring" in e:  # a batch submitted
        print(f"[{e['elapsed_s']:7.1f} s] {e['kernel']}: measuring {e['measuring']} candidates")
    elif t == "tune.progress":
        best, default = e["best_us"], e["default_us"]
        gain = f" ({default / best:.2f}x)" if best and default else ""
        print(f"[{e['elapsed_s']:7.1f} s] {e['kernel']}: {e['trials']} trials, best "
              f"{best if best is None else f'{best:.1f}'} us, default {default if default is None else f'{default:.1f}'}"
              f" us{gain}" + (f", {e['discarded']} discarded" if e["discarded"] else ""))
        for m in e.get("messages", []):
            print(f"    discarded: {m}")
    elif t == "tune.finished":
        stored = sum(1 for k in e["tuned"] if k["stored"])
        why = _TUNE_ENDS.get(str(e.get("reason")), "stopped" if e["stopped"] else "")
        print(f"tuned in {e['duration_s']:.0f} s: {e['trials']} trials, {stored} workloads stored in {e['database']}"
              + (f" ({why})" if why else "") + (f": {e['error']}" if e.get("error") else ""))


_TUNE_ENDS = {"budget": "budget spent", "stopped": "stopped", "exhausted": "every candidate schedule measured",
              "error": "ended by an error"}  # tune.finished's reason


def cmd_tune(args: argparse.Namespace) -> int:
    from .tune import (
        tune_model,  # deferred: compiler.tune sits above the driver (and loads XGBoost)
    )

    shapes: dict[str, list[Any]] = dict(parse_input_shape(text) for text in args.input_shape or [])
    model, input_shapes = _resolve_model(args.model, shapes)
    if args.random_weights is not None:
        model = samples.randomized(model, seed=args.random_weights)  # type: ignore[assignment]
    r = tune_model(model, budget_s=args.budget, database=args.db, target=args.target, pipeline=args.pipeline,
                   input_shapes=input_shapes, threads=args.threads, on_event=_print_tune_event,
                   batch_size=args.batch, max_tasks=args.max_tasks, retune=args.retune)
    if r.skipped:
        print(f"{r.skipped} workloads already in {args.db}: not measured again (--retune to tune them)")
    if r.reason == "error":
        print(f"error: the search ended early: {r.error}", file=sys.stderr)
        return 1
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    model, _ = _resolve_model(args.model, {})
    print(json.dumps(inspect_model(model), indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    # `prism` when run as the console script (pyproject's [project.scripts]), else `python -m compiler`
    prog = "prism" if os.path.basename(sys.argv[0]) == "prism" else "python -m compiler"
    ap = argparse.ArgumentParser(
        prog=prog, description="Prism's ML compiler", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="also: python -m compiler.samples (list and fetch sample models); python -m compiler.bench (Prism\n"
               "against ONNX Runtime on the model set, --threads 1,all); the compiled model as a shared library to\n"
               "run without Prism: the explorer's module.so download, or compiler.standalone.shared_library in\n"
               "Python. `prism` is this command once the package is installed (pip install .)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile an ONNX model")
    c.add_argument("model", help="an .onnx file or a sample name")
    c.add_argument("--target", default="host")
    c.add_argument("--pipeline", default="O2", help="preset O0..O3 or pass text, e.g. fold-constants,fuse-ops")
    c.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...", help="bind an input's shape")
    c.add_argument("--input-value", action="append", metavar="NAME=V1,V2,...",
                   help="bind an input's value (a constant of the compiled model; folds an If on it)")
    c.add_argument("--dim-range", action="append", metavar="NAME=MIN..MAX",
                   help="one artifact for every size of a dim named in --input-shape (e.g. N=1..8)")
    c.add_argument("--print-after-all", action="store_true", help="print the IR after every pass")
    c.add_argument("--remarks", action="store_true", help="print every remark under its pass")
    c.add_argument("--emit-dir", metavar="DIR", help="write per-pass IR and per-kernel code here")
    c.add_argument("--json", action="store_true", help="print the JSON report")
    c.add_argument("--check-passes", action="store_true",
                   help="after every pass run the exported model in ONNX Runtime and compare")
    c.add_argument("--verify", action="store_true", help="verify outputs against ONNX Runtime (back end)")
    c.add_argument("--benchmark", action="store_true", help="time kernels and the model (back end)")
    c.add_argument("--random-weights", type=int, metavar="SEED",
                   help="replace the light_* models' ConstantOfShape weights by seeded random ones")
    c.add_argument("--no-backend", action="store_true", help="stop after the graph passes")
    c.add_argument("--calibration-data", metavar="FILE.npz",
                   help="calibration inputs of the quantize pass: one array per graph input, samples first")
    c.add_argument("--threads", type=int, metavar="N",
                   help="threads of the compiled model's parallel loops and of ONNX Runtime beside it "
                   f"(1..{available_threads()}; default all the CPUs this process may use)")
    c.add_argument("--tuning-db", metavar="FILE.jsonl",
                   help="schedule each kernel by its workload's best record in this tuning database (python -m "
                   "compiler tune writes it)")
    c.add_argument("--tune-budget", type=float, metavar="SECONDS",
                   help="first tune the model's kernels for this long into --tuning-db (python -m compiler tune)")
    c.set_defaults(func=cmd_compile)
    t = sub.add_parser("tune", help="search schedules for a model's kernels and store the best in a tuning database")
    t.add_argument("model", help="an .onnx file or a sample name")
    t.add_argument("--budget", "--tune-budget", type=float, required=True, metavar="SECONDS",
                   help="wall-clock seconds for the whole run (passes, search and measurements)")
    t.add_argument("--db", required=True, metavar="FILE.jsonl", help="the tuning database (JSON lines; appended)")
    t.add_argument("--target", default="host")
    t.add_argument("--pipeline", default="O2")
    t.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...")
    t.add_argument("--threads", type=int, metavar="N", help="threads kernels are timed at (default: all CPUs)")
    t.add_argument("--batch", type=int, default=8, help="candidates per measurement batch (one child each)")
    t.add_argument("--max-tasks", type=int, metavar="N", help="tune only the N workloads of largest estimated time")
    t.add_argument("--retune", action="store_true", help="tune workloads the database already holds too")
    t.add_argument("--random-weights", type=int, metavar="SEED", help="as compile --random-weights")
    t.set_defaults(func=cmd_tune)
    i = sub.add_parser("inspect", help="describe a model's inputs and outputs")
    i.add_argument("model")
    i.set_defaults(func=cmd_inspect)
    for name, fn in (("passes", "list_passes"), ("pipelines", "list_pipelines"), ("targets", "list_targets")):
        p = sub.add_parser(name, help=f"list {name}")
        p.set_defaults(func=lambda a, fn=fn: (print(json.dumps(getattr(api, fn)(), indent=1, default=str)), 0)[1])
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    token = CLI_SYNTAX.set(True)  # hints in messages name this interface's options
    try:
        return int(args.func(args))
    except (CompileError, TuneError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader (e.g. `| head`) went away: stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # never a traceback for the user
        print(f"error: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 2
    finally:
        CLI_SYNTAX.reset(token)
