"""API plumbing shared by every route: the one error shape, strict query parameters,
timestamps and durations, and the base view that resolves which mind a request acts on.

Error shape (every 4xx and 5xx)::

    {"error": {"status": 400, "code": "invalid", "message": "…", "fields": {"tags": ["…"]}}}

A refused write over a quota adds what was exceeded:
``"quota": {"name": "versions", "limit": 10000000, "used": 10000000, "adding": 1}``.
"""

import logging
import re
import sys
from datetime import UTC, datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from psycopg.errors import QueryCanceled
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from minds.authentication import is_agent
from minds.models import Mind

logger = logging.getLogger("synapse.api")

# Accepted on every route: how the caller authenticates or picks a mind.
AUTH_PARAMS = frozenset({"key", "mind"})


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The database is unavailable; try again shortly."
    default_code = "unavailable"


def error_body(status_code: int, code: str, message: str, fields: dict | None = None) -> dict:
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
    from memories.quotas import QuotaExceeded

    if isinstance(exc, QuotaExceeded):
        # 403: the request is understood and valid, but this mind may not grow further
        # (not 413, which is about the size of the request itself).
        body = error_body(403, "quota_exceeded", str(exc))
        body["error"]["quota"] = exc.as_dict()
        return Response(body, status=403)
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
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
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
    if response.status_code == 503:
        response["Retry-After"] = "5"
    return response


# -- Timestamps and durations ------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d{1,9})\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(raw: str) -> timedelta:
    """``604800``, ``7d``, ``12h``, ``30m``, ``45s``, ``2w`` → timedelta; ValueError otherwise."""
    match = _DURATION.match(str(raw))
    if not match:
        raise ValueError("Use seconds (604800) or a number with s, m, h, d or w (7d, 12h, 30m).")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


def parse_timestamp(raw) -> datetime:
    """RFC 3339 string or Unix epoch seconds → aware UTC datetime; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError("Expected an RFC 3339 timestamp or Unix epoch seconds.")
    if isinstance(raw, int | float) or (isinstance(raw, str) and
                                         re.fullmatch(r"-?\d+(\.\d+)?", raw.strip())):
        seconds = float(raw)
        if not -62135596800 < seconds < 253402300799:
            raise ValueError("Epoch seconds out of range.")
        return datetime.fromtimestamp(seconds, tz=UTC)
    if not isinstance(raw, str):
        raise ValueError("Expected an RFC 3339 timestamp or Unix epoch seconds.")
    text = raw.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("Expected an RFC 3339 timestamp (2026-01-31T12:00:00Z) or Unix "
                         "epoch seconds.") from None
    if value.tzinfo is None:
        raise ValueError("The timestamp needs a time zone offset, e.g. Z or +01:00.")
    return value.astimezone(UTC)


def format_timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


@extend_schema_field(OpenApiTypes.DATETIME)
class TimestampField(serializers.Field):
    """Reads RFC 3339 or epoch seconds; writes RFC 3339 UTC."""

    default_error_messages = {"invalid": "{message}"}

    def to_internal_value(self, data):
        try:
            return parse_timestamp(data)
        except (ValueError, OverflowError, OSError) as error:
            self.fail("invalid", message=str(error))

    def to_representation(self, value):
        return format_timestamp(value)


@extend_schema_field(OpenApiTypes.STR)
class DurationField(serializers.Field):
    default_error_messages = {"invalid": "{message}"}

    def to_internal_value(self, data):
        try:
            return parse_duration(data)
        except ValueError as error:
            self.fail("invalid", message=str(error))

    def to_representation(self, value):
        return int(value.total_seconds())


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, naming them.

    ``forbidden_fields`` are fields a client may never set (server-assigned); they get
    their own message so the client learns why.
    """

    forbidden_fields: frozenset[str] = frozenset()

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise exceptions.ValidationError(
                {"non_field_errors": ["Expected a JSON object."]})
        errors = {}
        for name in data:
            if name in self.forbidden_fields:
                errors[name] = ["This field is set by the server and cannot be written."]
            elif name not in self.fields or self.fields[name].read_only:
                errors[name] = ["Unknown field."]
        if errors:
            raise exceptions.ValidationError(errors)
        return super().to_internal_value(data)


