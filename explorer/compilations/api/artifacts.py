"""Downloads: `GET /api/compilations/<id>/artifacts` (the list) and `.../artifacts/<name>` (one file).

Both read the compilation through `selectors.compilation_for` with the requester: a compilation it may
not see is a 404 exactly like an unknown id, for the list and for every file. An artifact the
compilation does not have is a 404 `{"error": reason}` (a failed stage, a cross target's shared
object). Building: `services.artifacts`.
"""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from explorer.compilations import selectors
from explorer.compilations.api.errors import error_response
from explorer.compilations.api.serializers import ErrorOut
from explorer.compilations.services import artifacts


def _not_found(compilation_id: str) -> Response:
    return error_response(f"no compilation with id {compilation_id}", 404)


class ArtifactListView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: ErrorOut}, operation_id="compilations_artifacts_list")
    def get(self, request: Request, compilation_id: str) -> Response:
        """`{"artifacts": [{name, kind, media_type, description, url}], "missing": {name: reason}}`:
        the report, the ONNX model after each pass, the kernels' sources (zip), the module's object
        file and (for a target this server runs) the shared object."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return _not_found(compilation_id)
        found, missing = artifacts.catalogue(comp)
        return Response({"id": comp.id, "status": comp.status, "artifacts": [a.as_dict(comp) for a in found],
                         "missing": missing})


class ArtifactView(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, 404: ErrorOut},
                   operation_id="compilations_artifact_download")
    def get(self, request: Request, compilation_id: str, name: str):
        """One artifact as a file (`Content-Disposition: attachment`); 404 with the reason when the
        compilation does not have it."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return _not_found(compilation_id)
        try:
            data, media_type = artifacts.build(comp, name)
        except artifacts.Unavailable as exc:
            return error_response(exc.reason, 404, artifact=name)
        response = HttpResponse(data, content_type=media_type)
        response["Content-Disposition"] = f'attachment; filename="{comp.id}-{name}"'
        response["Cache-Control"] = "private, max-age=3600"
        return response
