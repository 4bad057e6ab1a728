"""Write the benchmark's grown model set to the cache: ``python scripts/export_bench_models.py [NAME ...]``.

Builds each model of ``compiler.bench_models.BENCH_MODELS`` (two transformer encoders, two
depthwise-separable CNNs, a recurrent model; seeded random weights, written as exporters write them)
and saves it under ``~/.cache/prism/models/<name>.onnx`` (``PRISM_CACHE`` overrides the root), where
``python -m compiler.bench`` finds it; never into the repository. Prints one line per model: its
path, node count and size. ``--force`` rebuilds models already cached.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx  # noqa: E402

from compiler import bench_models  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models to write (default all: {', '.join(bench_models.BENCH_MODELS)})")
    ap.add_argument("--force", action="store_true", help="rebuild models already in the cache")
    args = ap.parse_args(argv)
    for name in args.names or list(bench_models.BENCH_MODELS):
        if name not in bench_models.BENCH_MODELS:
            print(f"error: unknown bench model {name!r}; known: {', '.join(bench_models.BENCH_MODELS)}",
                  file=sys.stderr)
            return 2
        if args.force:
            (bench_models.cache_dir() / f"{name}.onnx").unlink(missing_ok=True)
        path = bench_models.load(name)
        m = onnx.load_model(str(path), load_external_data=False)
        print(f"{name:<18} {path}  {len(m.graph.node)} nodes  {path.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
