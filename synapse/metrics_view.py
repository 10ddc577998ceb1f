"""``GET /metrics``: Prometheus' text format for a scraper holding ``SYNAPSE_METRICS_TOKEN``
(docs/scaling.md, "Metrics"; docs/security.md). Off (no token set) it is a 404 like any
unknown path. No Mind Key, OAuth token or session opens it: it counts every mind's requests.
"""

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpResponse

from memories.embeddings import queue_state
from synapse import metrics
from synapse.api import error_response, json_handler404

CHALLENGE = 'Bearer realm="synapse-metrics"'


def _refusal(code: str, message: str) -> HttpResponse:
    return error_response(401, code, message, headers={"WWW-Authenticate": CHALLENGE})


def metrics_view(request):
    expected = settings.METRICS_TOKEN
    if not expected:
        return json_handler404(request)
    if request.method not in ("GET", "HEAD"):
        return error_response(405, "method_not_allowed",
                              f'Method "{metrics.method_label(request.method)}" not allowed.',
                              headers={"Allow": "GET, HEAD"})
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return _refusal("not_authenticated",
                        "The metrics token is required: Authorization: Bearer <token>.")
    if not metrics.token_matches(presented.strip(), expected):
        return _refusal("authentication_failed", "The metrics token is not valid.")
    body = metrics.exposition(metrics.QueueCollector(queue_state, (DatabaseError,)))
    return HttpResponse(body, content_type=metrics.CONTENT_TYPE)
