"""Downloads of a compilation (issue 15 item 6): what it has, and each built once.

`catalogue(comp)` lists the artifacts a compilation (from `selectors.compilation_for`) has, from its
stored events, and says why each one it lacks is missing (a failed stage, a cross target). `build(comp,
name)` returns one as `(bytes, media type, file name)`: generated on first request by the compiler's
public functions (`compiler.artifacts`), written under `PRISM_VAR_DIR/artifacts/<id>/` and served from
there afterwards. Generation holds an exclusive file lock per artifact (`fcntl.flock`), so concurrent
requests (any process) generate it once and the others read the file; the file appears whole (written
to a temporary name, then renamed). A compilation's events never change once it ended, so neither does
an artifact; a running compilation's artifacts are not offered.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

import compiler
from compiler import trace
from compiler.artifacts import ArtifactUnavailable
from compiler.errors import CompileError
from compiler.reproducer import reproducer_zip
from explorer.compilations import selectors
from explorer.compilations.models import Compilation
from explorer.compilations.services.submission import calibration_path

ONNX = "application/onnx"
PASS_NAME = re.compile(r"^pass-(\d+)-([a-z0-9-]+)\.onnx$")


class Unavailable(Exception):
    """The compilation has no artifact of that name; `reason` says why in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Artifact:
    name: str
    kind: str
    media_type: str
    description: str

    def as_dict(self, comp: Compilation) -> dict:
        return {"name": self.name, "kind": self.kind, "media_type": self.media_type, "description": self.description,
                "url": f"/api/compilations/{comp.id}/artifacts/{self.name}"}


def _events(comp: Compilation) -> list[dict]:
    return selectors.events_after(comp, -1, 1_000_000)


def _types(events: list[dict]) -> set[str]:
    return {e["type"] for e in events}


def _target_runnable(target: str) -> bool:
    return any(t["name"] == target and t.get("runnable") for t in compiler.list_targets())


def catalogue(comp: Compilation, events: list[dict] | None = None) -> tuple[list[Artifact], dict[str, str]]:
    """`(artifacts, missing)`: what this compilation offers, and `{name: reason}` for the standard
    ones it does not have. `events`: its stored events, when the caller read them already."""
    if comp.status not in (Compilation.Status.SUCCEEDED, Compilation.Status.FAILED):
        return [], {"*": f"the compilation is {comp.status}: its artifacts are offered once it has ended"}
    events = _events(comp) if events is None else events
    types = _types(events)
    failed = next((e for e in events if e["type"] == "compile.failed"), None)
    ended = f"the compilation failed during {failed.get('stage')}" if failed else "the compilation did not get there"
    found: list[Artifact] = [Artifact("report.json", "report", "application/json",
                                      "the JSON report (the CLI's --json content)")]
    missing: dict[str, str] = {}
    if "compile.started" in types:
        found.append(Artifact("trace.json", "trace", "application/json",
                              "Chrome trace (ui.perfetto.dev): stages and passes, each kernel's codegen"))
    if "kernel.timed" in types:
        found.append(Artifact("run-trace.json", "trace", "application/json",
                              "Chrome trace of one timed run: each kernel's median time in execution order"))
    else:
        missing["run-trace.json"] = f"no kernel was timed: {ended if failed else 'the benchmark did not run'}"
    if failed is not None and not failed.get("reason"):
        found.insert(0, Artifact("reproducer.zip", "reproducer", "application/zip",
                                 "the model (or the failing node alone), the pipeline cut after the failing pass and "
                                 "the one-line command that fails the same way"))
    elif failed is not None:
        missing["reproducer.zip"] = (f"the service ended this compilation ({failed['reason']}), not the compiler: "
                                     "there is no compiler failure to reproduce")
    for e in events:
        if e["type"] == "pass.finished" and e.get("level") == "onnx":  # the ONNX model the model pass left
            found.append(Artifact(f"pass-{e['index']}-{e['name']}.onnx", "model", ONNX,
                                  f"the ONNX model after pass {e['index']} ({e['name']}), before import"))
        elif e["type"] == "pass.finished":
            found.append(Artifact(f"pass-{e['index']}-{e['name']}.onnx", "model", ONNX,
                                  f"the ONNX model after pass {e['index']} ({e['name']}); fused groups as functions"))
    if "kernel.lowered" in types:
        found.append(Artifact("kernels.zip", "kernels", "application/zip",
                              "per kernel: loop IR, LLVM IR, optimized LLVM IR, assembly"))
    else:
        missing["kernels.zip"] = f"no kernel was lowered: {ended}"
    codegen_done = "kernel.compiled" in types and not (failed and failed.get("stage") in ("lowering", "codegen"))
    if codegen_done:
        found.append(Artifact("module.o", "object", "application/x-object",
                              f"one ELF object with every kernel, for {comp.target}"))
        if _target_runnable(comp.target):
            found.append(Artifact("module.so", "shared-object", "application/x-sharedlib",
                                  "the model as a shared library (ctypes.CDLL loads it): int prism_run(inputs, "
                                  "outputs) runs it, weights included; prism_signature names the buffers"))
        else:
            missing["module.so"] = f"{comp.target} is a cross target: this server links no shared object for it"
    else:
        missing["module.o"] = missing["module.so"] = f"not every kernel was compiled: {ended}"
    return found, missing


