"""docker-compose.yml, the scripts and CI are well formed (no Docker engine is needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def test_compose_has_the_five_services_wired_together():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "worker", "tuner", "redis", "postgres"}
    for name in ("web", "worker", "tuner"):
        svc = services[name]
        env = svc["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert "models:/data" in svc["volumes"]  # workers read the uploaded files
        assert set(svc["depends_on"]) <= set(services)
    assert "celery" in " ".join(services["worker"]["command"])
    assert "-Q prism.tune.host" in " ".join(services["tuner"]["command"])  # tuning measurements (issue 16)
    assert "daphne" in " ".join(services["web"]["command"])
    assert set(compose["volumes"]) == {"pgdata", "redisdata", "models"}


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")), reason="no compose client")
def test_compose_config_accepts_it():
    client = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    # without the compose plugin, `docker compose config -q` fails on "-q" (an unknown docker flag)
    # rather than on the command, so ask for the version first
    probe = subprocess.run([*client, "version"], cwd=REPO, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"no working compose client here: {' '.join(probe.stderr.split())[:200]}")
    proc = subprocess.run([*client, "config", "-q"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", [".ci/run", "scripts/run.sh", "scripts/test.sh", "scripts/lib.sh"])
def test_shell_scripts_parse(script):
    subprocess.run(["bash", "-n", str(REPO / script)], check=True)


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci/run").read_text()
    assert "set -euo pipefail" in ci and ci.rstrip().endswith("make test")
    readme = (REPO / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
