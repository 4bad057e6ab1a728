"""HTTP API views: parse, call a service or selector, shape the response.

Every compilation and model is read through `selectors.compilation_for` / `model_for` with the
requester: one it may not see is a 404 exactly like an unknown id.
"""

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compiler.events import TERMINAL_EVENT_TYPES
from explorer.compilations import selectors
from explorer.compilations.api.errors import error_response
from explorer.compilations.api.serializers import (
    CompilationOut,
    CompilationRequest,
    ErrorOut,
    EventsPage,
    ModelOut,
    PipelineRequest,
    UploadRequest,
    VisibilityRequest,
)
from explorer.compilations.services import calibration, retention, uploads
from explorer.compilations.services.queue import QueueUnavailable
from explorer.compilations.services.reading import ReaderBusy
from explorer.compilations.services.submission import create_compilation, set_visibility
from explorer.compilations.services.validation import InvalidRequest, expand_pipeline
from explorer.compilations.visibility import check_visibility, signed_in
from explorer.web.security import RateLimited

SESSION_COMPILATIONS = "prism_compilations"  # ids an anonymous browser session submitted (its listing)


def invalid_request_response(exc: InvalidRequest) -> Response:
    """400 `{"error": message, ...the compiler's error fields (stage, pass, ...) if any, "field": the
    request field it concerns (`validation.REQUEST_FIELDS`) if any}`."""
    fields = {k: v for k, v in exc.details.items() if k != "message"}
    return error_response(exc.message, 400, **fields, **({"field": exc.field} if exc.field else {}))


def busy_response(exc: ReaderBusy) -> Response:
    """503 with Retry-After: every child that reads large models was busy (`services.reading`)."""
    response = error_response(str(exc), 503)
    response["Retry-After"] = "10"
    return response


def sign_in_required(request: Request, what: str) -> Response | None:
    """401 when `PRISM_REQUIRE_SIGN_IN` is set and nobody is signed in, else None."""
    if settings.PRISM_REQUIRE_SIGN_IN and not signed_in(request.user):
        return error_response(f"sign in to {what}: this server requires it (PRISM_REQUIRE_SIGN_IN)", 401)
    return None


def not_found(compilation_id: str) -> Response:
    return error_response(f"no compilation with id {compilation_id}", 404)


class ModelUploadView(RateLimited, APIView):
    throttle_scope = "upload"

    @extend_schema(request={"multipart/form-data": UploadRequest},
                   responses={200: ModelOut, 201: ModelOut, 400: ErrorOut, 413: ErrorOut})
    def post(self, request: Request) -> Response:
        """Upload an ONNX model (multipart field `visibility`: private, unlisted (default) or
        public). 201 with its metadata (200 if the same bytes were uploaded before); 413 over the
        size limit; 400 when the file is missing or not valid ONNX; 401 when sign-in is required."""
        if (denied := sign_in_required(request, "upload models")) is not None:
            return denied
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
        if declared > uploads.max_upload_bytes() + 64 * 1024:  # multipart framing allowance
            return error_response(uploads.too_large_message(declared), 413)
        upload = request.FILES.get("model")
        if upload is None:
            return error_response("multipart field 'model' with the .onnx file is required", 400)
        try:
            visibility = check_visibility(request.data.get("visibility"), request.user)
        except ValueError as exc:
            return error_response(str(exc), 400)
        try:
            model, created = uploads.register_upload(upload.chunks(), name=upload.name, size=upload.size,
                                                     owner=request.user,
                                                     visibility=request.data.get("visibility") and visibility)
        except uploads.UploadTooLarge as exc:
            return error_response(str(exc), 413)
        except uploads.InvalidModel as exc:
            return error_response(str(exc), 400)
        except ReaderBusy as exc:
            return busy_response(exc)
        return Response(selectors.model_dict(model, request.user), status=201 if created else 200)


