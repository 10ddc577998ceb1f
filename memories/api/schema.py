"""OpenAPI bits of the memory routes: their error answers and the Idempotency-Key header."""

from drf_spectacular.utils import OpenApiParameter

from synapse.api import error_responses

ERRORS = error_responses(not_found="No such memory in this mind")
IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="A retried request with the same key returns the first answer and writes "
                "nothing twice (kept 24 hours).")
