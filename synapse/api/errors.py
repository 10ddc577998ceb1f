"""The one error shape of the API: exceptions, DRF's exception handler, the JSON 404/500."""

import logging
import sys

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from psycopg.errors import QueryCanceled
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from minds.access import NoSuchMind, RoleRefused
from synapse.refusals import Refusal

# The logger keeps the name it had when this was one module (operators filter on it).
logger = logging.getLogger("synapse.api")


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class InsufficientScope(exceptions.PermissionDenied):
    """A 403 for an OAuth access token whose scope does not cover the request (RFC 6750
    §3.1): its ``WWW-Authenticate`` challenge names the scope needed."""

    default_code = "insufficient_scope"

    def __init__(self, detail: str, challenge: str):
        super().__init__(detail)
        self.challenge = challenge


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The database is unavailable; try again shortly."
    default_code = "unavailable"


def error_body(status_code: int, code: str, message: str, fields: dict | None = None) -> dict:
    """The body of every 4xx and 5xx (the codes: docs/api.md, "Errors")::

        {"error": {"status": 400, "code": "invalid", "message": "…", "fields": {"tags": ["…"]}}}

    A refused write over a quota adds what was exceeded (``Refusal.error_fields``):
    ``"quota": {"name": "versions", "limit": 10000000, "used": 10000000, "adding": 1}``.
    """
    error = {"status": status_code, "code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def error_response(status_code: int, code: str, message: str, fields: dict | None = None,
                   headers: dict | None = None) -> JsonResponse:
    response = JsonResponse(error_body(status_code, code, message, fields), status=status_code)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _first_message(detail) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and isinstance(detail.get("detail"), str):
        # simplejwt's token errors: {"detail", "code", "messages": [{"message": why}]}.
        reasons = [item.get("message") for item in detail.get("messages", [])
                   if isinstance(item, dict) and item.get("message")]
        return str(detail["detail"]) + (f" ({reasons[0]})" if reasons else "")
    if isinstance(detail, dict) and detail:
        name, value = next(iter(detail.items()))
        inner = _first_message(value)
        return inner if name == "non_field_errors" else f"{name}: {inner}"
    return str(detail)


def exception_handler(exc, context):
    """DRF's handler, reshaped into the one error shape; database outages become 503, and a
    service's Django ValidationError (a rule the input breaks) a 400 naming the field."""
    if isinstance(exc, Refusal):
        body = error_body(exc.status_code, exc.code, str(exc))
        body["error"].update(exc.error_fields())
        return Response(body, status=exc.status_code)
    if isinstance(exc, OperationalError) and isinstance(exc.__cause__, QueryCanceled):
        # statement_timeout (settings.DATABASES) cut a runaway query short.
        logger.error("database statement cancelled (statement_timeout)")
        exc = ServiceUnavailable("The request took too long and was cancelled.", "timeout")
    elif isinstance(exc, OperationalError | InterfaceError):
        logger.error("database unavailable: %s", exc.__class__.__name__)
        exc = ServiceUnavailable()
    elif isinstance(exc, DatabaseError):
        logger.exception("database error")
        return Response(error_body(500, "server_error", "Internal server error."), status=500)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(serializers.as_serializer_error(exc))
    elif isinstance(exc, NoSuchMind):
        exc = exceptions.NotFound(str(exc))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, RoleRefused):
        exc = exceptions.PermissionDenied(str(exc), code="insufficient_role")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = exc.detail if isinstance(exc, exceptions.APIException) else response.data
    code = exc.default_code if isinstance(exc, exceptions.APIException) else "error"
    fields = None
    if isinstance(exc, exceptions.ValidationError):
        code = "invalid"
        if isinstance(detail, dict):
            fields = {name: value for name, value in detail.items() if name != "non_field_errors"}
        message = _first_message(detail)
    else:
        message = _first_message(detail)
        if hasattr(detail, "code") and detail.code:
            code = str(detail.code)
    response.data = error_body(response.status_code, code, message, fields)
    if isinstance(exc, InsufficientScope):
        response["WWW-Authenticate"] = exc.challenge
    if response.status_code == 503:
        response["Retry-After"] = "5"
    return response


def json_handler404(request, exception=None):
    return error_response(404, "not_found", "Not found.")


@csrf_exempt  # any method: an MCP client POSTs
def mcp_not_served(request):
    """``/mcp`` where Django serves it: a REST-only node (``SYNAPSE_WORKER_CLASS=gthread``,
    synapse/gunicorn_conf.py); elsewhere synapse.asgi answers ``/mcp`` before Django."""
    return error_response(404, "not_found", "This node serves the REST API only "
                          "(SYNAPSE_WORKER_CLASS=gthread): /mcp is served by the nodes on "
                          "the default server (SYNAPSE_WORKER_CLASS=uvicorn).")


def json_handler500(request):
    # Outside DRF views (middleware, sessions, the web UI) a database outage lands here:
    # it is still a 503 the client may retry, not a 500.
    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        return error_response(503, "unavailable", ServiceUnavailable.default_detail,
                              headers={"Retry-After": "5"})
    return error_response(500, "server_error", "Internal server error.")
