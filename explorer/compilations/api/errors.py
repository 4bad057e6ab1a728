"""One error shape for the whole API: `{"error": "<one line naming what is wrong>", ...details}`."""

from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def error_response(message: str, status: int, **details) -> Response:
    return Response({"error": " ".join(str(message).split()), **details}, status=status)


def _first_message(detail) -> str:
    """The first message in a ValidationError's detail, prefixed by its field (`model: ...`)."""
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
        data = response.data
        if not isinstance(exc, ValidationError) and isinstance(data, dict) and "detail" in data:
            # ParseError, NotFound, MethodNotAllowed ...: `{"detail": message}`, no field to name
            message = _first_message(data["detail"])
        else:
            message = _first_message(data)
        response.data = {"error": message, "detail": data}
    return response
