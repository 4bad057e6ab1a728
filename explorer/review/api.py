"""Comments and reviews API (issue 14).

    GET    /api/compilations/<id>/comments          {"comments": [...], "review_seq": n}
    POST   /api/compilations/<id>/comments          {anchor, body} or {parent, body}: 201 the comment
    PATCH  /api/compilations/<id>/comments/<cid>    {body?, resolved?}: 200 the comment
    DELETE /api/compilations/<id>/comments/<cid>    204
    GET    /api/compilations/<id>/reviews           {"reviews": [...], "state": {...}}
    POST   /api/compilations/<id>/reviews           {verdict, summary}: 201 the review

A compilation the requester may not see is a 404, as an unknown one; writing needs a signed-in user
(401); changing another's comment is a 403. Live updates: WebSocket
/ws/compilations/<id>/comments/?after=<review_seq> (`consumers.CommentsConsumer`).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from explorer.compilations import selectors as compilation_selectors
from explorer.compilations.api.errors import error_response
from explorer.compilations.visibility import signed_in
from explorer.review import selectors, services
from explorer.web.security import RateLimited


class CommentRequest(serializers.Serializer):
    anchor = serializers.JSONField(required=False, help_text='e.g. {"kind": "ir_line", "pass": 5, "line": 12}')
    body = serializers.JSONField(help_text="Markdown, at most PRISM_COMMENT_MAX_BYTES bytes")
    parent = serializers.IntegerField(required=False, help_text="reply to this comment's thread")


class CommentUpdate(serializers.Serializer):
    body = serializers.JSONField(required=False)
    resolved = serializers.JSONField(required=False, help_text="true: resolve the thread; false: reopen it")


class ReviewRequest(serializers.Serializer):
    verdict = serializers.JSONField(help_text="approve, request_changes or comment")
    summary = serializers.JSONField(required=False, help_text="Markdown")


class CommentOut(serializers.Serializer):
    id = serializers.IntegerField()
    compilation = serializers.CharField(help_text="where it was written")
    parent = serializers.IntegerField(allow_null=True)
    thread = serializers.IntegerField(help_text="the thread's first comment")
    kind = serializers.CharField()
    anchor = serializers.DictField(help_text="in this compilation (the original one when outdated)")
    original_anchor = serializers.DictField()
    context = serializers.DictField(help_text="what the anchor pointed at when written")
    outdated = serializers.BooleanField()
    carried_from = serializers.DictField(allow_null=True, help_text="{compilation, url} of a carried comment")
    author = serializers.DictField()
    body = serializers.CharField()
    body_html = serializers.CharField(help_text="the Markdown rendered and sanitized")
    deleted = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    edited_at = serializers.DateTimeField(allow_null=True)
    resolved = serializers.BooleanField()
    resolved_by = serializers.DictField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField()
    can_edit = serializers.BooleanField()
    can_resolve = serializers.BooleanField(help_text="the requester may resolve / reopen this thread (on its first comment)")


class CommentList(serializers.Serializer):
    comments = CommentOut(many=True)
    review_seq = serializers.IntegerField(help_text="follow the comments WebSocket after this seq")


def _denied(exc: services.ReviewError) -> Response:
    return error_response(exc.message, exc.status)


def _lookup(request: Request, compilation_id: str, *, write: bool):
    """`(compilation, None)` or `(None, error response)`: 404 invisible, 401 anonymous writes."""
    comp = compilation_selectors.compilation_for(request.user, compilation_id)
    if comp is None:
        return None, error_response(f"no compilation with id {compilation_id}", 404)
    if write and not signed_in(request.user):
        return None, error_response("sign in to comment or review (POST /api/auth/login or a Token)", 401)
    return comp, None


class CommentListView(RateLimited, APIView):
    throttle_scope = "comment"

    @extend_schema(responses={200: CommentList}, operation_id="comments_list")
    def get(self, request: Request, compilation_id: str) -> Response:
        """The compilation's threads, its own and those carried from earlier compilations of the
        same model (`carried_from`, `outdated`)."""
        comp, error = _lookup(request, compilation_id, write=False)
        if error:
            return error
        seq = selectors.review_seq(comp)  # first: what is logged after it comes over the socket
        return Response({"comments": selectors.comments_for(request.user, comp), "review_seq": seq})

    @extend_schema(request=CommentRequest, responses={201: CommentOut}, operation_id="comments_create")
    def post(self, request: Request, compilation_id: str) -> Response:
        """A comment anchored to a pass, IR line, node, kernel, remark or code line, or a reply
        (`parent`). 400 names an anchor that does not exist, or a body over the limit."""
        comp, error = _lookup(request, compilation_id, write=True)
        if error:
            return error
        req = CommentRequest(data=request.data)
        req.is_valid(raise_exception=True)
        data = req.validated_data
        parent = None
        if "parent" in data:
            parent = selectors.comment_for(request.user, comp, data["parent"])
            if parent is None:
                return error_response(f"parent: no comment {data['parent']} on compilation {comp.pk}", 400)
        elif "anchor" not in data:
            return error_response("anchor: required (or parent, for a reply)", 400)
        try:
            comment = services.create_comment(comp, request.user, anchor=data.get("anchor"), body=data["body"],
                                              parent=parent)
        except services.ReviewError as exc:
            return _denied(exc)
        return Response(selectors.View(request.user, comp).comment(comment), status=201)


class CommentDetailView(RateLimited, APIView):
    throttle_scope = "comment"

    def _comment(self, request: Request, compilation_id: str, comment_id: int):
        comp, error = _lookup(request, compilation_id, write=True)
        if error:
            return None, None, error
        comment = selectors.comment_for(request.user, comp, comment_id)
        if comment is None:
            return None, None, error_response(f"no comment {comment_id} on compilation {compilation_id}", 404)
        return comp, comment, None

    @extend_schema(request=CommentUpdate, responses={200: CommentOut})
    def patch(self, request: Request, compilation_id: str, comment_id: int) -> Response:
        """Edit the body (its author: 403 for others) and/or resolve / reopen the thread."""
        comp, comment, error = self._comment(request, compilation_id, comment_id)
        if error:
            return error
        req = CommentUpdate(data=request.data)
        req.is_valid(raise_exception=True)
        try:
            services.update_comment(comment, comp, request.user, **req.validated_data)
        except services.ReviewError as exc:
            return _denied(exc)
        comment = selectors.comment_for(request.user, comp, comment_id)
        return Response(selectors.View(request.user, comp).comment(comment))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, compilation_id: str, comment_id: int) -> Response:
        """Delete a comment (its author: 403 for others); replies stay."""
        comp, comment, error = self._comment(request, compilation_id, comment_id)
        if error:
            return error
        try:
            services.delete_comment(comment, request.user)
        except services.ReviewError as exc:
            return _denied(exc)
        return Response(status=204)


class ReviewListView(RateLimited, APIView):
    throttle_scope = "comment"

    @extend_schema(responses=OpenApiTypes.OBJECT, operation_id="reviews_list")
    def get(self, request: Request, compilation_id: str) -> Response:
        """The reviews and the state: who approved, who requested changes (each reviewer's latest)."""
        comp, error = _lookup(request, compilation_id, write=False)
        if error:
            return error
        return Response(selectors.reviews_for(request.user, comp))

    @extend_schema(request=ReviewRequest, responses=OpenApiTypes.OBJECT, operation_id="reviews_create")
    def post(self, request: Request, compilation_id: str) -> Response:
        """A verdict: approve, request_changes or comment, with a summary."""
        comp, error = _lookup(request, compilation_id, write=True)
        if error:
            return error
        req = ReviewRequest(data=request.data)
        req.is_valid(raise_exception=True)
        try:
            review = services.create_review(comp, request.user, **req.validated_data)
        except services.ReviewError as exc:
            return _denied(exc)
        return Response({**selectors.reviews_for(request.user, comp), "review": selectors.review_dict(review)},
                        status=201)
