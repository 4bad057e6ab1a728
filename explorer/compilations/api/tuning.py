"""The tuning job of a compilation (issue 16): its state, and stopping it.

A tuning compilation (asked with `tune_budget_s`) is read and stopped with the compilation's own
access rules: one the requester may not see is a 404 exactly like an unknown id
(`selectors.compilation_for`); stopping it is for who may manage it (its owner and the owner's
teams; for an anonymous compilation, the browser session that submitted it), others who see it get
403. Its events (`tune.*`) are the compilation's, read and streamed as they are
(`/api/compilations/<id>/events`, `/ws/compilations/<id>/`).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from explorer.compilations import selectors
from explorer.compilations.api.errors import error_response
from explorer.compilations.api.serializers import ErrorOut
from explorer.compilations.api.views import SESSION_COMPILATIONS, not_found
from explorer.compilations.services.tuning_control import NotTuning, TuningOver, request_stop


def session_ids(request: Request) -> list[str]:
    """The ids of the compilations this browser session submitted anonymously."""
    return list(request.session.get(SESSION_COMPILATIONS, [])) if hasattr(request, "session") else []


class TuningView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: ErrorOut})
    def get(self, request: Request, compilation_id: str) -> Response:
        """The compilation's tuning: `{"id", "budget_s" (null: not a tuning compilation), "status",
        "stop_requested_at", "can_stop", "queue", "workers": {name: {batches, candidates, busy_s}},
        "records": {workload: {kernel, median_us, default_us, trials, source: "this run" | "database",
        found_in (compilation id, or null when the requester may not see it), found_by}}}` for every
        workload its kernels looked up that has a record. 404 as for the compilation."""
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return not_found(compilation_id)
        return Response(selectors.tuning_dict(comp, request.user, session_ids(request)))


class TuningStopView(APIView):
    @extend_schema(request=None, responses={202: OpenApiTypes.OBJECT, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut})
    def post(self, request: Request, compilation_id: str) -> Response:
        """Stop the compilation's tuning: the search ends after the batch being measured, every
        record it found is kept, and the compilation goes on to compile with them. 202 with the
        tuning state (again 202 when already asked); 403 for a requester who sees it but may not
        manage it (not its owner or a member of the owner's teams); 404 as for the compilation;
        409 when it is not a tuning compilation or its tuning is over."""
        ids = session_ids(request)
        comp = selectors.compilation_for(request.user, compilation_id)
        if comp is None:
            return not_found(compilation_id)
        if not selectors.can_manage(request.user, comp, ids):
            return error_response("only the owner of a compilation (or its team) can stop its tuning", 403)
        try:
            request_stop(comp)
        except (NotTuning, TuningOver) as exc:
            return error_response(str(exc), 409)
        return Response(selectors.tuning_dict(comp, request.user, ids), status=202)