def _generator(comp: Compilation, name: str, events: list[dict]) -> Callable[[], bytes]:
    """The function that builds artifact `name` of `comp` (whose catalogue offers it)."""
    from compiler import artifacts as A  # the compiler's API: loaded on the first download only

    if name == "report.json":
        return lambda: json.dumps(A.report_from_events(events), indent=1).encode()
    if name in ("trace.json", "run-trace.json"):
        make = trace.compilation_trace if name == "trace.json" else trace.run_trace
        return lambda: json.dumps(make(events)).encode()
    if name == "reproducer.zip":
        return lambda: _reproducer(comp, events)
    if name == "kernels.zip":
        return lambda: A.kernel_sources_zip(events)
    if name == "module.o":
        return lambda: A.module_object(events, comp.target)
    if name == "module.so":
        from compiler import standalone  # the same request rebuilt up to its linked Program
        from compiler.tune.recorded import (
            RecordedSchedules,  # with the tuned schedules its kernels took
        )

        return lambda: standalone.shared_library(standalone.program_for(
            comp.model.file.path, target=comp.target, pipeline=comp.pipeline, input_shapes=comp.input_shapes or None,
            input_values=comp.options.get("input_values") or None, calibration_data=calibration_path(comp.options),
            schedules=RecordedSchedules(events)), comp.target)
    m = PASS_NAME.match(name)
    assert m is not None
    index = int(m.group(1))
    levels = _levels(events)
    return lambda: A.model_after_pass(comp.model.file.path, target=comp.target, pipeline=comp.pipeline, index=index,
                                      input_shapes=comp.input_shapes or None,
                                      calibration_data=calibration_path(comp.options), levels=levels).SerializeToString()


def _levels(events: list[dict]) -> list[str]:
    """Each pass run's level (``onnx``/``graph``) in run order; logs from before levels: ``graph``."""
    return [str(e.get("level") or "graph") for e in events if e["type"] == "pass.started"]


def _reproducer(comp: Compilation, events: list[dict]) -> bytes:
    failure = next(e for e in events if e["type"] == "compile.failed")
    payload = {k: v for k, v in failure.items() if k not in ("seq", "type", "ts")}
    started = [int(e["index"]) for e in events if e["type"] == "pass.started"]
    finished = {int(e["index"]) for e in events if e["type"] == "pass.finished"}
    failed_pass = started[-1] if started and started[-1] not in finished and failure.get("stage") == "passes" else None
    levels = _levels(events)
    with comp.model.file.open("rb") as f:
        model = f.read()
    return reproducer_zip(model, failure=payload, target=comp.target, pipeline=comp.pipeline, failed_pass=failed_pass,
                          input_shapes=comp.input_shapes or None, input_values=comp.options.get("input_values") or None,
                          options=comp.options, levels=levels)


def root() -> Path:
    """The folder that holds one artifacts folder per compilation: `PRISM_VAR_DIR/artifacts/`."""
    return Path(settings.VAR_DIR) / "artifacts"


def folder(compilation_id: str) -> Path:
    """Where compilation `compilation_id`'s artifacts are written: `PRISM_VAR_DIR/artifacts/<id>/`
    (it may not exist yet; deleting the compilation removes it, `services.retention`)."""
    return root() / compilation_id


def _directory(comp: Compilation) -> Path:
    d = folder(comp.id)
    d.mkdir(parents=True, exist_ok=True)
    return d


def build(comp: Compilation, name: str) -> tuple[bytes, str]:
    """`(bytes, media type)` of artifact `name`, generated at most once (see the module docstring).
    Raises Unavailable (the caller answers 404 with the reason) and lets the compiler's
    ArtifactUnavailable through as Unavailable too."""
    events = _events(comp)
    listed, missing = catalogue(comp, events)
    found = {a.name: a for a in listed}
    if name not in found:
        raise Unavailable(missing.get(name) or missing.get("*") or f"this compilation has no artifact {name!r}")
    make = _generator(comp, name, events)
    path = _directory(comp) / name
    with open(path.with_name(name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            try:
                data = make()
            except ArtifactUnavailable as exc:
                raise Unavailable(exc.reason) from None
            except CompileError as exc:  # e.g. the linker refused the object: say so, as a missing artifact
                raise Unavailable(f"{name} could not be built: {exc}") from None
            part = path.with_name(f".{name}.{os.getpid()}.part")
            part.write_bytes(data)
            os.replace(part, path)
    return path.read_bytes(), found[name].media_type
