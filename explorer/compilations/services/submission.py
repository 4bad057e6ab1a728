"""Submitting compilations: validate a request, serve it from the cache, or create and queue it.

A compilation is created only once its task message is sent (`QueueUnavailable` otherwise: the API
answers 503 and nothing is stored); a message lost later is sent again by the reaper
(`reaper.reap_stale_compilations` -> `queue.requeue_lost_compilations`).

The cache (DESIGN.md "The explorer"): the same model bytes, target, expanded pipeline, input shapes,
options and compiler version give the same result, so a succeeded compilation with the same
`cache_key` is served instead of compiling again. A hit never exposes another user's compilation
(issue 14): it is returned as it is only when the requester owns it with the visibility asked for,
or when it is shared (unlisted or public) and an unlisted result was asked for; otherwise the
requester gets a compilation of its own, owned by it with the visibility it asked for, whose event
log is a copy of the hit's (the results of the same bytes and request; none of the hit's id, owner,
comments or reviews).
"""

from __future__ import annotations

import hashlib
import json

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from explorer.compilations.models import Compilation, CompilationEvent, UploadedModel
from explorer.compilations.services.calibration import path_for
from explorer.compilations.services.queue import (
    QueueUnavailable,
    extra_time,
    publish,
    publish_on_commit,
)
from explorer.compilations.services.reading import validate_request
from explorer.compilations.services.tuning_db import last_record_at
from explorer.compilations.services.validation import (
    InvalidRequest,
    expand_pipeline,
    request_field,
    tune_budget_problem,
)
from explorer.compilations.visibility import DEFAULT, Visibility, signed_in

OPTION_DEFAULTS = {"verify": True, "benchmark": True}


def cache_key(sha256: str, target: str, pipeline: str, input_shapes: dict, options: dict, version: str) -> str:
    """sha256 over the inputs that decide a compilation's result (DESIGN.md: same bytes, target,
    pipeline, options and compiler version give the same result)."""
    blob = json.dumps(
        [sha256, target, pipeline, input_shapes, options, version], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def normalize_options(options: dict | None, tune_budget_s: float | None = None) -> dict:
    """`{"verify": bool, "benchmark": bool}` with defaults, plus `calibration` (the sha256 of uploaded
    calibration data) and `threads` (a positive integer: the compiled model's and ONNX Runtime's
    threads; absent: all the worker's CPUs, checked against them by the compiler) when given, and
    `tune_budget_s` (seconds of tuning first, `validation.tune_budget_problem`) when not None; raises
    InvalidRequest for others."""
    if (problem := tune_budget_problem(tune_budget_s)) is not None:
        raise InvalidRequest(f"tune_budget_s: {problem}", field="tune_budget_s")
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTION_DEFAULTS) - {"calibration", "threads"})
    if unknown:
        valid = ", ".join(sorted([*OPTION_DEFAULTS, "calibration", "threads"]))
        raise InvalidRequest(f"unknown option {unknown[0]!r}; valid options: {valid}", field="options")
    out = dict(OPTION_DEFAULTS)
    threads = options.pop("threads", None)
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidRequest(f"option 'threads' must be a positive integer, got {threads!r}", field="threads")
        out["threads"] = threads
    cal = options.pop("calibration", None)
    if cal is not None:  # the sha256 of calibration data uploaded with POST /api/calibrations
        if not isinstance(cal, str) or path_for(cal) is None:
            raise InvalidRequest(f"unknown calibration data {cal!r}: upload the .npz first (POST /api/calibrations)",
                                 field="calibration")
        out["calibration"] = cal
    for key, value in options.items():
        if not isinstance(value, bool):
            raise InvalidRequest(f"option {key!r} must be true or false, got {value!r}", field="options")
        out[key] = value
    if tune_budget_s is not None:
        out["tune_budget_s"] = tune_budget_s
    return out


