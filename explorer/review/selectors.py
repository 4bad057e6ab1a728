"""Reads of comments and reviews, always of one compilation as one requester sees it.

A compilation's threads are its own and those carried from the earlier compilations of the same
model (the same bytes) that the requester may see: their first comment not deleted, and unresolved
(or resolved since this compilation was created, so that resolving one here shows it resolved
instead of making it vanish). A carried thread's anchor is looked for in this compilation
(`anchors.locate`); where it is gone the comment is `outdated` and keeps its original anchor and
context.
"""

from __future__ import annotations

from django.db.models import Q

from explorer.compilations import messages
from explorer.compilations.models import Compilation
from explorer.compilations.selectors import user_dict
from explorer.compilations.visibility import signed_in, visible_q
from explorer.review import anchors
from explorer.review.markdown import render
from explorer.review.models import Comment, Review, ReviewEvent

EVENT_BATCH = 200


def _carried_q(requester, comp: Compilation) -> Q:
    return (Q(compilation__model_id=comp.model_id, compilation__created_at__lt=comp.created_at, parent=None,
              deleted_at=None)
            & (Q(resolved=False) | Q(resolved_at__gte=comp.created_at))
            & visible_q(requester, "compilation__"))


def _roots_q(requester, comp: Compilation) -> Q:
    return Q(compilation=comp, parent=None) | _carried_q(requester, comp)


def comment_for(requester, comp: Compilation, comment_id: int) -> Comment | None:
    """Comment `comment_id` if it is on `comp` (from `compilation_for`) or in a thread carried to
    it that the requester may see, else None (a 404)."""
    comment = Comment.objects.select_related("compilation", "parent", "author").filter(pk=comment_id).first()
    if comment is None:
        return None
    root = comment.parent or comment
    if root.compilation_id == comp.pk or Comment.objects.filter(Q(pk=root.pk) & _carried_q(requester, comp)).exists():
        return comment
    return None


class View:
    """Shapes comments for one compilation and requester (its subject loaded once)."""

    def __init__(self, requester, comp: Compilation) -> None:
        self.requester, self.comp = requester, comp
        self._subject: anchors.Subject | None = None
        self._located: dict[int, dict | None] = {}

    def subject(self) -> anchors.Subject:
        if self._subject is None:
            self._subject = anchors.load_subject(self.comp)
        return self._subject

    def _anchor(self, root: Comment) -> dict | None:
        if root.compilation_id == self.comp.pk:
            return root.anchor
        if root.pk not in self._located:
            self._located[root.pk] = anchors.locate(root.anchor, root.context, self.subject())
        return self._located[root.pk]

    def comment(self, c: Comment) -> dict:
        """The JSON of one comment (issue 14's fields and more)."""
        root = c.parent or c
        anchor = self._anchor(root)
        carried = root.compilation_id != self.comp.pk
        return {
            "id": c.pk,
            "compilation": c.compilation_id,
            "parent": c.parent_id,
            "thread": root.pk,
            "kind": c.kind,
            "anchor": anchor if anchor is not None else c.anchor,
            "original_anchor": c.anchor,
            "context": c.context,
            "outdated": anchor is None,
            "carried_from": {"compilation": root.compilation_id, "url": f"/c/{root.compilation_id}/comments/{root.pk}"}
            if carried else None,
            "author": user_dict(c.author),
            "body": c.body,
            "body_html": render(c.body) if c.body else "",
            "deleted": c.deleted_at is not None,
            "created_at": c.created_at.isoformat(),
            "edited_at": c.edited_at.isoformat() if c.edited_at else None,
            "resolved": root.resolved,
            "resolved_by": user_dict(root.resolved_by),
            "resolved_at": root.resolved_at.isoformat() if root.resolved_at else None,
            "url": f"/c/{self.comp.pk}/comments/{c.pk}",
            "can_edit": signed_in(self.requester) and c.author_id == self.requester.pk,
            # the thread's first comment carries whether this requester may resolve / reopen the thread
            "can_resolve": signed_in(self.requester) and c.parent_id is None and may_resolve(c, self.comp, self.requester),
        }


