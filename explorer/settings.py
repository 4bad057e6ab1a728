"""Django settings for Prism's explorer. Everything a deployment changes comes from the environment.

Environment:
    DATABASE_URL                 default sqlite file var/prism.sqlite3 (dj-database-url syntax)
    REDIS_URL                    default redis://127.0.0.1:6379/0 (Celery broker and channel layer)
    PRISM_STACK                  this deployment's name: the prefix of every Redis key it uses (Celery
                                 queues and their bookkeeping, channel-layer groups, rate counters), so
                                 that stacks sharing one Redis database never take each other's work;
                                 default "prism-<10 hex digits of the database's identity>" (the SQLite
                                 file's absolute path, or engine, host, port and name), the same for the
                                 web server and the workers of one database
    PRISM_VAR_DIR                where the SQLite file and uploaded models live, default var/
    PRISM_FRONTEND_DIST          the built browser app (index.html, assets/), default frontend/dist of
                                 the checkout (set it when Prism is installed as a package)
    PRISM_MAX_UPLOAD_BYTES       largest accepted model upload in bytes, default 200 MB
    PRISM_COMPILE_TIME_LIMIT_S   hard time limit of one compilation in seconds, default 300
    PRISM_COMPILE_SOFT_TIME_LIMIT_S  soft limit (ends the log saying so), default 15 s before it
    PRISM_STALE_AFTER_S          a running compilation whose heartbeat is older is reaped, default 60
    PRISM_HEARTBEAT_S            heartbeat interval of a running compilation, default 5
    PRISM_REAP_INTERVAL_S        how often each worker looks for stale compilations, default 30
    PRISM_REQUEUE_AFTER_S        a compilation still queued this long after its task message was sent,
                                 with no message for it left in Redis (lost: Redis restarted or the
                                 queue purged), is queued again by the reaper, default 120
    PRISM_MAX_ARENA_BYTES, PRISM_MAX_INPUT_BYTES, PRISM_MAX_CONSTANT_BYTES,
    PRISM_CHILD_MAX_ADDRESS_SPACE_BYTES, PRISM_CHILD_MAX_CPU_S
                                 limits of running generated code, read by the compiler
                                 (compiler/runtime/limits.py: defaults from the machine's memory M:
                                 M/4, M/16 per input, M/8, M/2, 900 s)
    PRISM_KERNEL_CACHE_BYTES     most bytes of compiled kernels (object code and texts) a process keeps,
                                 least recently used evicted first, read by the compiler
                                 (compiler/codegen/cache.py), default 256 MiB; 0 keeps none
    PRISM_KERNEL_CACHE_DIR, PRISM_KERNEL_CACHE_DISK_BYTES, PRISM_KERNEL_CACHE
                                 the on-disk kernel cache that every compiling process and stack of the
                                 machine share (compiler/codegen/disk_cache.py): its folder (default
                                 $XDG_CACHE_HOME/prism/kernels or ~/.cache/prism/kernels), its cap in
                                 bytes (default 512 MiB, least recently used removed), 0 turns it off
    PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES  RLIMIT_AS of each worker pool process (the compile itself),
                                 default max(M/2, 4 GiB): a model that needs more fails naming it
    PRISM_WORKER_MAX_MEMORY_KB   a pool process whose resident memory exceeds this after a task is
                                 replaced (Celery's worker_max_memory_per_child), default M/4 in KiB
    PRISM_COMPILE_IN_CHILD       1 (default): each compilation is compiled in a child process of the pool
                                 process (compiler/isolated_compile.py), its events streamed as they come;
                                 a crash, rlimit hit or SIGKILL there fails that compilation only; 0: in
                                 the pool process itself
    PRISM_COMPILE_MAX_ADDRESS_SPACE_BYTES, PRISM_COMPILE_MAX_CPU_S  that child's RLIMIT_AS, default
                                 max(M/2, 4 GiB), and RLIMIT_CPU, default 1800 s, read by the compiler
    PRISM_WORKER_MEMORY_CAP_BYTES  the most memory the concurrent compilations of one worker (Celery node)
                                 may reserve together, default 3M/4; a compilation reserves an estimate
                                 (below) before it starts and waits for room, or is refused naming both sizes
    PRISM_COMPILE_BASE_BYTES, PRISM_COMPILE_BYTES_PER_MODEL_BYTE  that estimate: base (default 640 MiB: the
                                 compiling and the measuring child with onnx, LLVM and ONNX Runtime) plus
                                 this many times the model file (default 6), raised by the arena once planned
    PRISM_WORKER_MEMORY_WAIT_S   longest wait for room under the cap, default 120 s; then refused
    PRISM_INSPECT_IN_PROCESS_MAX_BYTES  the web server reads a model file larger than this (at upload and
                                 for each compile request) in a child process, default 4 MiB
    PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES, PRISM_INSPECT_TIME_LIMIT_S  that child's RLIMIT_AS, default
                                 max(M/8, 2 GiB), and time limit, default 120 s: a model that needs more
                                 is refused naming the limit
    PRISM_INSPECT_CONCURRENCY    most such children at once per web process, default 2 (a request that
                                 waits longer than the time limit for one is 503 with Retry-After)
    PRISM_COMPILE_QUEUE          Celery queue of compilations, default prism.compile
    PRISM_TARGET_QUEUES          per-target queues: "aarch64=prism.compile.aarch64,..."
    PRISM_TUNE_QUEUE_PREFIX      tuning measurements of target T go to the Celery queue "<prefix>.T"; a worker
                                 measures for T when started with -Q <prefix>.T; default prism.tune
    PRISM_TUNE_MAX_BUDGET_S      the largest tune_budget_s a request may ask for, seconds, default 3600
    PRISM_TUNE_BATCH_TIMEOUT_S   a measurement batch not back after this many seconds is dropped (its
                                 candidates count as failed measurements), default 120
    PRISM_TUNE_MAX_BATCH         most candidates in one measurement task, default 16
    PRISM_SIGNUP_ENABLED         1 (default): anyone may create an account (POST /api/auth/signup); 0: only
                                 an admin creates accounts (manage.py createsuperuser, /admin/)
    PRISM_REQUIRE_SIGN_IN        0 (default): anonymous users may upload and compile; 1: sign-in required
    PRISM_LOGIN_RATE             sign-in and token requests per client address, default 10/min
    PRISM_COMMENT_MAX_BYTES      largest comment or review body (UTF-8 bytes), default 65536 (64 KiB)
    PRISM_UPLOAD_RATE, PRISM_COMPILE_RATE  uploads / compilation requests per client (user, else address),
                                 default 30/min each; over it: 429 with Retry-After
    PRISM_COMMENT_RATE           comment and review writes per signed-in user, default 30/min (429)
    PRISM_WS_CONNECT_RATE        WebSocket connections per client, default 120/min; over it the socket
                                 closes with 4429 and the reason says when to retry
    PRISM_NUM_PROXIES            reverse proxies in front whose X-Forwarded-For is trusted, default 0
    PRISM_TRUSTED_ORIGINS        other origins whose pages may send state-changing requests (comma
                                 separated, e.g. https://prism.example.com); default none
    PRISM_CSP                    the Content-Security-Policy of HTML pages (default: own scripts only)
    PRISM_RETENTION_DAYS         `manage.py prune` deletes compilations (and models no longer used)
                                 older than this many days, default 0: keep everything
    DJANGO_SECRET_KEY            required, unless var/secret_key exists (`make run` generates it)
    DJANGO_DEBUG (0/1), DJANGO_ALLOWED_HOSTS (comma separated)
"""