def create_compilation(
    model: UploadedModel,
    *,
    target: str,
    pipeline: str,
    input_shapes: dict | None,
    input_values: dict | None = None,
    dim_ranges: dict | None = None,
    options: dict | None = None,
    use_cache: bool = True,
    owner=None,
    visibility: str = DEFAULT,
    tune_budget_s: float | None = None,
) -> tuple[Compilation, bool]:
    """Validate a request with the compiler and queue it, or serve it from the cache.

    `input_values` (`{input: [values]}`) binds inputs to constants (`compiler.compile`'s
    `input_values`); the compiler's normalized values are kept as `options["input_values"]`, so they
    are part of the cache key and of the stored request; so are `dim_ranges` (`{"N": [1, 8]}` for a dim
    named in `input_shapes`), kept as `options["dim_ranges"]`. `owner` is the signed-in requester (None or anonymous: no owner), `visibility` one of
    `visibility.VISIBILITIES` (checked by the caller). `tune_budget_s` (seconds): a tuning compilation
    (`tuning_run`), never served from the cache. Returns `(compilation, cached)`; `cached` is True
    when a succeeded compilation with the same cache key exists: returned as it is or copied for the
    requester (see the module docstring), and nothing is queued.
    Raises:
        QueueUnavailable: the job queue (Redis) could not take the task message; the compilation
            is deleted again, so nothing is left `queued` with nobody to run it. (Inside a transaction
            the message is sent at commit instead, and a failure is left to the requeue check.)
        InvalidRequest: a bad tune_budget_s (`normalize_options`), a pipeline that is not text, an unknown target, pass or option, a bad
            input value (naming the input), or an unbound symbolic dim (`validation.expand_pipeline`, then the compiler's one-line
            message, `reading.validate_request`: a child's limits named). `pipeline=""` is O0.
    """
    opts = normalize_options(options, tune_budget_s)
    expanded = expand_pipeline(pipeline)  # the same check as POST /api/pipelines/validate
    if input_shapes is None:
        input_shapes = model.default_input_shapes
    import compiler  # thread-safe: tests/compiler/test_api_threads.py

    try:
        req = validate_request(
            model.file.path, target=target, pipeline=expanded, input_shapes=input_shapes,
            calibration_data=calibration_path(opts), input_values=input_values or None,
            dim_ranges={k: tuple(v) for k, v in dim_ranges.items()} if dim_ranges else None,
            threads=opts.get("threads"),
        )
    except compiler.CompileError as exc:
        raise InvalidRequest(exc.message, exc.to_dict(), field=request_field(exc)) from exc
    if req.get("input_values"):
        opts["input_values"] = req["input_values"]
    if req.get("dim_ranges"):  # one artifact for a range of sizes (compiler.driver.dim_range)
        opts["dim_ranges"] = req["dim_ranges"]
    version = str(compiler.__version__)
    key = cache_key(model.sha256, req["target"], req["pipeline"], req["input_shapes"], opts, version)
    owner = owner if signed_in(owner) else None
    if use_cache and "tune_budget_s" not in opts:  # tuning is asked for to search
        hit = _cache_hit(key, owner, visibility)
        if hit is not None:
            return hit, True
    comp = _create_with_unique_id(
        model=model,
        owner=owner,
        visibility=visibility,
        target=req["target"],
        pipeline=req["pipeline"],
        requested_pipeline=pipeline,
        input_shapes=req["input_shapes"],
        options=opts,
        compiler_version=version,
        cache_key=key,
        enqueued_at=timezone.now(),
    )
    if connection.in_atomic_block:
        publish_on_commit(comp.id, comp.target, extra_time(opts))
        return comp, False
    try:
        publish(comp.id, comp.target, extra_time(opts))
    except QueueUnavailable:
        comp.delete()  # nobody has seen its id yet; a message that did get out finds no row
        raise
    return comp, False


def _cache_hit(key: str, owner, visibility: str) -> Compilation | None:
    """The succeeded compilation with this key to serve to `owner` (None: anonymous) asking for
    `visibility`: one to return as it is, else a copy made for it, else None (no hit). A result
    made stale by a newer tuning record for one of its workloads is no hit (`tuning_db.last_record_at`)."""
    hits = Compilation.objects.filter(cache_key=key, status=Compilation.Status.SUCCEEDED).order_by("created_at")
    if (newest := hits.last()) is not None and (cutoff := last_record_at(newest.tuning_workloads)) is not None:
        hits = hits.filter(finished_at__gt=cutoff)  # the same request looks up the same workloads
    if owner is not None:
        own = hits.filter(owner=owner, visibility=visibility).first()
        if own is not None:
            return own
    if visibility == Visibility.UNLISTED:
        shared = hits.filter(visibility__in=[Visibility.UNLISTED, Visibility.PUBLIC]).first()
        if shared is not None:
            return shared
    source = hits.first()
    return None if source is None else _copy_for(source, owner, visibility)


def _copy_for(source: Compilation, owner, visibility: str) -> Compilation:
    """A new succeeded compilation of `source`'s request owned by `owner` with `visibility`, its
    event log a copy of `source`'s (in one transaction: all of it or nothing)."""
    fields = {f.name: getattr(source, f.name) for f in Compilation._meta.concrete_fields
              if f.name not in ("id", "owner", "visibility", "created_at")}
    with transaction.atomic():
        comp = _create_with_unique_id(**{**fields, "owner": owner, "visibility": visibility})
        CompilationEvent.objects.bulk_create(
            CompilationEvent(compilation=comp, seq=e.seq, type=e.type, ts=e.ts, payload=e.payload)
            for e in source.events.order_by("seq").iterator()
        )
    return comp


def calibration_path(options: dict) -> str | None:
    """The stored calibration file a compilation's options name, or None."""
    if not options.get("calibration"):
        return None

    p = path_for(options["calibration"])
    return str(p) if p is not None else None


def _create_with_unique_id(**fields) -> Compilation:
    for _ in range(5):
        try:
            with transaction.atomic():
                return Compilation.objects.create(**fields)
        except IntegrityError:  # public id collision (about 1 in 1e12): draw again
            continue
    raise RuntimeError("could not allocate a compilation id")


def set_visibility(comp: Compilation, visibility: str) -> None:
    """Change a compilation's visibility (the caller checked that the requester owns it)."""
    Compilation.objects.filter(pk=comp.pk).update(visibility=visibility)
    comp.visibility = visibility
