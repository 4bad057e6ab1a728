#!/usr/bin/env bash
# Run every test: pytest over tests/ (arguments are passed to pytest) and, when frontend/ exists,
# its build and `npm test`. Needs Redis at PRISM_TEST_REDIS_URL's server (started locally if not).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_venv requirements-dev.txt
ensure_redis
trap stop_redis EXIT
status=0
if [ -f frontend/package.json ]; then
  build_frontend
fi
say "pytest"
"$PY" -m pytest tests "$@" || status=$?
if [ -f frontend/package.json ]; then
  say "npm test (frontend)"
  (cd frontend && npm test) || status=1
fi
if [ "$status" -ne 0 ]; then
  printf '\033[1;31mtests failed\033[0m\n'
else
  printf '\033[1;32mall tests passed\033[0m\n'
fi
exit "$status"