import hashlib
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from compiler.runtime.limits import machine_memory_bytes

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PRISM_VAR_DIR", BASE_DIR / "var")).resolve()
(VAR_DIR / "static").mkdir(parents=True, exist_ok=True)  # SQLite needs the folder to exist


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, else the key `make run` keeps in var/secret_key; never a built-in one."""
    key = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if not key and (VAR_DIR / "secret_key").is_file():
        key = (VAR_DIR / "secret_key").read_text().strip()
    if not key:

        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY is not set and {VAR_DIR / 'secret_key'} does not exist: set it (50 random "
            "characters, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'), or start Prism "
            "with `make run`, which generates one and keeps it in var/secret_key")
    return key


SECRET_KEY = _secret_key()
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "explorer.accounts",
    "explorer.compilations",
    "explorer.review",
    "explorer.web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "explorer.web.security.CrossOriginProtection",  # before anything reads the body
    "explorer.web.security.ContentSecurityPolicy",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "explorer.urls"
ASGI_APPLICATION = "explorer.asgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'prism.sqlite3'}"), conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, workers and reapers write concurrently: WAL lets readers run beside the writer, IMMEDIATE
    # takes the write lock at BEGIN (no upgrade deadlocks), and a writer waits up to 30 s for it.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _default_stack(db: dict) -> str:
    """`prism-<hash>` of the database's identity: one name per database, the same in every process."""
    if db["ENGINE"] == "django.db.backends.sqlite3":
        identity = str(Path(db["NAME"]).resolve())
    else:
        identity = "|".join(str(db.get(k) or "") for k in ("ENGINE", "HOST", "PORT", "NAME"))
    return "prism-" + hashlib.sha256(identity.encode()).hexdigest()[:10]


