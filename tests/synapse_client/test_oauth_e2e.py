"""Issue 15, "Done when": the official MCP Python SDK's OAuth client (mcp.client.auth)
against a live server. Discovery from the 401, dynamic registration, authorization with
PKCE through the real consent page in headless Chromium (alice signs in, picks her mind and
the access), token exchange, then ``remember`` and ``recall`` over /mcp. Then a read-only
connection is refused ``remember``; a revoked connection gets 401; and a token for another
resource, an expired token, a code replayed, a wrong PKCE verifier, plain PKCE and a
redirect URI never registered are each refused."""

import base64
import hashlib
import re
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx
import httpx2
import pytest
from django.utils import timezone
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from oauth2_provider.models import AccessToken

from memories.models import AuditEvent, Memory
from minds.models import OAuthConnection
from minds.services import connection_revoke
from tests.conftest import PASSWORD
from tests.synapse_client.conftest import text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
REDIRECT_URI = "http://127.0.0.1:45873/callback"
INSTANCE = "e2e-laptop-01"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"}}}


@pytest.fixture(autouse=True)
def _generous_sign_in(settings):
    """Each authorization signs in again from one address."""
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login": "1000/min", "login_username": "1000/min"}}


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def consent_in_chromium(authorize_url: str, mind_name: str, access_label: str) -> str:
    """A human in a real browser: open the authorization URL, sign in as alice, pick the
    mind and the access, Allow. Returns the URL the browser was sent back to.

    Runs in a thread of its own (Playwright's sync API keeps an event loop there); the
    redirect to the client's loopback address is caught, as the client's listener would."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make system-deps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            sent_back: list[str] = []

            def callback(route):
                sent_back.append(route.request.url)
                route.fulfill(status=200, body="You may close this window.")

            page.route(re.compile(re.escape(REDIRECT_URI) + r".*"), callback)
            page.goto(authorize_url)
            # Not signed in: the sign-in page first, which comes back to the consent page.
            page.get_by_label("Username").fill("alice")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(re.compile(r".*/oauth/authorize\?.*"))
            assert page.get_by_test_id("client-name").inner_text() == "E2E Host"
            assert page.get_by_test_id("redirect-host").inner_text() == "127.0.0.1"
            page.get_by_label(mind_name).check()
            page.get_by_label(access_label).check()
            page.get_by_role("button", name="Allow").click()
            deadline = 150
            while not sent_back and deadline:
                page.wait_for_timeout(100)
                deadline -= 1
            assert sent_back, "the browser was never sent back to the client"
            return sent_back[0]
        finally:
            browser.close()


def provider(server: str, storage: MemoryStorage, mind_name: str, access_label: str,
             seen: dict) -> OAuthClientProvider:
    async def redirect_handler(authorize_url: str) -> None:
        seen["authorize_url"] = authorize_url
        seen["callback_url"] = await anyio.to_thread.run_sync(
            consent_in_chromium, authorize_url, mind_name, access_label)

    async def callback_handler() -> AuthorizationCodeResult:
        query = {name: values[0] for name, values in
                 parse_qs(urlsplit(seen["callback_url"]).query).items()}
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"),
                                       iss=query.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="E2E Host", redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method="none")
    return OAuthClientProvider(server_url=f"{server}/mcp", client_metadata=metadata,
                               storage=storage, redirect_handler=redirect_handler,
                               callback_handler=callback_handler)


async def mcp_calls(server: str, auth: OAuthClientProvider, calls: list[tuple[str, dict]]):
    """Open an MCP session with the OAuth client and run the tool calls; their results."""
    async with (
        httpx2.AsyncClient(auth=auth, timeout=60,
                           headers={"X-Synapse-Agent-Instance": INSTANCE}) as http,
        streamable_http_client(f"{server}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [await session.call_tool(name, arguments) for name, arguments in calls]


def mcp_status(server: str, token: str) -> httpx.Response:
    return httpx.post(f"{server}/mcp", json=INITIALIZE,
                      headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})


def test_an_mcp_host_connects_with_oauth_and_a_human_approves_it(
        synapse_server, alice, alice_mind, received):
    storage, seen = MemoryStorage(), {}
    auth = provider(synapse_server, storage, alice_mind.name, "Read and write", seen)
    stored, recalled = anyio.run(mcp_calls, synapse_server, auth, [
        ("remember", {"category": "fact", "key": "oauth_city",
                      "content": "Alice moved to Lisbon"}),
        ("recall", {"query": "Lisbon"}),
    ])
    assert not stored.is_error, text_of(stored)
    assert not recalled.is_error and "Alice moved to Lisbon" in text_of(recalled)

    # Discovery began at the 401 and its resource_metadata; then RFC 8414; registration.
    paths = [path for _method, path, _headers in received.requests]
    assert paths[:4] == ["/mcp", "/.well-known/oauth-protected-resource/mcp",
                         "/.well-known/oauth-authorization-server", "/oauth/register"]
    assert "/oauth/token" in paths
    authorize = parse_qs(urlsplit(seen["authorize_url"]).query)
    assert authorize["code_challenge_method"] == ["S256"]
    assert authorize["resource"] == [synapse_server]
    assert authorize["scope"] == ["memory:read memory:write"]
    assert parse_qs(urlsplit(seen["callback_url"]).query)["iss"] == [synapse_server]

    # The connection is what alice approved; the memory was written by it, as an agent.
    connection = OAuthConnection.objects.get(mind=alice_mind)
    assert connection.scopes == ["memory:read", "memory:write"]
    assert connection.resource == synapse_server
    assert connection.approved_by == alice and connection.client_name == "E2E Host"
    assert connection.last_used_at is not None and connection.instance_ids == [INSTANCE]
    memory = Memory.objects.get(mind=alice_mind, key="oauth_city")
    assert (memory.source, memory.verified) == ("agent", False)
    version = memory.versions.get()
    assert (version.recorded_by_type, version.recorded_by_id, version.recorded_by) == (
        "connection", connection.id, "connection E2E Host")
    assert AuditEvent.objects.filter(mind=alice_mind, action="connection_create").exists()

    # The same token is a bearer on the REST API of this server.
    token = storage.tokens.access_token
    api = httpx.get(f"{synapse_server}/memory/recall",
                    headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 200 and "Alice moved to Lisbon" in api.text

    # Revoked: the very next MCP call is a 401 naming the metadata again.
    assert mcp_status(synapse_server, token).status_code == 200
    connection_revoke(connection=connection, actor=alice)
    refused = mcp_status(synapse_server, token)
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "This OAuth connection has been revoked."
    assert refused.headers["WWW-Authenticate"] == (
        f'Bearer realm="synapse", resource_metadata="{synapse_server}/.well-known/'
        'oauth-protected-resource/mcp", error="invalid_token"')
    # And its refresh token is gone with it.
    refreshed = httpx.post(f"{synapse_server}/oauth/token", data={
        "grant_type": "refresh_token", "refresh_token": storage.tokens.refresh_token,
        "client_id": storage.client_info.client_id})
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"


def test_a_read_only_connection_is_refused_remember(synapse_server, alice_mind, remember):
    remember(category="fact", key="known", content="Alice reads a lot")
    storage, seen = MemoryStorage(), {}
    auth = provider(synapse_server, storage, alice_mind.name, "Read only", seen)
    stored, recalled = anyio.run(mcp_calls, synapse_server, auth, [
        ("remember", {"category": "fact", "content": "Should never be stored"}),
        ("recall", {}),
    ])
    assert stored.is_error and "This OAuth connection is read-only" in text_of(stored)
    assert not recalled.is_error and "Alice reads a lot" in text_of(recalled)
    assert not Memory.objects.filter(content="Should never be stored").exists()
    assert OAuthConnection.objects.get(mind=alice_mind).scopes == ["memory:read"]
    # On the REST API: 403 insufficient_scope with its RFC 6750 challenge.
    write = httpx.post(f"{synapse_server}/memory", json={"category": "fact", "content": "x"},
                       headers={"Authorization": f"Bearer {storage.tokens.access_token}"})
    assert write.status_code == 403
    assert write.json()["error"]["code"] == "insufficient_scope"
    assert 'error="insufficient_scope", scope="memory:write"' in write.headers[
        "WWW-Authenticate"]


# -- Refusals, over plain HTTP against the live server ----------------------------------------


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


class Human:
    """alice in a plain HTTP client with a session: signs in, approves on the consent page."""

    def __init__(self, server: str):
        self.server = server
        self.http = httpx.Client(base_url=server, follow_redirects=False, timeout=30)
        self.http.get("/ui/login")
        signed_in = self.http.post("/ui/login", data={
            "username": "alice", "password": PASSWORD,
            "csrfmiddlewaretoken": self.http.cookies["csrftoken"]},
            headers={"Referer": f"{server}/ui/login"})
        assert signed_in.status_code == 302

    def authorize(self, params: dict) -> httpx.Response:
        return self.http.get("/oauth/authorize?" + urlencode(params))

    def approve(self, params: dict, mind_id: str) -> dict:
        """The query the client is sent back with (code, state, iss, or error)."""
        page = self.authorize(params)
        assert page.status_code == 200, page.text
        hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"',
                                 page.text))
        answer = self.http.post("/oauth/authorize?" + urlencode(params), data={
            **{name: value.replace("&amp;", "&") for name, value in hidden.items()},
            "allow": "Authorize", "mind": mind_id, "access": "memory:write", "paths": ""},
            headers={"Referer": f"{self.server}/oauth/authorize"})
        assert answer.status_code == 302, answer.text
        return {name: values[0] for name, values in
                parse_qs(urlsplit(answer.headers["Location"]).query).items()}


def register(server: str) -> str:
    response = httpx.post(f"{server}/oauth/register", json={
        "client_name": "E2E Host", "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none"})
    assert response.status_code == 201, response.text
    return response.json()["client_id"]


def params_for(server: str, client_id: str, challenge: str, **extra) -> dict:
    return {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
            "state": "xyz", "code_challenge": challenge, "code_challenge_method": "S256",
            "scope": "memory:read memory:write", "resource": server, **extra}


def exchange(server: str, client_id: str, code: str, verifier: str, **extra):
    return httpx.post(f"{server}/oauth/token", data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "client_id": client_id, "code_verifier": verifier, "resource": server, **extra})


def test_what_the_authorization_server_refuses(synapse_server, alice_mind):
    human, client_id = Human(synapse_server), register(synapse_server)

    # A code is good once: replayed, it is refused (RFC 6749 §4.1.2).
    verifier, challenge = pkce()
    code = human.approve(params_for(synapse_server, client_id, challenge), alice_mind.id)["code"]
    first = exchange(synapse_server, client_id, code, verifier)
    assert first.status_code == 200, first.text
    assert first.json()["expires_in"] == 3600 and first.json()["refresh_token"]
    again = exchange(synapse_server, client_id, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

    # A wrong PKCE verifier.
    _verifier, challenge = pkce()
    code = human.approve(params_for(synapse_server, client_id, challenge), alice_mind.id)["code"]
    wrong = exchange(synapse_server, client_id, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"

    # A redirect URI never registered: an error page here, never a redirect there.
    _verifier, challenge = pkce()
    elsewhere = human.authorize(params_for(synapse_server, client_id, challenge,
                                           redirect_uri="https://attacker.example/cb"))
    assert elsewhere.status_code == 400 and "location" not in elsewhere.headers
    # …nor at the token endpoint, for a code issued to the registered one.
    verifier, challenge = pkce()
    code = human.approve(params_for(synapse_server, client_id, challenge), alice_mind.id)["code"]
    moved = exchange(synapse_server, client_id, code, verifier,
                     redirect_uri="http://127.0.0.1:45873/other")
    assert moved.status_code == 400 and moved.json()["error"] in ("invalid_grant",
                                                                  "invalid_request")

    # A resource other than this server: sent back with invalid_target, no code.
    _verifier, challenge = pkce()
    other = human.authorize(params_for(synapse_server, client_id, challenge,
                                       resource="https://other.example"))
    assert other.status_code == 302
    sent_back = parse_qs(urlsplit(other.headers["Location"]).query)
    assert sent_back["error"] == ["invalid_target"] and "code" not in sent_back

    # PKCE "plain" (and no PKCE at all) is refused.
    plain = human.authorize(params_for(synapse_server, client_id, "x" * 43,
                                       code_challenge_method="plain"))
    assert plain.status_code == 302
    assert parse_qs(urlsplit(plain.headers["Location"]).query)["error"] == ["invalid_request"]
    bare = {name: value for name, value in params_for(synapse_server, client_id, "").items()
            if not name.startswith("code_challenge")}
    missing = human.authorize(bare)
    assert "code=" not in missing.headers.get("location", "")


def test_tokens_for_another_resource_or_expired_are_refused(synapse_server, alice_mind):
    human, client_id = Human(synapse_server), register(synapse_server)
    tokens = []
    for _ in range(2):
        verifier, challenge = pkce()
        code = human.approve(params_for(synapse_server, client_id, challenge),
                             alice_mind.id)["code"]
        tokens.append(exchange(synapse_server, client_id, code, verifier).json())
    other_resource, expired = (token["access_token"] for token in tokens)
    assert mcp_status(synapse_server, other_resource).status_code == 200

    # A token bound to another server's origin (a renamed host, another deployment).
    OAuthConnection.objects.filter(access_token__token_checksum=hashlib.sha256(
        other_resource.encode()).hexdigest()).update(resource="https://other.example")
    refused = mcp_status(synapse_server, other_resource)
    assert refused.status_code == 401
    assert "issued for another resource" in refused.json()["error"]["message"]
    api = httpx.get(f"{synapse_server}/memory/recall",
                    headers={"Authorization": f"Bearer {other_resource}"})
    assert api.status_code == 401

    # An expired access token; refreshing it (rotation) gives a new one that works.
    AccessToken.objects.filter(token_checksum=hashlib.sha256(expired.encode()).hexdigest()
                               ).update(expires=timezone.now() - timedelta(seconds=1))
    refused = mcp_status(synapse_server, expired)
    assert refused.status_code == 401 and "expired" in refused.json()["error"]["message"]
    refreshed = httpx.post(f"{synapse_server}/oauth/token", data={
        "grant_type": "refresh_token", "refresh_token": tokens[1]["refresh_token"],
        "client_id": client_id})
    assert refreshed.status_code == 200, refreshed.text
    rotated = refreshed.json()
    assert rotated["refresh_token"] != tokens[1]["refresh_token"]
    assert mcp_status(synapse_server, rotated["access_token"]).status_code == 200
    # The old refresh token is spent; used again, it ends the whole family (RFC 9700).
    replay = httpx.post(f"{synapse_server}/oauth/token", data={
        "grant_type": "refresh_token", "refresh_token": tokens[1]["refresh_token"],
        "client_id": client_id})
    assert replay.status_code == 400
    assert mcp_status(synapse_server, rotated["access_token"]).status_code == 401