class CalibrationUploadView(RateLimited, APIView):
    throttle_scope = "upload"

    @extend_schema(request={"multipart/form-data": {"type": "object", "properties": {"data": {"type": "string",
                                                                                         "format": "binary"}}}},
                   responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT, 400: ErrorOut, 413: ErrorOut})
    def post(self, request: Request) -> Response:
        """Upload calibration data for the quantize pass: an ``.npz`` with one array per graph input,
        samples along a leading axis. 201 ``{"id": sha256, "arrays": {name: {shape, dtype}}}`` (200 if the
        same bytes were uploaded before); 400 when it is not an ``.npz`` of numeric arrays; 413 over the
        size limit. Use it as ``options.calibration`` of POST /api/compilations, which checks its arrays
        against the model's inputs (400 naming the input that does not match)."""
        upload = request.FILES.get("data")
        if upload is None:
            return error_response("multipart field 'data' with the .npz file is required", 400)
        try:
            sha, arrays, created = calibration.store(upload.chunks(), size=upload.size)
        except uploads.UploadTooLarge as exc:
            return error_response(str(exc), 413)
        except calibration.InvalidCalibration as exc:
            return error_response(str(exc), 400)
        return Response({"id": sha, "arrays": arrays}, status=201 if created else 200)


class ModelDetailView(APIView):
    @extend_schema(responses={200: ModelOut, 404: ErrorOut})
    def get(self, request: Request, sha256: str) -> Response:
        """An uploaded model's metadata (404 when the requester may see none of its uploads)."""
        model = selectors.model_for(request.user, sha256)
        if model is None:
            return error_response(f"no model with id {sha256}", 404)
        return Response(selectors.model_dict(model, request.user))

    @extend_schema(request=VisibilityRequest, responses={200: ModelOut, 403: ErrorOut, 404: ErrorOut})
    def patch(self, request: Request, sha256: str) -> Response:
        """Change the visibility of the requester's own upload of these bytes (403 when it has
        none: others' uploads are theirs; 404 when it may see none)."""
        model = selectors.model_for(request.user, sha256)
        if model is None:
            return error_response(f"no model with id {sha256}", 404)
        req = VisibilityRequest(data=request.data)
        req.is_valid(raise_exception=True)
        if not signed_in(request.user) or not uploads.set_upload_visibility(model, request.user,
                                                                           req.validated_data["visibility"]):
            return error_response("only who uploaded a model can change the visibility of its upload", 403)
        return Response(selectors.model_dict(selectors.model_for(request.user, sha256), request.user))

    @extend_schema(request=None, responses={204: None, 403: ErrorOut, 404: ErrorOut})
    def delete(self, request: Request, sha256: str) -> Response:
        """Delete the requester's own upload of these bytes; the bytes themselves go once no
        compilation and no other upload uses them. 403 without an upload of one's own, 404 when
        the requester may see none."""
        model = selectors.model_for(request.user, sha256)
        if model is None:
            return error_response(f"no model with id {sha256}", 404)
        if not signed_in(request.user) or not retention.delete_upload(model, request.user):
            return error_response("only who uploaded a model can delete its upload", 403)
        return Response(status=204)


