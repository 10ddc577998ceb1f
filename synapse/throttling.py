"""Rate limits by scope, per Mind Key, OAuth connection or user, shared by every process
through PostgreSQL.

The scopes and their defaults: docs/api.md, "Rate limits"; the design: docs/security.md."""

import hashlib
import math
import random

from django.db import connection
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from minds.authentication import is_agent

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SCOPES = ("write", "search", "semantic", "recall", "export", "sync", "import", "login")


def request_scope(request, view) -> str | None:
    """The rate-limit scope of this request on this view, or None (not limited).

    - the view's ``throttle_scope`` attribute (a scope name, or a dict by HTTP method);
    - otherwise the login views (simplejwt's token views) are ``login``;
    - otherwise any write method (POST, PUT, PATCH, DELETE) is ``write``;
    - everything else (reads: recall, list, get) is not rate limited.

    A ``search`` request asking for ``mode=semantic`` or ``mode=hybrid`` counts as
    ``semantic``: it runs the embedding model, which costs far more than a keyword query.
    So does a ``recall`` with ``q=`` (hybrid search) and ``/memory/contradictions`` (which
    embeds up to 1,500 memories again; its view names the scope). A ``recall`` without a
    budget (every memory of the mind) counts as ``recall``; a budgeted one is not limited.
    """
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
    elif scope == "recall":
        if request.query_params.get("q"):
            scope = "semantic"
        elif request.query_params.get("budget"):
            scope = None
    return scope


def principal_ident(request, fallback: str) -> str:
    """Whose budget a request spends: the Mind Key's or OAuth connection's, the user's, or
    the client address's."""
    principal = getattr(request, "user", None)
    if is_agent(principal):
        return principal.bucket
    if principal is not None and getattr(principal, "is_authenticated", False):
        return f"user:{principal.pk}"
    return f"ip:{fallback}"


PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Spending a request: the budget row's theoretical arrival time (tat) moves on by one
# interval, unless that would put it more than a period ahead of now (then: refused).
_SPEND = """
    WITH now AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS t)
    INSERT INTO synapse_ratelimit AS r (key, tat) SELECT %(key)s, now.t + %(interval)s FROM now
    ON CONFLICT (key) DO UPDATE
        SET tat = greatest(r.tat, EXCLUDED.tat - %(interval)s) + %(interval)s
        WHERE greatest(r.tat, EXCLUDED.tat - %(interval)s) + %(interval)s
              - (EXCLUDED.tat - %(interval)s) <= %(period)s
    RETURNING tat
"""
_WAIT = """SELECT tat - extract(epoch FROM clock_timestamp())::float8
           FROM synapse_ratelimit WHERE key = %s"""
# A budget whose tat has passed is the same as no row: rows are swept now and then.
_SWEEP = "DELETE FROM synapse_ratelimit WHERE tat < extract(epoch FROM clock_timestamp()) - 1"
SWEEP_CHANCE = 0.001


def parse_rate(rate: str) -> tuple[int, int]:
    """"600/min" → (600, 60): requests per period in seconds (DRF's notation)."""
    count, period = rate.split("/")
    return int(count), PERIODS[period.strip()[0]]


def spend(key: str, rate: str) -> float | None:
    """Spend one request of budget ``key`` at ``rate``: None when allowed, otherwise the
    seconds until it would be.

    Each budget is one row of the UNLOGGED table ``synapse_ratelimit`` (synapse.models), so
    every gunicorn worker and every host behind one PostgreSQL sees the same count; a
    process-local counter would multiply each limit by the number of processes. The rule is
    GCRA (the generic cell rate algorithm): a rate of N per period lets N requests through
    at once, then one every period/N. Spending is a single atomic statement (``_SPEND``):
    concurrent requests of one key queue on its row, so a burst can never slip past the
    limit, and no WAL is flushed for it. A refused request spends nothing.
    """
    count, period = parse_rate(rate)
    if count <= 0:  # "0/min": the scope is closed
        return float(period)
    interval = period / count
    with connection.cursor() as cursor:
        if random.random() < SWEEP_CHANCE:  # noqa: S311 (not security-relevant)
            cursor.execute(_SWEEP)
        cursor.execute(_SPEND, {"key": key, "interval": interval, "period": period})
        if cursor.fetchone() is not None:
            return None
        cursor.execute(_WAIT, [key])
        row = cursor.fetchone()
    ahead = row[0] if row else 0.0
    return max(0.0, ahead + interval - period)


def wait_for(scope: str, ident: str) -> int | None:
    """Spend one request of budget ``scope:ident`` at the scope's configured rate (read at
    request time from ``DEFAULT_THROTTLE_RATES``): None when allowed, or when the scope has
    no rate; otherwise the whole seconds until it would be — at least 1, never "retry in 0
    seconds", which a client that obeys would be refused again. The one place for the
    throttles below and for the views that limit outside DRF (OAuth, password reset)."""
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    if rate is None:
        return None
    seconds = spend(f"{scope}:{ident}"[:200], rate)
    return None if seconds is None else max(1, math.ceil(seconds))


class RateThrottle(BaseThrottle):
    """A throttle spending from one budget per request; subclasses name scope and ident.

    Rates are read at request time from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
    (DRF reads them once at import), so settings overrides and env changes apply."""

    def budget(self, request, view) -> tuple[str | None, str]:
        """(scope, ident) of this request; scope None means not limited."""
        raise NotImplementedError

    def allow_request(self, request, view) -> bool:
        scope, ident = self.budget(request, view)
        self.seconds = wait_for(scope, ident) if scope else None
        return self.seconds is None

    def wait(self) -> int:
        # DRF's handler sets Retry-After from this; the 429 is in the one error shape.
        return self.seconds


class ScopeRateThrottle(RateThrottle):
    """One budget per (scope, Mind Key | user | client address)."""

    def budget(self, request, view):
        return (request_scope(request, view),
                principal_ident(request, self.get_ident(request)))


class LoginAttemptThrottle(RateThrottle):
    """Password attempts on one username from one client address (scope ``login_username``).

    On top of the per-address ``login`` scope: guessing one account's password is slowed
    without letting one busy address lock everybody else out. The username is hashed into
    the budget's key, so the table never holds account names."""

    def budget(self, request, view):
        username = request.data.get("username") if isinstance(request.data, dict) else None
        digest = hashlib.sha256(str(username or "").strip().lower().encode()).hexdigest()
        return "login_username", f"{self.get_ident(request)}:{digest[:32]}"
