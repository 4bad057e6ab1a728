"""One error shape for the whole API: `{"error": "<one line naming what is wrong>", ...details}`."""

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def error_response(message: str, status: int, **details) -> Response:
    return Response({"error": " ".join(str(message).split()), **details}, status=status)


def _first_message(detail) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            inner = _first_message(value)
            return inner if key == "non_field_errors" else f"{key}: {inner}"
        return "invalid request"
    if isinstance(detail, list):
        return _first_message(detail[0]) if detail else "invalid request"
    return str(detail)


def exception_handler(exc, context):
    """DRF's handler, with its body reshaped to `{"error": message, "detail": original}`."""
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = {"error": _first_message(response.data), "detail": response.data}
    return response
