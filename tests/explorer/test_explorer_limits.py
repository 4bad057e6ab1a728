"""The worker's memory settings (issue 17 item 1) follow the machine unless the environment says
otherwise, and a pool process applies its address-space limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]


def test_worker_memory_settings_default_to_fractions_of_the_machine_memory():
    with open("/proc/meminfo") as f:
        total = int(f.readline().split()[1]) * 1024
    if "PRISM_WORKER_MAX_MEMORY_KB" not in os.environ:
        kb = settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD
        assert settings.PRISM_WORKER_MAX_MEMORY_KB == kb and 0 < kb <= total // 4 // 1024
    if "PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES" not in os.environ:
        assert 4 << 30 <= settings.PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES <= max(total // 2, 4 << 30)


def test_a_pool_process_limits_its_address_space():
    code = ("import django, resource; django.setup()\n"
            "from explorer.compilations.signals import limit_address_space\n"
            "limit_address_space(); print(resource.getrlimit(resource.RLIMIT_AS)[0])\n")
    env = {**os.environ, "PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES": str(6 << 30),
           "DJANGO_SETTINGS_MODULE": "explorer.settings", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=120, check=True)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    assert int(out.stdout.strip()) == (6 << 30 if hard == resource.RLIM_INFINITY else min(6 << 30, hard))
