"""``python -m compiler.conformance``: the ONNX backend conformance suite through Prism.

Runs the node test cases of the installed ``onnx`` package and the ``simple``,
``pytorch-converted``, ``pytorch-operator`` and ``light`` model data the wheel ships, through
``compiler.backend.PrismBackend`` (pipeline O2, target host), each compared with its expected
outputs at its own tolerances (see ``compiler/conformance/worker.py``). Prints passed / failed /
errors / crashes / timeouts / skipped per op and in total, and writes a JSON report with
``--report PATH``.

Options (``--help`` shows each default):
    --suite NAME        node, simple, pytorch-converted, pytorch-operator, light (repeatable; default all)
    --filter REGEX      only cases whose id matches (``re.search``); an invalid regular expression, or
                        one that matches no case of the selected suites, is a usage error (exit 2)
    --subset ci         a deterministic sample: for every op the first and the middle case by name,
                        every simple and pytorch-operator case, every third pytorch-converted case
                        and light_squeezenet (about 5-10 minutes on 2 cores)
    --jobs N            worker processes (default 1)
    --timeout S         seconds per case before its worker is killed (default 120)
    --pipeline TEXT     pass pipeline (default O2); checked with ``compiler.expand_pipeline`` before
                        any case runs (an unknown pass is a usage error, exit 2)
    -v                  print every case's result as it finishes (failures are always printed)

Exit status 0 when every case that ran passed, 1 otherwise, 2 for bad arguments (argparse style: the
usage line and ``error: argument --OPTION: <why>`` on stderr).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from typing import Any

import onnx

from ..api import expand_pipeline
from ..errors import CompileError
from .cases import SUITES, all_cases
from .runner import run_cases
from .skips import load_skips, skip_reason

STATUSES = ("passed", "failed", "error", "crash", "timeout", "skipped")


def select_subset(cases: list[Any]) -> list[Any]:
    """The ``ci`` subset (see the module docstring); deterministic, every op of the node suite."""
    by_op: dict[str, list[Any]] = defaultdict(list)
    out = []
    for c in cases:
        if c.suite == "node":
            by_op[c.op].append(c)
    keep = set()
    for op_cases in by_op.values():
        keep.add(op_cases[0].id)
        keep.add(op_cases[len(op_cases) // 2].id)
    conv = [c for c in cases if c.suite == "pytorch-converted"]
    keep |= {c.id for c in conv[::3]}
    for c in cases:
        if c.id in keep or c.suite in ("simple", "pytorch-operator") or c.id == "light/light_squeezenet":
            out.append(c)
    return out


def summarize(cases: list[Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Totals per op, per suite and overall (counts of each status and pass rates)."""
    by_op: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    by_suite: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    for c in cases:
        st = results[c.id]["status"]
        by_op[c.op][st] += 1
        by_suite[c.suite][st] += 1

    def rates(d: dict[str, int]) -> dict[str, Any]:
        total = sum(d[s] for s in STATUSES)
        ran = total - d["skipped"]
        return dict(d, total=total, pass_rate=round(d["passed"] / total, 4) if total else None,
                    pass_rate_not_skipped=round(d["passed"] / ran, 4) if ran else None)

    overall = dict.fromkeys(STATUSES, 0)
    for d in by_suite.values():
        for s in STATUSES:
            overall[s] += d[s]
    return {"overall": rates(overall), "suites": {k: rates(v) for k, v in sorted(by_suite.items())},
            "ops": {k: rates(v) for k, v in sorted(by_op.items())}}


def _print_table(summary: dict[str, Any], out: Any) -> None:
    cols = ("passed", "failed", "error", "crash", "timeout", "skipped")
    print(f"{'op':<34}" + "".join(f"{c:>9}" for c in cols), file=out)
    for op, d in summary["ops"].items():
        print(f"{op:<34}" + "".join(f"{d[c]:>9}" for c in cols), file=out)
    print("-" * (34 + 9 * len(cols)), file=out)
    for name, d in list(summary["suites"].items()) + [("TOTAL", summary["overall"])]:
        pr = f"{100 * d['pass_rate']:.1f}%" if d["pass_rate"] is not None else "-"
        prn = f"{100 * d['pass_rate_not_skipped']:.1f}%" if d["pass_rate_not_skipped"] is not None else "-"
        print(f"{name:<34}" + "".join(f"{d[c]:>9}" for c in cols) + f"   pass {d['passed']}/{d['total']} = {pr}"
              f"; of not skipped {prn}", file=out)


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: X)`` after every option that has a default (not after those whose default is
    None or False, such as ``--filter`` or ``-v``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _regex(text: str) -> re.Pattern[str]:
    """``--filter``'s type: the compiled pattern, or argparse's one-line error naming the option."""
    try:
        return re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"invalid regular expression {text!r}: {e}") from None


