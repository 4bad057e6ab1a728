# Shared helpers for scripts/run.sh and scripts/test.sh (sourced, not run).
# Assumes the current directory is the repository root.

VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
export REDIS_URL
STARTED_REDIS_PIDFILE=""

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }

# ensure_venv REQUIREMENTS_FILE: create .venv with Python >= 3.11 and install the requirements
# (again only when the requirements files changed).
ensure_venv() {
  local req="$1"
  if [ ! -x "$PY" ]; then
    local base=""
    for cand in python3.11 python3.12 python3.13 python3; do
      if command -v "$cand" >/dev/null 2>&1 &&
         "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        base="$cand"; break
      fi
    done
    [ -n "$base" ] || die "Python 3.11 or newer is needed (Debian/Ubuntu: sudo apt-get install python3 python3-venv)"
    say "creating $VENV with $base"
    "$base" -m venv "$VENV" || die "could not create $VENV (Debian/Ubuntu: sudo apt-get install python3-venv)"
    "$PY" -m pip install -q --upgrade pip
  fi
  local stamp="$VENV/.prism-$(basename "$req").sha256"
  local want
  want="$(cat requirements*.txt | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "installing Python packages from $req"
    "$PY" -m pip install -q -r "$req"
    echo "$want" > "$stamp"
  fi
}

# build_frontend: npm ci + npm run build in frontend/ when it exists and its sources changed.
build_frontend() {
  [ -f frontend/package.json ] || return 0
  command -v npm >/dev/null 2>&1 || die "npm is needed to build the browser app (Node.js 20: sudo apt-get install nodejs npm)"
  if [ ! -d frontend/node_modules ] || [ frontend/package-lock.json -nt frontend/node_modules/.package-lock.json ]; then
    say "installing npm packages (npm ci)"
    (cd frontend && npm ci --no-audit --no-fund)
  fi
  if [ ! -f frontend/dist/index.html ] ||
     [ -n "$(find frontend/src frontend/index.html frontend/package.json frontend/vite.config.ts \
              -newer frontend/dist/index.html 2>/dev/null | head -1)" ]; then
    say "building the browser app (npm run build)"
    (cd frontend && npm run build)
  fi
}

redis_ping() {
  "$PY" - "$1" <<'PYEOF' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=2).ping()
PYEOF
}

# ensure_redis: Redis must answer at REDIS_URL; if it does not and the URL is local, start a
# redis-server (no persistence) under var/redis; stop_redis stops only a server started here.
ensure_redis() {
  redis_ping "$REDIS_URL" && return 0
  local hostport host port
  hostport="$("$PY" -c 'import sys, urllib.parse as u; p = u.urlparse(sys.argv[1]); print(p.hostname or "127.0.0.1", p.port or 6379)' "$REDIS_URL")"
  host="${hostport% *}"; port="${hostport#* }"
  case "$host" in
    127.0.0.1|localhost|::1) ;;
    *) die "Redis is not reachable at $REDIS_URL; start it there or set REDIS_URL to a running Redis" ;;
  esac
  command -v redis-server >/dev/null 2>&1 || die "Redis is not reachable at $REDIS_URL and redis-server is not installed: install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or set REDIS_URL to a running Redis"
  mkdir -p "$PWD/var/redis"
  say "starting redis-server on 127.0.0.1:$port (logs: var/redis/redis.log)"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir "$PWD/var/redis" --logfile "$PWD/var/redis/redis.log" --pidfile "$PWD/var/redis/redis.pid"
  STARTED_REDIS_PIDFILE="$PWD/var/redis/redis.pid"
  for _ in $(seq 50); do redis_ping "$REDIS_URL" && return 0; sleep 0.2; done
  die "redis-server did not come up on port $port; see var/redis/redis.log"
}

stop_redis() {
  if [ -n "$STARTED_REDIS_PIDFILE" ] && [ -f "$STARTED_REDIS_PIDFILE" ]; then
    kill "$(cat "$STARTED_REDIS_PIDFILE")" 2>/dev/null || true
  fi
}
