"""ASGI entry point: ``/mcp`` (MCP over streamable HTTP; a Mind Key or an OAuth access token
required) beside Django."""

import asyncio
import logging
import os
import time
from contextlib import asynccontextmanager
from urllib.parse import parse_qs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapse.settings")

from synapse.wsgi import application as wsgi_application  # noqa: E402  (sets Django up)

# isort: split
import httpx  # noqa: E402
from a2wsgi import WSGIMiddleware  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import DatabaseError, close_old_connections  # noqa: E402
from django.http import HttpRequest  # noqa: E402
from django.http.request import split_domain_port, validate_host  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402
from rest_framework.exceptions import AuthenticationFailed  # noqa: E402
from rest_framework.request import Request  # noqa: E402
from starlette.datastructures import Headers  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402

from minds.authentication import AgentAuthentication, www_authenticate  # noqa: E402
from minds.oauth import MCP_RESOURCE_METADATA_PATH  # noqa: E402
from synapse import metrics  # noqa: E402
from synapse.api import error_body  # noqa: E402
from synapse.provenance import (  # noqa: E402
    AGENT_HEADER,
    DEVICE_HEADER,
    INSTANCE_HEADER,
    InvalidProvenance,
    provenance_from_headers,
)
from synapse_client.rest import SynapseClient  # noqa: E402
from synapse_client.tools import build_server  # noqa: E402

MCP_PATH = "/mcp"
PROVENANCE_HEADERS = (AGENT_HEADER.lower(), INSTANCE_HEADER.lower(), DEVICE_HEADER.lower())
access_log = logging.getLogger("synapse.access")
logger = logging.getLogger("synapse.mcp")

# Django runs as its WSGI application on a fixed pool of threads (a2wsgi): each thread keeps
# its database connection as under gunicorn's gthread workers, whereas Django's own ASGI
# handler starts a thread per request, under which persistent connections must be turned
# off (Django docs, "Persistent connections").
django_app = WSGIMiddleware(wsgi_application,
                            workers=int(os.environ.get("SYNAPSE_THREADS", "4")))


def _bearer_key(headers: Headers) -> str | None:
    """The credential presented: ``Authorization: Bearer mk_…`` (a Mind Key) or
    ``Authorization: Bearer <OAuth access token>``."""
    parts = headers.get("authorization", "").split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1]
    return None


class _ScopeRequest(HttpRequest):
    """A Django request standing for an ASGI one, for authentication: its Host, scheme
    and the headers that matter (the public origin, the agent instance)."""

    FORWARDED = ("authorization", "x-forwarded-proto", "x-forwarded-for",
                 INSTANCE_HEADER.lower())

    def __init__(self, scope, headers: Headers):
        super().__init__()
        self._scheme = scope.get("scheme", "http")
        self.method = "POST"
        self.META["HTTP_HOST"] = headers.get("host", "")
        for name in self.FORWARDED:
            if name in headers:
                self.META["HTTP_" + name.upper().replace("-", "_")] = headers[name]

    def _get_scheme(self) -> str:
        return self._scheme


def _key_problem(request: HttpRequest, query_string: bytes = b"") -> tuple[int, str, str] | None:
    """Django's own agent authentication (a Mind Key or an OAuth access token); (status,
    code, message) when it refuses."""
    if "key" in parse_qs(query_string.decode("latin-1")):
        # Every MCP message is a POST that may change memories: a key in the URL would land
        # in proxy logs and history (REST takes ?key= on reads only).
        return (401, "authentication_failed",
                "/mcp does not accept a Mind Key in the query string (?key=): send it as "
                "Authorization: Bearer mk_….")
    missing = (401, "not_authenticated",
               "A Mind Key (Authorization: Bearer mk_…, a key of the mind the agent works "
               "on) or an OAuth access token is required.")
    if not request.META.get("HTTP_AUTHORIZATION"):
        return missing
    # Run as one request would: stale connections are dropped before and after.
    close_old_connections()
    try:
        if AgentAuthentication().authenticate(Request(request)) is None:
            return missing  # a human's JWT: /mcp is for agents
    except AuthenticationFailed as error:
        return 401, "authentication_failed", str(error.detail)
    except DatabaseError:
        logger.exception("database unavailable while checking a Mind Key or token")
        return 503, "unavailable", "The database is unavailable; try again shortly."
    finally:
        close_old_connections()
    return None


def _refusal(status: int, code: str, message: str, challenge: str = 'Bearer realm="synapse"'
             ) -> JSONResponse:
    headers = {"Cache-Control": "no-store"}
    if status == 401:
        headers["WWW-Authenticate"] = challenge
    if status == 503:
        headers["Retry-After"] = "5"
    return JSONResponse(error_body(status, code, message), status_code=status, headers=headers)


