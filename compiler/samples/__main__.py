"""``python -m compiler.samples list`` / ``fetch NAME... | --all``: lists the sample models (name, cached or
not, input shapes, description) and fetches them into the cache (exit 2 with the error when a fetch fails).

The command line lives here, not in ``compiler/samples/__init__.py``: ``import compiler`` imports the
samples (the driver resolves sample names), so ``runpy`` would find a ``compiler.samples`` run as
``__main__`` already imported and warn (RuntimeWarning: found in sys.modules ... prior to execution).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import CompileError
from . import SAMPLES, fetch, list_samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compiler.samples", description="List and fetch sample models")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the samples")
    f = sub.add_parser("fetch", help="download and cache sample models")
    f.add_argument("names", nargs="*")
    f.add_argument("--all", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        for s in list_samples():
            shapes = " ".join(f"{k}={','.join(map(str, v))}" for k, v in s["input_shapes"].items())
            print(f"{s['name']:<20} {'cached' if s['cached'] else '-':<7} {shapes}  {s['description']}")
        return 0
    names = list(SAMPLES) if args.all else args.names
    if not names:
        ap.error("give sample names or --all")
    try:
        for n in names:
            print(f"{n}: {fetch(n)}")
    except CompileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