class CompilationListView(RateLimited, APIView):
    throttle_scope = "compile"

    @extend_schema(request=CompilationRequest,
                   responses={200: CompilationOut, 201: CompilationOut, 400: ErrorOut, 503: ErrorOut})
    def post(self, request: Request) -> Response:
        """Start a compilation: 201 `{id, url, ...}`; 200 with `cached: true` when a succeeded
        compilation of the same model bytes, target, pipeline, shapes, options and compiler
        version exists; 400 naming an unknown model, target, pass, option or unbound dim, or a
        field of the wrong type; 503 (with Retry-After) when the job queue is unreachable: nothing
        was created, submit again. The pipeline is checked as POST /api/pipelines/validate checks
        it (`""` runs no passes, as O0). `visibility`: private, unlisted (default) or public; a
        cache hit never hands out another user's compilation it may not see (see
        `services.submission`). 401 when sign-in is required (PRISM_REQUIRE_SIGN_IN)."""
        if (denied := sign_in_required(request, "compile")) is not None:
            return denied
        req = CompilationRequest(data=request.data)
        req.is_valid(raise_exception=True)
        data = req.validated_data
        try:
            visibility = check_visibility(data.get("visibility"), request.user)
        except ValueError as exc:
            return error_response(str(exc), 400)
        model = selectors.model_for(request.user, data["model"])
        if model is None:
            return error_response(f"unknown model {data['model']}: upload it first (POST /api/models)", 400)
        try:
            comp, cached = create_compilation(
                model,
                target=data["target"],
                pipeline=data["pipeline"],
                input_shapes=data.get("input_shapes"),
                input_values=data.get("input_values"),
                dim_ranges=data.get("dim_ranges"),
                options=data.get("options"),
                use_cache=data["cache"],
                owner=request.user,
                visibility=visibility,
                tune_budget_s=data.get("tune_budget_s"),
            )
        except InvalidRequest as exc:
            return invalid_request_response(exc)
        except QueueUnavailable as exc:
            response = error_response(f"{exc}; the compilation was not created: submit it again in a moment", 503)
            response["Retry-After"] = "10"
            return response
        except ReaderBusy as exc:
            return busy_response(exc)
        if not signed_in(request.user):
            ids = request.session.get(SESSION_COMPILATIONS, [])
            request.session[SESSION_COMPILATIONS] = [*(i for i in ids if i != comp.id), comp.id][-50:]
        return Response(selectors.compilation_dict(comp, request.user, cached=cached),
                        status=200 if cached else 201)

    @extend_schema(responses=CompilationOut(many=True), operation_id="compilations_list")
    def get(self, request: Request) -> Response:
        """The 50 most recent compilations listed for the requester: the public ones and its own
        (signed in, or submitted from this browser session); unlisted and private ones of others
        are never listed."""
        mine = request.session.get(SESSION_COMPILATIONS, []) if hasattr(request, "session") else []
        listed = selectors.listed_compilations(request.user, also=mine)
        return Response([selectors.compilation_dict(c, request.user) for c in listed])


class CompilationDetailView(APIView):
    @extend_schema(responses={200: CompilationOut, 404: ErrorOut})
    def get(self, request: Request, compilation_id: str) -> Response:
        """A compilation's request, owner, visibility, status, error and event count. A read only:
        a compilation whose worker was lost is ended by the workers' reaper (`services.reaper`)."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return not_found(compilation_id)
        return Response(selectors.compilation_dict(comp, request.user))

    @extend_schema(request=VisibilityRequest, responses={200: CompilationOut, 400: ErrorOut, 403: ErrorOut,
                                                         404: ErrorOut})
    def patch(self, request: Request, compilation_id: str) -> Response:
        """Change a compilation's visibility (`{"visibility": "private"|"unlisted"|"public"}`):
        its owner only (403 for others who see it, 404 for those who do not)."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return not_found(compilation_id)
        if not signed_in(request.user) or comp.owner_id != request.user.pk:
            return error_response("only the owner of a compilation can change its visibility", 403)
        req = VisibilityRequest(data=request.data)
        req.is_valid(raise_exception=True)
        set_visibility(comp, req.validated_data["visibility"])
        return Response(selectors.compilation_dict(comp, request.user))

    @extend_schema(request=None, responses={204: None, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut})
    def delete(self, request: Request, compilation_id: str) -> Response:
        """Delete a finished compilation with its event log, comments and reviews (and its model's
        bytes when nothing else uses them): its owner only (403 for others who see it, 404 for
        those who do not); 409 while it is queued or running."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return not_found(compilation_id)
        if not signed_in(request.user) or comp.owner_id != request.user.pk:
            return error_response("only the owner of a compilation can delete it", 403)
        try:
            retention.delete_compilation(comp)
        except retention.StillRunning as exc:
            return error_response(str(exc), 409)
        return Response(status=204)


class CompilationEventsView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="return events with seq > after (default -1)"),
            OpenApiParameter("limit", int, description=f"at most this many (default and max {selectors.EVENT_PAGE_MAX})"),
        ],
        responses={200: EventsPage, 400: ErrorOut, 404: ErrorOut},
    )
    def get(self, request: Request, compilation_id: str) -> Response:
        """Stored events after a seq: `{"events": [...], "complete": bool, "next_after": seq,
        "status"}`; `complete` is true when the page ends the log (its last event is terminal);
        pass `next_after` as `after` to read the next page."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return not_found(compilation_id)
        try:
            after = int(request.query_params.get("after", -1))
            limit = int(request.query_params.get("limit", selectors.EVENT_PAGE_MAX))
        except ValueError:
            return error_response("'after' and 'limit' must be integers", 400)
        limit = max(1, min(limit, selectors.EVENT_PAGE_MAX))
        events = selectors.events_after(comp, after, limit)
        complete = bool(events) and events[-1]["type"] in TERMINAL_EVENT_TYPES
        next_after = events[-1]["seq"] if events else after
        return Response({"id": comp.id, "status": comp.status, "events": events, "complete": complete,
                         "next_after": next_after})


