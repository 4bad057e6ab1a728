"""HTTP API views: parse, call a service or selector, shape the response."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

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
)
from explorer.compilations.services import uploads
from explorer.compilations.services.queue import QueueUnavailable
from explorer.compilations.services.submission import create_compilation
from explorer.compilations.services.validation import InvalidRequest, expand_pipeline


def invalid_request_response(exc: InvalidRequest) -> Response:
    """400 `{"error": message, ...the compiler's error fields (stage, pass, ...) if any}`."""
    return error_response(exc.message, 400, **{k: v for k, v in exc.details.items() if k != "message"})


class ModelUploadView(APIView):
    @extend_schema(request={"multipart/form-data": UploadRequest},
                   responses={200: ModelOut, 201: ModelOut, 400: ErrorOut, 413: ErrorOut})
    def post(self, request: Request) -> Response:
        """Upload an ONNX model. 201 with its metadata (200 if the same bytes were uploaded
        before); 413 over the size limit; 400 when the file is missing or not valid ONNX."""
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
        if declared > uploads.max_upload_bytes() + 64 * 1024:  # multipart framing allowance
            return error_response(uploads.too_large_message(declared), 413)
        upload = request.FILES.get("model")
        if upload is None:
            return error_response("multipart field 'model' with the .onnx file is required", 400)
        try:
            model, created = uploads.register_upload(upload.chunks(), name=upload.name, size=upload.size)
        except uploads.UploadTooLarge as exc:
            return error_response(str(exc), 413)
        except uploads.InvalidModel as exc:
            return error_response(str(exc), 400)
        return Response(selectors.model_dict(model), status=201 if created else 200)


class ModelDetailView(APIView):
    @extend_schema(responses={200: ModelOut, 404: ErrorOut})
    def get(self, request: Request, sha256: str) -> Response:
        """An uploaded model's metadata."""
        model = selectors.get_model(sha256)
        if model is None:
            return error_response(f"no model with id {sha256}", 404)
        return Response(selectors.model_dict(model))


class CompilationListView(APIView):
    @extend_schema(request=CompilationRequest,
                   responses={200: CompilationOut, 201: CompilationOut, 400: ErrorOut, 503: ErrorOut})
    def post(self, request: Request) -> Response:
        """Start a compilation: 201 `{id, url, ...}`; 200 with `cached: true` when a succeeded
        compilation of the same model bytes, target, pipeline, shapes, options and compiler
        version exists; 400 naming an unknown model, target, pass, option or unbound dim, or a
        field of the wrong type; 503 (with Retry-After) when the job queue is unreachable: nothing
        was created, submit again. The pipeline is checked as POST /api/pipelines/validate checks
        it (`""` runs no passes, as O0)."""
        req = CompilationRequest(data=request.data)
        req.is_valid(raise_exception=True)
        data = req.validated_data
        model = selectors.get_model(data["model"])
        if model is None:
            return error_response(f"unknown model {data['model']}: upload it first (POST /api/models)", 400)
        try:
            comp, cached = create_compilation(
                model,
                target=data["target"],
                pipeline=data["pipeline"],
                input_shapes=data.get("input_shapes"),
                options=data.get("options"),
                use_cache=data["cache"],
            )
        except InvalidRequest as exc:
            return invalid_request_response(exc)
        except QueueUnavailable as exc:
            response = error_response(f"{exc}; the compilation was not created: submit it again in a moment", 503)
            response["Retry-After"] = "10"
            return response
        return Response(selectors.compilation_dict(comp, cached=cached), status=200 if cached else 201)

    @extend_schema(responses=CompilationOut(many=True), operation_id="compilations_list")
    def get(self, request: Request) -> Response:
        """The 50 most recent compilations."""
        return Response([selectors.compilation_dict(c) for c in selectors.recent_compilations()])


class CompilationDetailView(APIView):
    @extend_schema(responses={200: CompilationOut, 404: ErrorOut})
    def get(self, request: Request, compilation_id: str) -> Response:
        """A compilation's request, status, error and event count. A read only: a compilation
        whose worker was lost is ended by the workers' reaper (`services.reaper`), not here."""
        comp = selectors.get_compilation(compilation_id)
        if comp is None:
            return error_response(f"no compilation with id {compilation_id}", 404)
        return Response(selectors.compilation_dict(comp))


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
        comp = selectors.get_compilation(compilation_id)
        if comp is None:
            return error_response(f"no compilation with id {compilation_id}", 404)
        try:
            after = int(request.query_params.get("after", -1))
            limit = int(request.query_params.get("limit", selectors.EVENT_PAGE_MAX))
        except ValueError:
            return error_response("'after' and 'limit' must be integers", 400)
        limit = max(1, min(limit, selectors.EVENT_PAGE_MAX))
        events = selectors.events_after(compilation_id, after, limit)
        complete = bool(events) and events[-1]["type"] in ("compile.finished", "compile.failed")
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
            model, created = uploads.register_sample(name)
        except KeyError:
            return error_response(f"unknown sample {name!r}; see GET /api/samples", 404)
        except uploads.InvalidModel as exc:
            return error_response(str(exc), 400)
        return Response(selectors.model_dict(model), status=201 if created else 200)


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
