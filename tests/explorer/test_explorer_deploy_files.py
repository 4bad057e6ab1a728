"""docker-compose.yml, the scripts and CI are well formed (no Docker engine is needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def test_compose_has_the_four_services_wired_together():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "worker", "redis", "postgres"}
    for name in ("web", "worker"):
        svc = services[name]
        env = svc["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:" in env["DATABASE_URL"]
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert "models:/data" in svc["volumes"]  # workers read the uploaded files
        assert set(svc["depends_on"]) <= set(services)
    assert "celery" in " ".join(services["worker"]["command"])
    assert "daphne" in " ".join(services["web"]["command"])
    assert set(compose["volumes"]) == {"pgdata", "redisdata", "models"}


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")), reason="no compose client")
def test_compose_config_accepts_it():
    if shutil.which("docker-compose"):
        cmd = ["docker-compose", "config", "-q"]
    else:
        cmd = ["docker", "compose", "config", "-q"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "unknown command" in proc.stderr:
        pytest.skip("docker has no compose plugin here")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", [".ci/run", "scripts/run.sh", "scripts/test.sh", "scripts/lib.sh"])
def test_shell_scripts_parse(script):
    subprocess.run(["bash", "-n", str(REPO / script)], check=True)


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci/run").read_text()
    assert "set -euo pipefail" in ci and ci.rstrip().endswith("make test")
    readme = (REPO / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
