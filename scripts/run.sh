#!/usr/bin/env bash
# Set up and run Prism: virtualenv, packages, browser app, migrations, Redis, one Celery worker and
# the daphne web server. Environment: PORT (8000), HOST (127.0.0.1), REDIS_URL, DATABASE_URL,
# PRISM_WORKER_CONCURRENCY (1). Logs go to var/log/. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PORT="${PORT:-8000}"
HOST="${HOST:-127.0.0.1}"
ensure_venv requirements.txt
build_frontend
SECRET_FILE="${PRISM_VAR_DIR:-var}/secret_key"
if [ -z "${DJANGO_SECRET_KEY:-}" ] && [ ! -s "$SECRET_FILE" ]; then
  say "generating a secret key (kept in $SECRET_FILE)"
  mkdir -p "$(dirname "$SECRET_FILE")"
  (umask 077; "$PY" -c 'import secrets; print(secrets.token_urlsafe(50))' > "$SECRET_FILE")
fi
say "migrating the database"
"$PY" manage.py migrate --noinput -v 0
ensure_redis

mkdir -p var/log
: > var/log/worker.log
: > var/log/web.log
WORKER_PID=""; WEB_PID=""
cleanup() {
  trap - EXIT INT TERM
  [ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null || true
  [ -n "$WORKER_PID" ] && kill "$WORKER_PID" 2>/dev/null || true
  [ -n "$WORKER_PID" ] && wait "$WORKER_PID" 2>/dev/null || true
  [ -n "$WEB_PID" ] && wait "$WEB_PID" 2>/dev/null || true
  stop_redis
}
# Ctrl-C or a TERM is a request to stop: stop everything and exit 0. The trap runs when the signal
# reaches this shell; when it does not (INT is ignored in a job started with `&` by a shell without
# job control) the children that got it exit on their own, and the wait below sees that instead.
stopped() { cleanup; say "Prism stopped"; exit 0; }
trap cleanup EXIT
trap stopped INT TERM

say "starting a Celery worker (logs: var/log/worker.log)"
"$VENV/bin/celery" -A explorer worker -l info -P prefork -c "${PRISM_WORKER_CONCURRENCY:-1}" \
  -Q "${PRISM_COMPILE_QUEUE:-prism.compile}" -n "prism@%h" >>var/log/worker.log 2>&1 &
WORKER_PID=$!
say "starting the web server (logs: var/log/web.log)"
"$VENV/bin/daphne" -b "$HOST" -p "$PORT" explorer.asgi:application >>var/log/web.log 2>&1 &
WEB_PID=$!

for _ in $(seq 240); do
  kill -0 "$WEB_PID" 2>/dev/null || { tail -20 var/log/web.log; die "the web server exited"; }
  kill -0 "$WORKER_PID" 2>/dev/null || { tail -20 var/log/worker.log; die "the worker exited"; }
  if grep -q " ready\." var/log/worker.log && "$PY" - "http://127.0.0.1:$PORT/api/health" <<'PYEOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2)
PYEOF
  then
    echo "Prism is running at http://127.0.0.1:$PORT"
    break
  fi
  sleep 0.5
done
grep -q " ready\." var/log/worker.log || die "Prism did not come up in 2 minutes; see var/log/"
status=0 exited=""
wait -n -p exited "$WEB_PID" "$WORKER_PID" || status=$?
# A process that was told to stop is not an error: daphne exits 0 on INT/TERM, celery 0 on TERM and
# 1 on INT after logging its warm (or cold) shutdown; 130/143: killed by INT/TERM.
case "$status" in
  0|130|143) stopped ;;
esac
if [ "$exited" = "$WORKER_PID" ] && tail -20 var/log/worker.log | grep -Eq "(Warm|Cold) shutdown"; then
  stopped
fi
die "a Prism process exited with status $status; see var/log/web.log and var/log/worker.log"
