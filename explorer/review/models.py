"""Comments anchored to a compilation's passes, IR lines, nodes, kernels, remarks and code lines;
reviews (a verdict with a summary); and the review log that carries them live (issue 14).

Anchors (`anchors.py`) are JSON objects, validated against the compilation's stored events:
`{"kind": "pass", "pass": 5}`, `{"kind": "ir_line", "pass": 5, "line": 12, "text": "..."}`,
`{"kind": "node", "node": "<ONNX node name>"}`, `{"kind": "kernel", "kernel": "..."}`,
`{"kind": "remark", "pass": 5, "remark": 17}`,
`{"kind": "code_line", "kernel": "...", "code": "loop"|"llvm"|"llvm_optimized"|"asm", "line": 40, "text": "..."}`.

The review log (`ReviewEvent`) is per model (the same bytes), because comments carry to every
compilation of the same model: append-only, `seq` from 0 with no gaps, stored before it is
announced, so that a WebSocket client resuming after a seq misses nothing and sees nothing twice.
"""

from django.conf import settings
from django.db import models

from explorer.compilations.models import Compilation, UploadedModel


class Comment(models.Model):
    """A comment on a compilation; a reply when `parent` is set (threads are one level deep: the
    parent is always a thread's first comment). A thread is resolved as a whole (its first
    comment's `resolved`). Deleted comments keep their place in the thread with an empty body."""

    compilation = models.ForeignKey(Compilation, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="comments")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies")
    kind = models.CharField(max_length=16, help_text="the anchor's kind, for filters")
    anchor = models.JSONField(help_text="the anchor as validated and completed (text filled in)")
    context = models.JSONField(default=dict, help_text="what the anchor pointed at: names, lines around it")
    body = models.TextField(help_text="Markdown as written")
    created_at = models.DateTimeField(auto_now_add=True)
    edited_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    resolved = models.BooleanField(default=False)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["compilation", "parent"])]

    def __str__(self) -> str:
        return f"comment {self.pk} on {self.compilation_id} ({self.kind})"


class Review(models.Model):
    """A verdict on a compilation with a summary; a reviewer's latest one is their state."""

    class Verdict(models.TextChoices):
        APPROVE = "approve"
        REQUEST_CHANGES = "request_changes"
        COMMENT = "comment"

    compilation = models.ForeignKey(Compilation, on_delete=models.CASCADE, related_name="reviews")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reviews")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    summary = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.verdict} by {self.author} on {self.compilation_id}"


class ReviewEvent(models.Model):
    """One entry of a model's review log: a comment or review was created, changed or deleted.

    The entry names what changed; what a client receives is that object as the requester may see
    it now (read through the selectors), so the log holds no copy of bodies or names."""

    model = models.ForeignKey(UploadedModel, on_delete=models.CASCADE, related_name="review_events")
    seq = models.IntegerField()
    type = models.CharField(max_length=32)
    compilation = models.ForeignKey(Compilation, on_delete=models.CASCADE, related_name="review_events")
    comment = models.ForeignKey(Comment, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey(Review, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    ts = models.FloatField(help_text="Unix seconds")

    class Meta:
        ordering = ["model", "seq"]
        constraints = [models.UniqueConstraint(fields=["model", "seq"], name="unique_review_seq")]

    def __str__(self) -> str:
        return f"{self.model_id}#{self.seq} {self.type}"
