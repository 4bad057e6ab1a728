"""The explorer's data: uploaded ONNX models, compilations, and each compilation's event log.

The event log is append-only: an event, once stored, is never changed or deleted, so a client that
has seen seq 0..k can always resume after k. Event semantics: DESIGN.md, "Events".
"""

import secrets

from django.conf import settings
from django.db import models

from explorer.compilations.visibility import DEFAULT as DEFAULT_VISIBILITY
from explorer.compilations.visibility import Visibility

PUBLIC_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o, 1/l: readable in a URL
PUBLIC_ID_LENGTH = 8


def new_public_id() -> str:
    """A short random public id such as `k3x9q2ab` (32^8, about 1.1e12 values)."""
    return "".join(secrets.choice(PUBLIC_ID_ALPHABET) for _ in range(PUBLIC_ID_LENGTH))


def model_upload_path(instance: "UploadedModel", filename: str) -> str:
    """Generated storage name: content-addressed, never the user's file name."""
    return f"models/{instance.sha256[:2]}/{instance.sha256}.onnx"


class UploadedModel(models.Model):
    """An ONNX model, stored once per distinct content (sha256 of its bytes)."""

    sha256 = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255, help_text="file name given at upload, or the sample's name")
    graph_name = models.CharField(max_length=255, blank=True)
    size = models.BigIntegerField(help_text="bytes")
    opset = models.IntegerField()
    ir_version = models.IntegerField(default=0)
    producer = models.CharField(max_length=255, blank=True)
    node_count = models.IntegerField(default=0)
    inputs = models.JSONField(default=list, help_text='[{"name","dtype","shape":[int|str|null]}]')
    outputs = models.JSONField(default=list)
    default_input_shapes = models.JSONField(
        null=True, blank=True, help_text="shapes suggested by a sample, used when a request gives none"
    )
    source = models.CharField(max_length=100, default="upload", help_text='"upload" or "sample:<name>"')
    file = models.FileField(upload_to=model_upload_path, max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.sha256[:12]})"


class ModelUpload(models.Model):
    """One owner's registration of a model's bytes (an upload or a sample), with its visibility.

    The bytes are stored once (`UploadedModel`), but who uploaded them and who may see them is
    per upload: a requester sees a model when one of its uploads is visible to it
    (`visibility.can_see`), and sees that upload's file name. Anonymous uploads have no owner."""

    model = models.ForeignKey(UploadedModel, on_delete=models.CASCADE, related_name="uploads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="model_uploads")
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=DEFAULT_VISIBILITY)
    name = models.CharField(max_length=255, help_text="file name given at this upload")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["model", "owner"])]

    def __str__(self) -> str:
        return f"{self.model.sha256[:12]} by {self.owner or 'anonymous'} ({self.visibility})"