# -- Pagination ----------------------------------------------------------------------------

class PageQuery(serializers.Serializer):
    """``limit`` and ``offset``, as every paginated list takes them."""

    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=10_000_000, default=0)


def page_of(queryset, query: dict) -> tuple[list, dict]:
    """One page of an ordered ``queryset`` and the ``count``, ``limit`` and ``offset`` that
    go with it in the response (the count is only queried when the page is full)."""
    limit, offset = query["limit"], query["offset"]
    rows = list(queryset[offset:offset + limit])
    count = queryset.count() if len(rows) == limit or offset else offset + len(rows)
    return rows, {"count": count, "limit": limit, "offset": offset}


# -- Permissions ---------------------------------------------------------------------------

class MindAccess(BasePermission):
    """Any authenticated principal; a read-only Mind Key may only read."""

    message = "This Mind Key is read-only."

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in ("GET", "HEAD", "OPTIONS") or not is_agent(request.user):
            return True
        return request.user.can_write


class HumanOnly(BasePermission):
    """A human (JWT or session); Mind Keys are refused with 403."""

    message = "Only a human may do this; Mind Keys cannot."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and not is_agent(request.user))


MIND_PARAMETER = OpenApiParameter(
    "mind", str, description="The mind to act on (humans with a JWT or session only; a Mind "
    "Key always acts on its own mind).", required=False)


class SynapseAPIView(APIView):
    """Base view: authenticated, strict query parameters, and the mind of the request.

    ``query_serializer`` (per view, or per method in ``query_serializers``) declares the
    query parameters; anything else is a 400 naming it.
    """

    permission_classes = [MindAccess]
    # Rate-limit scope (synapse.throttling): "search", "export", … or a dict by HTTP method;
    # None means writes count as "write" and reads are not limited.
    throttle_scope: str | dict[str, str] | None = None
    query_serializer: type[serializers.Serializer] | None = None
    query_serializers: dict[str, type[serializers.Serializer]] = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.query = self._validated_query(request)

    def _query_serializer_class(self, request):
        # HEAD is a GET without the body (Django answers it with the GET handler).
        method = "GET" if request.method == "HEAD" else request.method
        return self.query_serializers.get(method, self.query_serializer)

    def _validated_query(self, request) -> dict:
        serializer_class = self._query_serializer_class(request)
        known = set(AUTH_PARAMS)
        if serializer_class is not None:
            known |= set(serializer_class().fields)
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            raise exceptions.ValidationError(
                {name: ["Unknown query parameter."] for name in unknown})
        if serializer_class is None:
            return {}
        params = {name: request.query_params.getlist(name)
                  if isinstance(serializer_class().fields[name], serializers.ListField)
                  else request.query_params.get(name)
                  for name in request.query_params if name not in AUTH_PARAMS}
        serializer = serializer_class(data=params)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def get_mind(self) -> Mind:
        """The mind this request acts on: the key's, or the human's ``?mind=``."""
        if hasattr(self, "_mind"):
            return self._mind
        principal = self.request.user
        if is_agent(principal):
            mind_param = self.request.query_params.get("mind")
            if mind_param and mind_param != principal.mind.id:
                raise exceptions.NotFound("No such mind.")
            self._mind = principal.mind
        else:
            mind_id = self.request.query_params.get("mind")
            if not mind_id:
                raise exceptions.ValidationError(
                    {"mind": ["Humans must name the mind to act on: ?mind=<mind_id>."]})
            self._mind = Mind.objects.owned_by(principal).filter(pk=mind_id).first()
            if self._mind is None:
                raise exceptions.NotFound("No such mind.")
        return self._mind


def json_handler404(request, exception=None):
    return error_response(404, "not_found", "Not found.")


def json_handler500(request):
    # Outside DRF views (middleware, sessions, the web UI) a database outage lands here:
    # it is still a 503 the client may retry, not a 500.
    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        return error_response(503, "unavailable", ServiceUnavailable.default_detail,
                              headers={"Retry-After": "5"})
    return error_response(500, "server_error", "Internal server error.")