class CatalogView(APIView):
    kind = ""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        """What the compiler offers: targets, passes (name, doc, options) or pipelines (presets and
        their expansion)."""
        return Response(selectors.catalog(self.kind))


class TargetsView(CatalogView):
    kind = "targets"


class PassesView(CatalogView):
    kind = "passes"


class PipelinesView(CatalogView):
    kind = "pipelines"


class PipelineValidateView(APIView):
    @extend_schema(request=PipelineRequest, responses={200: PipelineRequest, 400: ErrorOut})
    def post(self, request: Request) -> Response:
        """Check pipeline text (or a preset name) without compiling, exactly as POST
        /api/compilations checks it: 200 `{"pipeline": expanded text}` (`""` for `""` or O0: no
        passes), or 400 for a pipeline that is not text or names an unknown pass or option (the
        message lists the valid ones)."""
        req = PipelineRequest(data=request.data)
        req.is_valid(raise_exception=True)
        try:
            expanded = expand_pipeline(req.validated_data["pipeline"])
        except InvalidRequest as exc:
            return invalid_request_response(exc)
        return Response({"pipeline": expanded})


class SampleListView(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        """The real sample models this server knows (`available`: already fetched here)."""
        return Response(selectors.samples())


class SampleModelView(APIView):
    @extend_schema(request=None, responses={200: ModelOut, 201: ModelOut, 400: ErrorOut, 404: ErrorOut})
    def post(self, request: Request, name: str) -> Response:
        """Register a sample as an uploaded model (fetching it if needed) without uploading it;
        then POST /api/compilations with its id. 404 for an unknown sample."""
        try:
            model, created = uploads.register_sample(name, owner=request.user)
        except KeyError:
            return error_response(f"unknown sample {name!r}; see GET /api/samples", 404)
        except uploads.InvalidModel as exc:
            return error_response(str(exc), 400)
        except ReaderBusy as exc:
            return busy_response(exc)
        return Response(selectors.model_dict(model, request.user), status=201 if created else 200)


class NotFoundView(APIView):
    """Any other path under /api/: a JSON 404 (not Django's HTML page), for every method."""

    schema = None  # not an endpoint: left out of /api/schema

    def http_method_not_allowed(self, request, *args, **kwargs) -> Response:
        return error_response(f"no API endpoint {request.method} {request.path}; the endpoints are "
                              "listed by GET /api/schema", 404)

    options = http_method_not_allowed


class HealthView(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        """200 `{"status": "ok"}` once the web server answers (used by `make run`)."""
        return Response({"status": "ok"})