def _pipeline(text: str) -> str:
    """``--pipeline``'s type: the text unchanged when ``compiler.expand_pipeline`` accepts it, else
    argparse's one-line error with the compiler's message (unknown pass, valid passes and presets)."""
    try:
        expand_pipeline(text)
    except CompileError as e:
        raise argparse.ArgumentTypeError(e.message) from None
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compiler.conformance", description=__doc__.split("\n")[0],
                                 formatter_class=_Defaults)
    ap.add_argument("--suite", action="append", choices=SUITES,
                    help="run only this suite (repeatable; without it: every suite)")
    ap.add_argument("--filter", metavar="REGEX", type=_regex,
                    help="only cases whose id matches this regular expression anywhere (re.search): "
                         "'cast' also matches test_castlike_* and *_broadcast*; '^test_cast_' is stricter; "
                         "an invalid expression, or one matching no case, exits 2")
    ap.add_argument("--subset", choices=("all", "ci"), default="all",
                    help="'ci': a sample covering every op (about 470 cases)")
    ap.add_argument("--jobs", type=int, default=1, help="cases run in parallel, each in its own worker process")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it counts as a timeout")
    ap.add_argument("--pipeline", default="O2", type=_pipeline,
                    help="pass pipeline text or preset (compiler.expand_pipeline; checked before any case runs)")
    ap.add_argument("--report", metavar="FILE", help="write the JSON report (every case, its status and message)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case as it finishes (without it, only those that did not pass)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = all_cases(tuple(args.suite or SUITES))
    if args.subset == "ci":
        cases = select_subset(cases)
    if args.filter:
        cases = [c for c in cases if args.filter.search(c.id)]
        if not cases:
            ap.error(f"argument --filter: no cases match {args.filter.pattern!r} in suite(s) "
                     f"{', '.join(args.suite or SUITES)}" + (" (subset ci)" if args.subset == "ci" else ""))
    skips = load_skips()
    results: dict[str, dict[str, Any]] = {}
    to_run = []
    for c in cases:
        reason = skip_reason(c, skips)
        if reason:
            results[c.id] = {"status": "skipped", "stage": None, "message": reason, "seconds": 0.0}
        else:
            to_run.append(c)
    print(f"{len(cases)} cases, {len(to_run)} to run, {len(cases) - len(to_run)} skipped; jobs={args.jobs}",
          file=sys.stderr, flush=True)
    done = [0]

    def report(case: Any, res: dict[str, Any]) -> None:
        done[0] += 1
        if args.verbose or res["status"] != "passed":
            where = f"[{res.get('stage')}] " if res.get("stage") else ""
            print(f"[{done[0]}/{len(to_run)}] {res['status'].upper():<7} {case.id} ({case.op}, "
                  f"{res['seconds']:.1f} s): {where}{res['message']}"[:400], file=sys.stderr, flush=True)

    results.update(run_cases(to_run, jobs=args.jobs, timeout_s=args.timeout, pipeline=args.pipeline,
                             on_result=report))
    summary = summarize(cases, results)
    _print_table(summary, sys.stdout)
    elapsed = time.perf_counter() - t0
    print(f"wall time {elapsed:.0f} s", file=sys.stdout)
    if args.report:
        rep = {"version": 1, "onnx_version": onnx.__version__, "command": "python -m compiler.conformance " +
               " ".join(argv if argv is not None else sys.argv[1:]), "pipeline": args.pipeline,
               "subset": args.subset, "wall_s": round(elapsed, 1), "summary": summary,
               "cases": [dict(id=c.id, suite=c.suite, op=c.op, **results[c.id]) for c in cases]}
        with open(args.report, "w") as f:
            json.dump(rep, f, indent=1)
    bad = sum(summary["overall"][s] for s in ("failed", "error", "crash", "timeout"))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
