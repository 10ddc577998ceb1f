"""Rate limits by scope (write, search, semantic, export, login), per Mind Key or per user.

Counters live in the shared database cache (``CACHES["default"]``), so every gunicorn
worker and every host behind one PostgreSQL sees the same count; a process-local cache
would multiply each limit by the number of processes. A refused request is a 429 in the
one error shape with ``Retry-After`` (DRF's handler sets it from :meth:`wait`).

Which scope a request falls in:

- the view's ``throttle_scope`` attribute (a scope name, or a dict by HTTP method);
- otherwise the login views (simplejwt's token views) are ``login``;
- otherwise any write method (POST, PUT, PATCH, DELETE) is ``write``;
- everything else (reads: recall, list, get) is not rate limited.

A ``search`` request asking for ``mode=semantic`` or ``mode=hybrid`` counts as
``semantic``: it runs the embedding model, which costs far more than a keyword query.
"""

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from minds.authentication import is_agent

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SCOPES = ("write", "search", "semantic", "export", "login")


def request_scope(request, view) -> str | None:
    """The rate-limit scope of this request on this view, or None (not limited)."""
    scope = getattr(view, "throttle_scope", None)
    if isinstance(scope, dict):
        scope = scope.get(request.method)
    if scope is None:
        from rest_framework_simplejwt.views import TokenViewBase

        if isinstance(view, TokenViewBase):
            scope = "login"
        elif request.method in WRITE_METHODS:
            scope = "write"
    if scope == "search" and request.query_params.get("mode") in ("semantic", "hybrid"):
        scope = "semantic"
    return scope


def principal_ident(request, fallback: str) -> str:
    """Whose budget a request spends: the Mind Key's, the user's, or the client address's."""
    principal = getattr(request, "user", None)
    if is_agent(principal):
        return f"key:{principal.key.pk}"
    if principal is not None and getattr(principal, "is_authenticated", False):
        return f"user:{principal.pk}"
    return f"ip:{fallback}"


class ScopeRateThrottle(SimpleRateThrottle):
    """One sliding window per (scope, Mind Key | user | client address).

    Rates are read at request time from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
    (DRF reads them once at import), so settings overrides and env changes apply. The
    window is a read-modify-write of one cache entry: under a burst of concurrent
    requests from one key a few may slip past the limit, never more than the number of
    requests in flight at once.
    """

    cache_format = "throttle:%(scope)s:%(ident)s"

    def __init__(self):
        # The rate is only known per request (it depends on the view); see allow_request.
        pass

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request, view):
        self.scope = request_scope(request, view)
        if self.scope is None:
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        if self.rate is None:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request, view):
        ident = principal_ident(request, self.get_ident(request))
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def wait(self):
        # Never "retry in 0 seconds": a client that obeys it would be refused again.
        seconds = super().wait()
        return None if seconds is None else max(1, int(seconds + 0.999))
