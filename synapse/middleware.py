"""Request metrics, request guards that run before anything else (body size, query-string
hygiene), and the Content-Security-Policy of the pages humans use."""

import time
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed

from synapse import metrics
from synapse.api import error_response
from synapse.replicas import mark_write


class MetricsMiddleware:
    """Times each request and counts its errors by route (synapse.metrics). Not in the chain
    at all while metrics are off (no ``SYNAPSE_METRICS_TOKEN``).

    The route is the URL pattern that matched (``/memory/<memory_id:memory_id>``); static
    files are ``/static/``, and a request no pattern matched (a 404, or one refused before
    routing, such as a 413) is ``unmatched``."""

    def __init__(self, get_response):
        if not settings.METRICS_TOKEN:
            raise MiddlewareNotUsed
        self.get_response = get_response
        self.static_prefix = "/" + settings.STATIC_URL.lstrip("/")

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        seconds = time.perf_counter() - started
        match = request.resolver_match
        if match is not None:
            route = "/" + match.route
        elif request.path.startswith(self.static_prefix):
            route = self.static_prefix
        else:
            route = metrics.UNMATCHED
        metrics.observe_request(route, request.method, response.status_code, seconds)
        return response


# Routes that take many memories at once have their own, larger caps (they read the body
# as it arrives: synapse.parsers.StreamingJSONParser).
_LARGE_BODY_LIMITS = {"/memory/mind-import": "IMPORT_MAX_BODY_BYTES",
                      "/memory/sync": "SYNC_MAX_BODY_BYTES"}


class RequestGuardMiddleware:
    """413 for oversized bodies; 400 for query strings with NUL bytes or invalid UTF-8;
    ``Cache-Control: no-store`` on every API answer (memories are private)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = self._refuse(request)
        if refusal is not None:
            return refusal
        response = self.get_response(request)
        if not request.path.startswith(("/static/", "/api/docs/")):
            response.setdefault("Cache-Control", "no-store")
        return response

    @staticmethod
    def _refuse(request):
        limit = getattr(settings, _LARGE_BODY_LIMITS.get(request.path, "MAX_BODY_BYTES"))
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return error_response(400, "invalid", "Content-Length is not a number.")
        if length > limit:
            return error_response(413, "too_large",
                                  f"The request body is larger than {limit} bytes.")
        raw_query = request.META.get("QUERY_STRING", "")
        if raw_query:
            decoded = unquote_to_bytes(raw_query.replace("+", " "))
            try:
                text = decoded.decode("utf-8")
            except UnicodeDecodeError:
                return error_response(400, "invalid", "The query string is not valid UTF-8.")
            if "\x00" in text:
                return error_response(400, "invalid", "The query string contains a NUL byte.")
        return None


# Scripts, styles and images come from this server's static files only; no inline script
# or style, no plugins, no framing, forms post back here. Injected markup cannot run.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
# The pages humans use. The API answers JSON; /api/docs/ (Swagger UI) starts itself with an
# inline script and serves no private data.
_POLICED_PATHS = ("/ui/", "/admin/")


class ContentSecurityPolicyMiddleware:
    """``Content-Security-Policy`` on the web UI and the admin (Django 5.2 has none built in)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.path.startswith(_POLICED_PATHS):
            response.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response


class ReadYourWritesMiddleware:
    """With read replicas (settings add this middleware then): each write request leaves its
    principal's mark, after the view's transactions committed, so that principal's next
    reads come from the primary until a replica holds the write (synapse.replicas). DRF
    sets the authenticated principal on the request it wraps, so agents are marked too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        mark_write(request)
        return response