def _challenge(request: HttpRequest, code: str) -> str:
    """RFC 9728 §5.1: where an OAuth client finds how to get a token for /mcp; with
    ``error="invalid_token"`` when a credential was presented and refused (RFC 6750)."""
    if code == "authentication_failed":
        return www_authenticate(request, MCP_RESOURCE_METADATA_PATH, error="invalid_token")
    return www_authenticate(request, MCP_RESOURCE_METADATA_PATH)


@asynccontextmanager
async def client_for_call(ctx):
    """A REST client for one tool call: the caller's credential (Mind Key or OAuth access
    token), host and address, in-process.

    The MCP tools (synapse_client.tools, the same set ``synapse-mcp`` serves over stdio)
    reach the REST API through ``httpx.ASGITransport`` with the caller's own credential,
    so ``/mcp`` obeys exactly the REST rules: its mind, scope, paths, rate limits and audit.
    """
    request = ctx.request_context.request
    headers = request.headers
    key = _bearer_key(headers) or ""
    # The agent's provenance claims go with each call, so what a tool writes records them
    # as a REST write with these headers would (mcp_endpoint has checked them); as the
    # bytes received: a UTF-8 device name is not ASCII.
    forwarded = {name: headers[name] for name in ("x-forwarded-proto", "x-forwarded-for")
                 if name in headers}
    forwarded.update({name: headers[name].encode("latin-1") for name in PROVENANCE_HEADERS
                      if name in headers})
    client_address = request.scope.get("client") or ("127.0.0.1", 0)
    transport = httpx.ASGITransport(app=django_app, client=tuple(client_address))
    url = f"{request.scope.get('scheme', 'http')}://{headers.get('host', 'localhost')}"
    async with SynapseClient(url, key, transport=transport, headers=forwarded) as client:
        yield client


mcp_server = build_server(client_for_call)
# Stateless (one JSON answer per POST, no server-side session), so any worker of any
# process can answer any request.
mcp_app = mcp_server.streamable_http_app(
    streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
    max_request_body_size=settings.MAX_BODY_BYTES,
    # Host is checked below against ALLOWED_HOSTS, like every Django route; a browser
    # page cannot present the Bearer key, so Origin checks add nothing here.
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))


async def mcp_endpoint(scope, receive, send) -> None:
    """Refuse a bad Host or a missing/wrong credential before any MCP message is read."""
    headers = Headers(scope=scope)
    domain, _port = split_domain_port(headers.get("host", ""))
    allowed = settings.ALLOWED_HOSTS or (["localhost", "127.0.0.1", "[::1]"]
                                         if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        await _refusal(400, "invalid", "Invalid Host header.")(scope, receive, send)
        return
    try:
        provenance_from_headers(headers)
    except InvalidProvenance as error:
        # As a REST write would answer it, before any MCP message is read.
        await JSONResponse(
            error_body(400, "invalid", f"{error.header}: {error.message}",
                       {error.header: [error.message]}),
            status_code=400, headers={"Cache-Control": "no-store"})(scope, receive, send)
        return
    request = _ScopeRequest(scope, headers)
    loop = asyncio.get_running_loop()
    # Django's threads (each keeps its database connection) run the check.
    problem = await loop.run_in_executor(django_app.executor, _key_problem, request,
                                         scope.get("query_string", b""))
    if problem is not None:
        await _refusal(*problem, challenge=_challenge(request, problem[1]))(
            scope, receive, send)
        return
    await mcp_app(dict(scope, path=MCP_PATH), receive, send)


async def application(scope, receive, send) -> None:
    """Route ``/mcp`` to the MCP app and everything else to Django; log each request."""
    if scope["type"] == "lifespan":
        # Starts and stops the MCP session manager; Django needs no lifespan.
        await mcp_app(scope, receive, send)
        return
    if scope["type"] != "http":
        await django_app(scope, receive, send)
        return
    started = time.perf_counter()
    status, size = None, 0

    async def logged_send(message) -> None:
        nonlocal status, size
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            size += len(message.get("body", b""))
        await send(message)

    is_mcp, failed = scope["path"] in (MCP_PATH, MCP_PATH + "/"), False
    try:
        if is_mcp:
            await mcp_endpoint(scope, receive, logged_send)
        else:
            await django_app(scope, receive, logged_send)
    except Exception:
        failed = True  # the server answers it with a 500
        raise
    finally:
        if is_mcp and settings.METRICS_TOKEN and (status or failed):
            # Django's routes are counted by synapse.middleware.MetricsMiddleware; /mcp
            # bypasses Django (its tools' REST calls pass through it and count as well). A
            # client gone before any answer is not counted.
            metrics.observe_request(MCP_PATH, scope["method"], status or 500,
                                    time.perf_counter() - started)
        # The path only: query strings may carry ?key=mk_… or private search text.
        client = (scope.get("client") or ("-",))[0]
        access_log.info('%s "%s %s" %s %s %dms', client, scope["method"], scope["path"],
                        status or "-", size, (time.perf_counter() - started) * 1000)