PRISM_STACK = os.environ.get("PRISM_STACK", "").strip() or _default_stack(DATABASES["default"])
# Every key kombu (Celery's broker transport) writes is prefixed: queues, the unacked hash and
# index, bindings, the pidbox; `services.queue.broker_key` names one.
PRISM_BROKER_KEY_PREFIX = f"{PRISM_STACK}:"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
FRONTEND_DIST = Path(os.environ.get("PRISM_FRONTEND_DIST") or BASE_DIR / "frontend" / "dist").resolve()
# WhiteNoise serves frontend/dist (its /assets/ and root files) and, through the finders, the
# admin's static files without a collectstatic step.
WHITENOISE_ROOT = FRONTEND_DIST if FRONTEND_DIST.is_dir() else None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Uploaded models: stored under generated names, outside any static folder, never served directly.
MEDIA_ROOT = VAR_DIR / "media"
MEDIA_URL = None
PRISM_MAX_UPLOAD_BYTES = _env_int("PRISM_MAX_UPLOAD_BYTES", 200 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py >= 8 reads with a 5 s socket timeout by default, the same 5 s that
            # channels_redis blocks in BZPOPMIN: the read then times out and kills the consumer
            # of any socket idle for 5 s. A longer socket timeout keeps the blocking read alive.
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "prefix": PRISM_STACK,
        },
    }
}

PRISM_COMPILE_TIME_LIMIT_S = _env_int("PRISM_COMPILE_TIME_LIMIT_S", 300)
PRISM_STALE_AFTER_S = _env_float("PRISM_STALE_AFTER_S", 60.0)
PRISM_HEARTBEAT_S = _env_float("PRISM_HEARTBEAT_S", 5.0)
PRISM_REAP_INTERVAL_S = _env_float("PRISM_REAP_INTERVAL_S", 30.0)
PRISM_REQUEUE_AFTER_S = _env_float("PRISM_REQUEUE_AFTER_S", 120.0)
PRISM_COMPILE_QUEUE = os.environ.get("PRISM_COMPILE_QUEUE", "").strip() or "prism.compile"
# Per-target queues, e.g. "aarch64=prism.compile.aarch64,riscv64=prism.compile.riscv64": a target
# listed here goes to workers started with `-Q <its queue>` (such as workers on that hardware,
# where its code can be timed); every other target goes to PRISM_COMPILE_QUEUE.
PRISM_TARGET_QUEUES = dict(
    item.split("=", 1) for item in os.environ.get("PRISM_TARGET_QUEUES", "").split(",") if "=" in item
)

# Tuning (issue 16): measurement batches of a tuning compilation go to one queue per target, served by
# any number of workers (services/tuning_queue.py); a tuning run's time limits grow by its budget.
PRISM_TUNE_QUEUE_PREFIX = os.environ.get("PRISM_TUNE_QUEUE_PREFIX", "").strip() or "prism.tune"
PRISM_TUNE_MAX_BUDGET_S = _env_int("PRISM_TUNE_MAX_BUDGET_S", 3600)
PRISM_TUNE_BATCH_TIMEOUT_S = _env_float("PRISM_TUNE_BATCH_TIMEOUT_S", 120.0)
PRISM_TUNE_MAX_BATCH = _env_int("PRISM_TUNE_MAX_BATCH", 16)