def may_resolve(comment: Comment, viewed: Compilation, user) -> bool:
    """Whether `user` may resolve or reopen `comment`'s thread: its author, the owner of the compilation
    it was written on, or the owner of the compilation `viewed` (a carried thread)."""
    root = comment.parent or comment
    return user.pk in (root.author_id, root.compilation.owner_id, viewed.owner_id)


def comments_for(requester, comp: Compilation) -> list[dict]:
    """Every comment of `comp`'s threads (its own and carried ones), threads in order of their
    first comment, each first comment followed by its replies."""
    roots = list(Comment.objects.filter(_roots_q(requester, comp)).select_related("author", "resolved_by", "compilation")
                 .order_by("created_at", "id"))
    replies: dict[int, list[Comment]] = {}
    for r in (Comment.objects.filter(parent_id__in=[c.pk for c in roots]).select_related("author")
              .order_by("created_at", "id")):
        replies.setdefault(r.parent_id, []).append(r)
    view = View(requester, comp)
    out = []
    for root in roots:
        out.append(view.comment(root))
        for r in replies.get(root.pk, []):
            r.parent = root
            out.append(view.comment(r))
    return out


def review_dict(r: Review) -> dict:
    return {"id": r.pk, "compilation": r.compilation_id, "author": user_dict(r.author), "verdict": r.verdict,
            "summary": r.summary, "summary_html": render(r.summary) if r.summary else "",
            "created_at": r.created_at.isoformat()}


def reviews_for(requester, comp: Compilation) -> dict:
    """`{"reviews": [...], "state": {"approved_by": [names], "changes_requested_by": [names]}}`:
    the state counts each reviewer's latest approve or request_changes verdict."""
    reviews = list(Review.objects.filter(compilation=comp).select_related("author").order_by("created_at", "id"))
    return {"reviews": [review_dict(r) for r in reviews], "state": review_state(reviews)}


def review_state(reviews: list[Review]) -> dict:
    latest: dict[str, str] = {}
    for r in reviews:
        if r.verdict != Review.Verdict.COMMENT:
            latest[r.author.get_username()] = r.verdict
    return {"approved_by": sorted(u for u, v in latest.items() if v == Review.Verdict.APPROVE),
            "changes_requested_by": sorted(u for u, v in latest.items() if v == Review.Verdict.REQUEST_CHANGES)}


def review_seq(comp: Compilation) -> int:
    """The last seq of the review log of `comp`'s model (-1: empty): read it before the comments,
    then follow the WebSocket after it, and nothing is missed."""
    last = ReviewEvent.objects.filter(model_id=comp.model_id).order_by("-seq").values_list("seq", flat=True).first()
    return -1 if last is None else last


def log_after(requester, comp: Compilation, after: int, limit: int = EVENT_BATCH) -> tuple[list[dict], int]:
    """The review-log entries with seq > after that concern `comp` and that the requester may see,
    as WebSocket messages, and the last seq read (`after` when none): `(messages, last_seq)`."""
    entries = list(ReviewEvent.objects.filter(model_id=comp.model_id, seq__gt=after).order_by("seq")[:limit])
    view = View(requester, comp)
    out = []
    for e in entries:
        base = {"seq": e.seq, "type": e.type, "ts": e.ts, "compilation": comp.pk}
        if e.review_id is not None:
            if e.compilation_id == comp.pk:
                reviews = list(Review.objects.filter(compilation=comp).select_related("author"))
                review = next(r for r in reviews if r.pk == e.review_id)
                out.append({**base, "review": review_dict(review), "review_state": review_state(reviews)})
            continue
        comment = comment_for(requester, comp, e.comment_id) if e.comment_id else None
        if comment is not None and e.type in messages.REVIEW_MESSAGE_TYPES:
            out.append({**base, "comment": view.comment(comment)})
    return out, entries[-1].seq if entries else after
