"""Writes for comments and reviews. Each write and its review-log entry are one transaction (all or
nothing); the entry is announced on the model's channel-layer group only after it commits, so that
what a client is told about is always in the database (stored first, then sent).

Who may do what (the compilation must be visible to the requester, else the API answers 404):
- comment or review: any signed-in user;
- edit or delete a comment: its author;
- resolve or reopen a thread: its first comment's author, or the owner of the compilation it was
  written on or is carried to.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from explorer.compilations import messages
from explorer.compilations.models import Compilation, UploadedModel
from explorer.compilations.services.events import _Sender
from explorer.review import anchors
from explorer.review.models import Comment, Review, ReviewEvent
from explorer.review.selectors import may_resolve

log = logging.getLogger(__name__)


class ReviewError(Exception):
    """A comment or review request that cannot be done: `status` 400 (bad input, the message names
    it), 401 (nobody signed in) or 403 (not the requester's to change)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


def check_body(body: object, field: str = "body", *, allow_empty: bool = False) -> str:
    """The body text; ReviewError when it is not text, empty or over `PRISM_COMMENT_MAX_BYTES`."""
    if not isinstance(body, str):
        raise ReviewError(f"{field}: must be text")
    limit = int(settings.PRISM_COMMENT_MAX_BYTES)
    size = len(body.encode("utf-8"))
    if size > limit:
        raise ReviewError(f"{field}: {size} bytes is over the limit of {limit} bytes (PRISM_COMMENT_MAX_BYTES)")
    if not body.strip() and not allow_empty:
        raise ReviewError(f"{field}: must not be empty")
    return body


def _log(comp: Compilation, type_: str, *, comment: Comment | None = None, review: Review | None = None) -> None:
    """Append to the model's review log (inside the caller's transaction) and announce it after
    the commit."""
    UploadedModel.objects.select_for_update().filter(pk=comp.model_id).first()  # one writer at a time
    last = ReviewEvent.objects.filter(model_id=comp.model_id).order_by("-seq").values_list("seq", flat=True).first()
    seq = 0 if last is None else last + 1
    ReviewEvent.objects.create(model_id=comp.model_id, seq=seq, type=type_, compilation=comp,
                               comment=comment, review=review, ts=time.time())
    sha = UploadedModel.objects.filter(pk=comp.model_id).values_list("sha256", flat=True).first()
    transaction.on_commit(lambda: announce(str(sha), seq))


def announce(model_sha256: str, seq: int) -> None:
    """A hint to the comment sockets of every compilation of this model: the log has `seq`."""
    try:
        _Sender.get().group_send(messages.review_group_name(model_sha256),
                                 {"type": messages.REVIEW_HINT_MESSAGE, "seq": seq})
    except Exception:  # noqa: BLE001 - the sockets poll the database too; a lost hint only delays
        log.warning("could not announce review event %s of %s", seq, model_sha256, exc_info=True)


def create_comment(comp: Compilation, author, *, anchor: object = None, body: object, parent: Comment | None = None) -> Comment:
    """A new comment on `comp` (from `compilation_for`), or a reply to `parent` (a comment visible
    on `comp`, from `selectors.comment_for`: the reply joins that thread where it was written).

    Raises ReviewError: a body over the limit, or an anchor that does not exist in `comp` (the
    message names it; a reply takes its thread's anchor and may give none)."""
    text = check_body(body)
    if parent is not None:
        root = parent.parent or parent
        if anchor is not None and anchor != root.anchor:
            raise ReviewError("anchor: a reply takes its thread's anchor; send none")
        with transaction.atomic():
            reply = Comment.objects.create(compilation=root.compilation, author=author, parent=root, kind=root.kind,
                                           anchor=root.anchor, context=root.context, body=text)
            _log(root.compilation, messages.COMMENT_CREATED, comment=reply)
        return reply
    try:
        completed, context = anchors.validate(anchor, anchors.load_subject(comp))
    except anchors.AnchorError as exc:
        raise ReviewError(str(exc)) from exc
    with transaction.atomic():
        comment = Comment.objects.create(compilation=comp, author=author, kind=completed["kind"], anchor=completed,
                                         context=context, body=text)
        _log(comp, messages.COMMENT_CREATED, comment=comment)
    return comment


def update_comment(comment: Comment, viewed: Compilation, user, *, body: object = None, resolved: object = None) -> Comment:
    """Edit a comment's body (its author only) and/or resolve or reopen its thread (`resolved`:
    true/false, on a thread's first comment: see `may_resolve`). Raises ReviewError (400/403)."""
    if comment.deleted_at is not None:
        raise ReviewError(f"comment {comment.pk} was deleted")
    if body is not None and comment.author_id != user.pk:
        raise ReviewError("only its author can edit a comment", 403)
    if resolved is not None:
        if not isinstance(resolved, bool):
            raise ReviewError("resolved: must be true or false")
        if comment.parent_id is not None:
            raise ReviewError("resolved: a thread is resolved on its first comment, not on a reply")
        if not may_resolve(comment, viewed, user):
            raise ReviewError("only the thread's author or the compilation's owner can resolve or reopen it", 403)
    text = None if body is None else check_body(body)
    with transaction.atomic():
        fields = []
        if text is not None and text != comment.body:
            comment.body, comment.edited_at = text, timezone.now()
            fields += ["body", "edited_at"]
        if resolved is not None and resolved != comment.resolved:
            comment.resolved = resolved
            comment.resolved_by, comment.resolved_at = (user, timezone.now()) if resolved else (None, None)
            fields += ["resolved", "resolved_by", "resolved_at"]
        if fields:
            comment.save(update_fields=fields)
            _log(comment.compilation, messages.COMMENT_UPDATED, comment=comment)
    return comment


def delete_comment(comment: Comment, user) -> None:
    """Delete a comment (its author only): its body is removed, its place in the thread kept."""
    if comment.author_id != user.pk:
        raise ReviewError("only its author can delete a comment", 403)
    if comment.deleted_at is not None:
        return
    with transaction.atomic():
        comment.body, comment.deleted_at = "", timezone.now()
        comment.save(update_fields=["body", "deleted_at"])
        _log(comment.compilation, messages.COMMENT_DELETED, comment=comment)


def create_review(comp: Compilation, author, *, verdict: object, summary: object = "") -> Review:
    """A verdict (`approve`, `request_changes`, `comment`) with a summary (Markdown; required for
    `comment` and `request_changes`)."""
    if verdict not in Review.Verdict.values:
        raise ReviewError(f"verdict: one of {', '.join(Review.Verdict.values)}; got {verdict!r}")
    text = check_body(summary if summary is not None else "", "summary", allow_empty=verdict == Review.Verdict.APPROVE)
    with transaction.atomic():
        review = Review.objects.create(compilation=comp, author=author, verdict=verdict, summary=text)
        _log(comp, messages.REVIEW_CREATED, review=review)
    return review