class Compilation(models.Model):
    """One compilation of a model for a target and an expanded pipeline."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=16, default=new_public_id, editable=False)
    model = models.ForeignKey(UploadedModel, on_delete=models.PROTECT, related_name="compilations")
    target = models.CharField(max_length=64)
    pipeline = models.TextField(help_text="expanded pipeline text")
    requested_pipeline = models.TextField(blank=True, help_text="as the user wrote it, e.g. O2")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="compilations", help_text="who submitted it (none: anonymous)")
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=DEFAULT_VISIBILITY)
    input_shapes = models.JSONField(default=dict, help_text="fully bound {input: [dims]}")
    options = models.JSONField(default=dict, help_text='{"verify": bool, "benchmark": bool}')
    compiler_version = models.CharField(max_length=64)
    cache_key = models.CharField(max_length=64, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.JSONField(null=True, blank=True, help_text="the compile.failed payload")
    attempts = models.IntegerField(default=0, help_text="times a worker started it")
    enqueued_at = models.DateTimeField(null=True, blank=True, help_text="when its last task message was sent")
    requeues = models.IntegerField(default=0, help_text="times it was queued again after its message was lost")
    time_limit_s = models.IntegerField(null=True, blank=True, help_text="hard limit of the last run")
    worker = models.CharField(max_length=255, blank=True, help_text="hostname and pid of the last run")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    tune_stop_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="when its owner asked to stop tuning (the search ends after its batch)")
    tuning_workloads = models.JSONField(
        default=list, blank=True, help_text="workload keys its kernels looked up in the tuning database")
    tuning_stats = models.JSONField(
        default=dict, blank=True, help_text='{"queue", "workers": {name: {batches, candidates, busy_s}}} of its tuning')

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"{self.id} {self.target} {self.status}"

    @property
    def group_name(self) -> str:
        """The channel-layer group that live events of this compilation are sent to."""
        return f"compilation.{self.id}"


class CompilationEvent(models.Model):
    """One event of a compilation's stream: `{"seq","type","ts", **payload}` (DESIGN.md "Events")."""

    compilation = models.ForeignKey(Compilation, on_delete=models.CASCADE, related_name="events")
    seq = models.IntegerField()
    type = models.CharField(max_length=64)
    ts = models.FloatField(help_text="Unix seconds")
    payload = models.JSONField(default=dict)

    class Meta:
        ordering = ["compilation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["compilation", "seq"], name="unique_event_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.compilation_id}#{self.seq} {self.type}"

    def as_event(self) -> dict:
        """The event as the compiler emitted it and clients receive it."""
        return {**self.payload, "seq": self.seq, "type": self.type, "ts": self.ts}


class TuningRecord(models.Model):
    """One measured schedule of one workload (issue 16): the tuning database that every compilation
    of every user reads (`services.tuning_db.DjangoTuningDatabase`).

    A workload is a kernel signature (op kinds, shapes, dtypes, layout, attributes) on one machine
    kind (target triple, CPU and its LLVM features); `workload_key` is the compiler's digest of it
    (`compiler.tune.workload.workload_key`), so the best record of a workload on a machine kind is
    the fastest row with its key, triple, CPU and features. `trace` is the schedule trace that
    replays the candidate deterministically; `median_us` its measured median time of one call (µs)
    at `threads`, `default_us` the default schedule's, measured in the same child. Provenance: the
    compilation (and so the user) whose tuning found it, and the worker that measured it. The JSON
    form (`as_record`) is the compiler's record format (`compiler.tune.database`)."""

    workload_key = models.CharField(max_length=64, help_text="compiler.tune.workload.workload_key")
    workload = models.JSONField(default=dict, help_text="workload_desc: op kinds, shapes, dtypes, layout, ...")
    kernel = models.CharField(max_length=255, blank=True, help_text="the kernel's name in the model that found it")
    target = models.CharField(max_length=64, help_text='the target name, e.g. "host"')
    triple = models.CharField(max_length=128)
    cpu = models.CharField(max_length=64, blank=True)
    features = models.TextField(blank=True, help_text="LLVM feature string, e.g. +avx2,+fma")
    trace = models.JSONField(help_text="the schedule trace: decision name -> int or str")
    median_us = models.FloatField(help_text="measured median time of one call, µs")
    default_us = models.FloatField(null=True, blank=True, help_text="the default schedule's median, µs")
    trials = models.IntegerField(default=0, help_text="candidates measured for this workload in that run")
    threads = models.IntegerField(null=True, blank=True, help_text="threads it was timed at")
    compiler_version = models.CharField(max_length=64, blank=True)
    compilation = models.ForeignKey(Compilation, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="tuning_records", help_text="whose tuning found it")
    found_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="tuning_records", help_text="the owner of that compilation")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workload_key", "median_us"]
        indexes = [models.Index(fields=["workload_key", "triple", "median_us"])]

    def __str__(self) -> str:
        return f"{self.kernel or 'kernel'} {self.workload_key[:12]} {self.median_us:.1f} us"