_MEMORY = machine_memory_bytes()
PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES = _env_int("PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES",
                                                max(_MEMORY // 2, 4 << 30))
PRISM_WORKER_MAX_MEMORY_KB = _env_int("PRISM_WORKER_MAX_MEMORY_KB", _MEMORY // 4 // 1024)
# The compile itself runs in a child of the pool process (compilations/services/runs.py), and the concurrent
# compilations of one worker reserve their memory under one cap (compilations/services/memory_cap.py).
PRISM_COMPILE_IN_CHILD = _env_int("PRISM_COMPILE_IN_CHILD", 1) != 0
PRISM_WORKER_MEMORY_CAP_BYTES = _env_int("PRISM_WORKER_MEMORY_CAP_BYTES", _MEMORY // 4 * 3)
PRISM_COMPILE_BASE_BYTES = _env_int("PRISM_COMPILE_BASE_BYTES", 640 << 20)
PRISM_COMPILE_BYTES_PER_MODEL_BYTE = _env_float("PRISM_COMPILE_BYTES_PER_MODEL_BYTE", 6.0)
PRISM_WORKER_MEMORY_WAIT_S = _env_float("PRISM_WORKER_MEMORY_WAIT_S", 120.0)
# The web server reads models larger than this in a child process under these limits
# (compilations/services/reading.py), so that its own memory does not grow with the model.
PRISM_INSPECT_IN_PROCESS_MAX_BYTES = _env_int("PRISM_INSPECT_IN_PROCESS_MAX_BYTES", 4 << 20)
PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES = _env_int("PRISM_INSPECT_MAX_ADDRESS_SPACE_BYTES", max(_MEMORY // 8, 2 << 30))
PRISM_INSPECT_TIME_LIMIT_S = _env_float("PRISM_INSPECT_TIME_LIMIT_S", 120.0)
PRISM_INSPECT_CONCURRENCY = _env_int("PRISM_INSPECT_CONCURRENCY", 2)

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = PRISM_WORKER_MAX_MEMORY_KB  # KiB, checked after each task
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = PRISM_COMPILE_QUEUE
CELERY_TASK_TIME_LIMIT = PRISM_COMPILE_TIME_LIMIT_S
# The soft limit is checked at each event and ends the log with a compile.failed saying so; the
# hard limit kills a run stuck between events (the log is then ended by the run or the reaper).
PRISM_COMPILE_SOFT_TIME_LIMIT_S = _env_int(
    "PRISM_COMPILE_SOFT_TIME_LIMIT_S",
    max(1, PRISM_COMPILE_TIME_LIMIT_S - max(5, PRISM_COMPILE_TIME_LIMIT_S // 20)),
)
# An unacknowledged task (its worker died) is redelivered after this many seconds; it must exceed
# the hard time limit, or a slow compilation would be delivered twice.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": PRISM_COMPILE_TIME_LIMIT_S + 120,
    "global_keyprefix": PRISM_BROKER_KEY_PREFIX,
}
# A worker that loses Redis keeps its running compilations: they store their events in the database
# and finish; the task message, unacknowledged on the lost channel, comes back later and finds the
# compilation finished (`runs.claim`: the task is idempotent). Cancelling them instead (True) ended a
# compilation in the middle with "SystemExit" for a Redis blip of a few seconds
# (tests/explorer/test_stack_chaos.py::test_redis_cut_and_restored_mid_stream).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

# Accounts: Django's users and password hashing (PBKDF2), its standard password checks.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in ("UserAttributeSimilarityValidator", "MinimumLengthValidator",
                 "CommonPasswordValidator", "NumericPasswordValidator")
]
PRISM_SIGNUP_ENABLED = os.environ.get("PRISM_SIGNUP_ENABLED", "1") != "0"
PRISM_REQUIRE_SIGN_IN = os.environ.get("PRISM_REQUIRE_SIGN_IN", "0") == "1"
PRISM_LOGIN_RATE = os.environ.get("PRISM_LOGIN_RATE", "10/min")
PRISM_COMMENT_MAX_BYTES = _env_int("PRISM_COMMENT_MAX_BYTES", 64 * 1024)

# Cross-site requests and floods (explorer/web/security.py)
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("PRISM_TRUSTED_ORIGINS", "").split(",") if o.strip()]
PRISM_UPLOAD_RATE = os.environ.get("PRISM_UPLOAD_RATE", "").strip() or "30/min"
PRISM_COMPILE_RATE = os.environ.get("PRISM_COMPILE_RATE", "").strip() or "30/min"
PRISM_COMMENT_RATE = os.environ.get("PRISM_COMMENT_RATE", "").strip() or "30/min"
# A page follows a compilation on two sockets (events, comments) and reconnects with back-off.
PRISM_WS_CONNECT_RATE = os.environ.get("PRISM_WS_CONNECT_RATE", "").strip() or "120/min"
PRISM_RETENTION_DAYS = _env_int("PRISM_RETENTION_DAYS", 0)
# The built app loads only its own scripts and styles (CodeMirror adds <style> elements: 'unsafe-inline'
# for styles only), talks to this server over HTTP and WebSocket ({host}: the request's host, as
# browsers that predate CSP 3 do not count ws: URLs as 'self'), and is framed by nobody.
PRISM_CSP = os.environ.get("PRISM_CSP", "").strip() or (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self' ws://{host} wss://{host}; worker-src 'self' blob:; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'")

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Browser sessions (CSRF checked on unsafe methods) and `Authorization: Token <key>` for
    # scripts (POST /api/auth/token); anonymous requests are AnonymousUser.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",  # first: a bad token is 401 (WWW-Authenticate)
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_THROTTLE_RATES": {"login": PRISM_LOGIN_RATE},
    "NUM_PROXIES": _env_int("PRISM_NUM_PROXIES", 0),  # clients are told apart by address, not X-Forwarded-For
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "explorer.compilations.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Prism explorer API",
    "DESCRIPTION": "Upload ONNX models, compile them with Prism's compiler, read the event log.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("PRISM_LOG_LEVEL", "INFO")},
}
