"""The package: pyproject.toml's dependencies and the requirements files say the same, and a wheel
built from a clean copy of the checkout installs into a fresh virtualenv whose ``prism`` command
compiles and verifies light_squeezenet (an editable install works too).

No network: the wheel is built with ``--no-build-isolation`` by this venv's setuptools and wheel,
and the fresh virtualenvs see this venv's packages through a ``.pth`` file (``pip install --no-deps``
installs only Prism itself). light_squeezenet is the onnx wheel's model with seeded random weights,
made locally (``compiler.samples``): it needs no download.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements(path: Path) -> tuple[list[str], list[str]]:
    """(requirement lines without comments, ``-r`` includes) of a requirements file."""
    reqs, includes = [], []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r"):
            includes.append(line[2:].strip())
        elif line:
            reqs.append(line)
    return reqs, includes


def _norm(req: str) -> str:
    name, rest = re.match(r"([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)(.*)", req.replace(" ", "")).groups()  # type: ignore[union-attr]
    return re.sub(r"[-_.]+", "-", name).lower() + rest


def test_requirements_files_are_the_pyproject_dependencies():
    project = PYPROJECT["project"]
    runtime, inc = _requirements(ROOT / "requirements.txt")
    assert inc == []
    assert sorted(map(_norm, runtime)) == sorted(map(_norm, project["dependencies"]
                                                     + project["optional-dependencies"]["explorer"]))
    dev, inc = _requirements(ROOT / "requirements-dev.txt")
    assert inc == ["requirements.txt"]
    assert sorted(map(_norm, dev)) == sorted(map(_norm, project["optional-dependencies"]["dev"]))


def test_the_console_script_is_the_cli():
    assert PYPROJECT["project"]["scripts"] == {"prism": "compiler.cli:main"}


def _clean_copy(dest: Path) -> Path:
    """The checkout's files that git tracks or would track (not ignored), as they are now."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    for rel in filter(None, out.split("\0")):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _venv(path: Path) -> Path:
    """A fresh virtualenv at ``path`` without pip that sees this interpreter's packages; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_prism_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "--quiet", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to copy the checkout's files")
    for mod in ("setuptools", "wheel"):
        if subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode != 0:
            pytest.skip(f"{mod} is not installed (requirements-dev.txt): the wheel cannot be built offline")
    return _clean_copy(tmp_path_factory.mktemp("checkout"))


def test_a_wheel_installs_and_prism_compiles_light_squeezenet(source: Path, tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("prism-*.whl")
    python = _venv(tmp_path / "venv")
    _pip(python, str(wheel))
    where = subprocess.run([str(python), "-c", "import compiler, explorer.compilations; print(compiler.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv")  # the installed copy, not the checkout
    run = subprocess.run([str(tmp_path / "venv" / "bin" / "prism"), "compile", "light_squeezenet", "--verify"],
                         capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"^verification: passed \(max abs error", run.stdout, re.M), run.stdout[-2000:]


def test_an_editable_install_imports_the_checkout(source: Path, tmp_path: Path):
    python = _venv(tmp_path / "venv")
    _pip(python, "--no-build-isolation", "-e", str(source))
    where = subprocess.run([str(python), "-c", "import compiler; print(compiler.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, env=_env())
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == source / "compiler" / "__init__.py"
    run = subprocess.run([str(tmp_path / "venv" / "bin" / "prism"), "targets"], capture_output=True, text=True,
                         cwd=tmp_path, env=_env())
    assert run.returncode == 0 and '"name": "host"' in run.stdout, run.stderr
