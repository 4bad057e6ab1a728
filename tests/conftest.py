"""Shared pytest setup. Django settings for tests/explorer, isolated from a running dev server:
Redis DB 14 (override with PRISM_TEST_REDIS_URL), its own stack prefix, a throw-away var dir and kernel cache.
Harmless for tests that do not use Django."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "explorer.settings")
os.environ["REDIS_URL"] = os.environ.get("PRISM_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")
os.environ["PRISM_STACK"] = f"prism-test-{os.getpid()}"  # Redis keys, queues, channel groups
os.environ["PRISM_COMPILE_QUEUE"] = f"prism.test.{os.getpid()}"
os.environ.setdefault("DJANGO_SECRET_KEY", f"prism-tests-only-{os.urandom(16).hex()}")  # required: no fallback
# the tests' clients send bursts of uploads and compilations; test_explorer_security tests the limits
os.environ.setdefault("PRISM_UPLOAD_RATE", "100000/min")
os.environ.setdefault("PRISM_COMPILE_RATE", "100000/min")
os.environ.setdefault("PRISM_COMMENT_RATE", "100000/min")  # limits: test_explorer_rate_limits
os.environ.setdefault("PRISM_WS_CONNECT_RATE", "100000/min")
os.environ.pop("DATABASE_URL", None)  # in-process tests use pytest-django's own test database
_var = tempfile.mkdtemp(prefix="prism-test-var-")
os.environ["PRISM_VAR_DIR"] = _var
atexit.register(shutil.rmtree, _var, True)
# the on-disk kernel cache (compiler/codegen/disk_cache.py): one per test session, shared by its compiling
# children and stacks (the same kernels compile once per session), never the user's; PRISM_TEST_KERNEL_CACHE_DIR
# keeps one across sessions
if os.environ.get("PRISM_TEST_KERNEL_CACHE_DIR"):
    os.environ["PRISM_KERNEL_CACHE_DIR"] = os.environ["PRISM_TEST_KERNEL_CACHE_DIR"]
else:
    _kernels = tempfile.mkdtemp(prefix="prism-test-kernels-")
    os.environ["PRISM_KERNEL_CACHE_DIR"] = _kernels
    atexit.register(shutil.rmtree, _kernels, True)

import django  # noqa: E402

django.setup()  # pytest-django only finishes the setup of an already imported, configured Django
