"""The API toolkit every route shares: errors, views, fields, pagination, permissions, schema."""

from synapse.api.errors import (
    Conflict,
    InsufficientScope,
    ServiceUnavailable,
    error_body,
    error_response,
    exception_handler,
    json_handler404,
    json_handler500,
)
from synapse.api.fields import DurationField, SingleLineName, StrictSerializer, TimestampField
from synapse.api.pagination import PageQuery, PageSerializer, page_of
from synapse.api.permissions import HumanOnly, MindAccess, PlaintextForHumans, WholeMind
from synapse.api.schema import (
    CONFLICT,
    HUMAN_AUTH,
    MIND_PARAMETER,
    VERSION_CONFLICT,
    error_responses,
)
from synapse.api.views import (
    AUTH_PARAMS,
    MindScopedViewSet,
    QueryFilterBackend,
    SynapseAPIView,
    request_mind,
    request_provenance,
    validated_query,
)

__all__ = [
    "AUTH_PARAMS", "CONFLICT", "HUMAN_AUTH", "MIND_PARAMETER", "VERSION_CONFLICT", "Conflict",
    "DurationField", "HumanOnly", "InsufficientScope", "MindAccess", "MindScopedViewSet",
    "PageQuery", "PageSerializer",
    "PlaintextForHumans", "QueryFilterBackend", "ServiceUnavailable", "SingleLineName",
    "StrictSerializer", "SynapseAPIView", "TimestampField", "error_body", "error_response",
    "error_responses", "exception_handler", "json_handler404", "json_handler500", "page_of",
    "request_mind", "request_provenance", "validated_query", "WholeMind",
]
