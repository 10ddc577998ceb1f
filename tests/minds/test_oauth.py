"""OAuth 2.1 for MCP hosts through Django's test client: the metadata documents, client
registration, the consent page, the token endpoint, and what an OAuth token may do on the
REST API (exactly what a Mind Key of the same scope and paths may). The live flow with the
MCP SDK: tests/synapse_client/test_oauth_e2e.py."""

import io
import json
from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from memories.models import AuditEvent, Memory
from minds.models import OAuthConnection
from minds.oauth import token_checksum
from minds.services import mind_create
from tests.conftest import PASSWORD, key_client, make_user, session_client
from tests.minds.oauth_flow import (
    ORIGIN,
    REDIRECT_URI,
    approve,
    authorize_params,
    connect,
    exchange,
    pkce_pair,
    register,
)

pytestmark = pytest.mark.django_db


def connection_of(tokens: dict) -> OAuthConnection:
    return OAuthConnection.objects.get(
        access_token__token_checksum=token_checksum(tokens["access_token"]))


# -- Metadata documents ---------------------------------------------------------------------

RESOURCE_METADATA = {
    "resource": ORIGIN,
    "authorization_servers": [ORIGIN],
    "scopes_supported": ["memory:read", "memory:write"],
    "bearer_methods_supported": ["header"],
    "resource_name": "Synapse",
}


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource",
                                  "/.well-known/oauth-protected-resource/mcp"])
def test_protected_resource_metadata(client, path):
    response = client.get(path)
    assert response.status_code == 200
    assert response.json() == RESOURCE_METADATA
    assert response["Access-Control-Allow-Origin"] == "*"


def test_metadata_documents_answer_a_cors_preflight_and_only_reads(client):
    preflight = client.options("/.well-known/oauth-authorization-server")
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Origin"] == "*"
    assert "MCP-Protocol-Version" in preflight["Access-Control-Allow-Headers"]
    refused = client.post("/.well-known/oauth-protected-resource")
    assert refused.status_code == 405
    assert refused.json()["error"]["code"] == "method_not_allowed"


def test_authorization_server_metadata(client):
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    assert response.json() == {
        "issuer": ORIGIN,
        "authorization_endpoint": f"{ORIGIN}/oauth/authorize",
        "token_endpoint": f"{ORIGIN}/oauth/token",
        "registration_endpoint": f"{ORIGIN}/oauth/register",
        "revocation_endpoint": f"{ORIGIN}/oauth/revoke",
        "scopes_supported": ["memory:read", "memory:write"],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic",
                                                  "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic",
                                                       "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        # Never advertised: the server would fetch URLs the clients name (docs/security.md).
        "client_id_metadata_document_supported": False,
    }


def test_metadata_names_the_public_url_when_one_is_set(client, settings):
    settings.PUBLIC_URL = "https://synapse.example.com"
    resource = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert resource["resource"] == "https://synapse.example.com"
    assert resource["authorization_servers"] == ["https://synapse.example.com"]
    server = client.get("/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == "https://synapse.example.com"
    assert server["token_endpoint"] == "https://synapse.example.com/oauth/token"


# -- Client registration (RFC 7591) ----------------------------------------------------------


def test_a_public_client_registers_without_a_secret():
    response = register(client_name="Claude", scope="memory:read memory:write",
                        redirect_uris=["http://localhost:33418/cb", "https://claude.ai/cb"])
    assert response.status_code == 201
    body = response.json()
    assert body["client_name"] == "Claude" and body["client_id"]
    assert body["redirect_uris"] == ["http://localhost:33418/cb", "https://claude.ai/cb"]
    assert body["token_endpoint_auth_method"] == "none"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["response_types"] == ["code"] and "client_secret" not in body
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == Application.CLIENT_PUBLIC
    assert application.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE


def test_a_confidential_client_gets_its_secret_once_and_only_a_hash_is_kept():
    response = register(token_endpoint_auth_method="client_secret_basic")
    body = response.json()
    assert response.status_code == 201 and len(body["client_secret"]) == 64
    assert body["client_secret_expires_at"] == 0
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == Application.CLIENT_CONFIDENTIAL
    assert body["client_secret"] not in application.client_secret


@pytest.mark.parametrize("metadata, code, field", [
    ({"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri", "redirect_uris"),
    ({"redirect_uris": ["cursor://anysphere/cb"]}, "invalid_redirect_uri", "redirect_uris"),
    ({"redirect_uris": ["https://example.com/cb#frag"]}, "invalid_redirect_uri",
     "redirect_uris"),
    ({"redirect_uris": ["https://user:pw@example.com/cb"]}, "invalid_redirect_uri",
     "redirect_uris"),
    ({"redirect_uris": []}, "invalid_redirect_uri", "redirect_uris"),
    ({"redirect_uris": "https://example.com/cb"}, "invalid_redirect_uri", "redirect_uris"),
    ({"redirect_uris": [f"https://example.com/{n}" for n in range(11)]},
     "invalid_redirect_uri", "redirect_uris"),
    ({"client_name": "x" * 101}, "invalid_client_metadata", "client_name"),
    ({"client_name": "two\nlines"}, "invalid_client_metadata", "client_name"),
    ({"client_name": 7}, "invalid_client_metadata", "client_name"),
    ({"grant_types": ["implicit"]}, "invalid_client_metadata", "grant_types"),
    ({"grant_types": ["authorization_code", "password"]}, "invalid_client_metadata",
     "grant_types"),
    ({"grant_types": ["client_credentials"]}, "invalid_client_metadata", "grant_types"),
    ({"grant_types": ["refresh_token"]}, "invalid_client_metadata", "grant_types"),
    ({"response_types": ["token"]}, "invalid_client_metadata", "response_types"),
    ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata",
     "token_endpoint_auth_method"),
    ({"scope": "memory:read admin"}, "invalid_client_metadata", "scope"),
])
def test_registration_refusals(metadata, code, field):
    before = Application.objects.count()
    response = register(**metadata)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (400, code)
    assert list(error["fields"]) == [field]
    assert Application.objects.count() == before


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b""])
def test_registration_needs_a_json_object(body):
    response = Client().post("/oauth/register", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_client_metadata"


def test_registration_is_a_post():
    response = Client().get("/oauth/register")
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_registration_is_rate_limited_per_address(settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "oauth_register": "2/hour"}}
    assert [register().status_code for _ in range(2)] == [201, 201]
    refused = register()
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["code"] == "throttled"


# -- The consent page ---------------------------------------------------------------------


def consent_url(client_id: str, **extra) -> str:
    return "/oauth/authorize?" + urlencode(authorize_params(client_id, pkce_pair()[1], **extra))


def test_the_consent_page_needs_a_signed_in_human(alice_mind):
    url = consent_url(register().json()["client_id"])
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/ui/login?next=/oauth/authorize")


def test_the_consent_page_shows_the_client_and_offers_only_the_humans_minds(
        owner, alice, alice_mind, bob_mind):
    other = mind_create(owner=alice, name="Alice's Work")
    page = owner.get(consent_url(register(client_name="VS Code").json()["client_id"]))
    assert page.status_code == 200
    assert page.context["client_name"] == "VS Code"
    assert page.context["redirect_host"] == "127.0.0.1"
    assert sorted(page.context["form"].fields["mind"].choices) == sorted(
        [(alice_mind.id, alice_mind.name), (other.id, other.name)])
    assert bob_mind.name not in page.content.decode()


def test_another_humans_mind_cannot_be_picked(owner, alice_mind, bob_mind):
    client_id = register().json()["client_id"]
    verifier, challenge = pkce_pair()
    params = authorize_params(client_id, challenge)
    page = owner.get("/oauth/authorize?" + urlencode(params))
    form = {name: value for name, value in page.context["form"].initial.items()
            if value is not None}
    answer = owner.post("/oauth/authorize?" + urlencode(params), {
        **form, "allow": "Authorize", "mind": bob_mind.id, "access": "memory:write"})
    assert answer.status_code == 400
    assert not OAuthConnection.objects.exists()


def test_the_consent_form_is_csrf_protected(alice, alice_mind):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    client_id = register().json()["client_id"]
    answer = browser.post(consent_url(client_id), {"allow": "Authorize", "mind": alice_mind.id,
                                                   "access": "memory:write"})
    assert answer.status_code == 403
    assert not OAuthConnection.objects.exists()


def test_denying_sends_the_client_back_with_access_denied(owner, alice_mind):
    client_id = register().json()["client_id"]
    verifier, challenge = pkce_pair()
    params = authorize_params(client_id, challenge)
    page = owner.get("/oauth/authorize?" + urlencode(params))
    form = {name: value for name, value in page.context["form"].initial.items()
            if value is not None}
    answer = owner.post("/oauth/authorize?" + urlencode(params), {
        **form, "mind": alice_mind.id, "access": "memory:write"})
    assert answer.status_code == 302
    query = parse_qs(urlsplit(answer["Location"]).query)
    assert answer["Location"].startswith(REDIRECT_URI)
    assert query["error"] == ["access_denied"] and query["iss"] == [ORIGIN]
    assert not OAuthConnection.objects.exists()


def test_writing_is_not_offered_when_the_client_asked_to_read(owner, alice_mind):
    client_id = register().json()["client_id"]
    page = owner.get(consent_url(client_id, scope="memory:read"))
    assert [value for value, _label in page.context["form"].fields["access"].choices] == [
        "memory:read"]


def test_a_human_without_minds_is_told_to_create_one(db):
    lonely = session_client(make_user("carol"))
    page = lonely.get(consent_url(register().json()["client_id"]))
    assert page.status_code == 200 and "You have no mind yet" in page.content.decode()


def test_paths_are_normalised_like_a_keys_and_bad_ones_refused(owner, alice_mind):
    client_id = register().json()["client_id"]
    authorization = approve(owner, client_id, alice_mind, paths="Projects/Memory-OS/, notes")
    assert authorization.code
    connection = OAuthConnection.objects.get()
    assert connection.paths == ["projects/memory-os", "notes"]
    verifier, challenge = pkce_pair()
    params = authorize_params(client_id, challenge)
    page = owner.get("/oauth/authorize?" + urlencode(params))
    form = {name: value for name, value in page.context["form"].initial.items()
            if value is not None}
    refused = owner.post("/oauth/authorize?" + urlencode(params), {
        **form, "allow": "Authorize", "mind": alice_mind.id, "access": "memory:read",
        "paths": "../etc"})
    assert refused.status_code == 400 and OAuthConnection.objects.count() == 1


def test_a_code_comes_back_with_state_and_issuer_and_is_tied_to_its_connection(
        owner, alice, alice_mind):
    client_id = register().json()["client_id"]
    authorization = approve(owner, client_id, alice_mind)
    assert authorization.query["state"] == "st4te"
    assert authorization.query["iss"] == ORIGIN
    connection = OAuthConnection.objects.get()
    assert connection.grant.code == authorization.code
    assert (connection.mind, connection.approved_by, connection.resource) == (
        alice_mind, alice, ORIGIN)
    event = AuditEvent.objects.get(mind=alice_mind, action="connection_create")
    assert event.details["connection_id"] == connection.id
    assert event.actor_label == "alice"


def test_the_token_response_and_rotation_follow_the_connection(owner, alice_mind):
    client_id = register().json()["client_id"]
    tokens = exchange(approve(owner, client_id, alice_mind, access="memory:read")).json()
    assert tokens["scope"] == "memory:read" and tokens["expires_in"] == 3600
    assert tokens["token_type"] == "Bearer"
    connection = connection_of(tokens)
    assert connection.grant is None
    refreshed = Client().post("/oauth/token", urlencode({
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
        "client_id": client_id}), content_type="application/x-www-form-urlencoded").json()
    assert connection_of(refreshed) == connection
    assert not AccessToken.objects.filter(
        token_checksum=token_checksum(tokens["access_token"])).exists()
    assert key_client(refreshed["access_token"]).get("/memory/recall").status_code == 200
    assert key_client(tokens["access_token"]).get("/memory/recall").status_code == 401


def test_tokens_are_stored_hashed(owner, alice_mind):
    tokens = connect(owner, alice_mind)
    stored = AccessToken.objects.get(token_checksum=token_checksum(tokens["access_token"]))
    assert tokens["access_token"] not in json.dumps(
        list(AccessToken.objects.values_list("token", flat=True)))
    assert stored.resource == [ORIGIN]


# -- An OAuth token on the REST API: a Mind Key's powers, never a human's --------------------


def test_a_read_only_token_reads_and_is_refused_writes_with_insufficient_scope(
        owner, alice_mind, remember):
    remember(content="Readable")
    agent = key_client(connect(owner, alice_mind, access="memory:read")["access_token"])
    assert "Readable" in agent.get("/memory/recall", {"format": "text"}).content.decode()
    refused = agent.post("/memory", {"category": "fact", "content": "No"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "insufficient_scope"
    assert refused["WWW-Authenticate"] == (
        f'Bearer realm="synapse", resource_metadata="{ORIGIN}/.well-known/'
        'oauth-protected-resource", error="insufficient_scope", scope="memory:write"')
    assert not Memory.objects.filter(content="No").exists()


def test_a_path_scoped_token_sees_and_writes_only_under_its_paths(owner, alice_mind, remember):
    remember(content="Inside", path="projects/memory-os")
    remember(content="Outside", path="personal")
    agent = key_client(connect(owner, alice_mind, paths="projects/memory-os")["access_token"])
    listed = agent.get("/memory").json()
    assert [item["content"] for item in listed["results"]] == ["Inside"]
    stored = agent.post("/memory", {"category": "fact", "content": "New"}, format="json")
    assert stored.status_code == 201
    assert Memory.objects.get(content="New").path == "projects/memory-os"
    # A route about the whole mind refuses it, as it refuses a path-scoped key.
    audit = agent.get("/memory/audit")
    assert audit.status_code == 403 and audit.json()["error"]["code"] == "path_scoped_key"


def test_human_only_routes_and_other_minds_refuse_an_oauth_token(
        owner, alice_mind, bob_mind, remember):
    memory = remember(content="Unverified")
    agent = key_client(connect(owner, alice_mind)["access_token"])
    verify = agent.post(f"/memory/{memory.id}/verify")
    assert verify.status_code == 403
    assert agent.get("/minds").status_code == 403
    assert agent.get("/memory", {"mind": bob_mind.id}).status_code == 404
    assert agent.get("/auth/me").status_code == 403


def test_writes_are_audited_as_the_connection_and_throttled_per_connection(
        owner, alice_mind, settings):
    tokens = connect(owner, alice_mind)
    connection = connection_of(tokens)
    agent = key_client(tokens["access_token"])
    agent.post("/memory", {"category": "fact", "key": "k", "content": "Audited"},
               format="json", HTTP_X_SYNAPSE_AGENT_INSTANCE="host-42")
    event = AuditEvent.objects.get(mind=alice_mind, action="store")
    assert (event.actor_type, event.actor_id, event.actor_label) == (
        "connection", connection.id, "connection Test Host")
    connection.refresh_from_db()
    assert connection.instance_ids == ["host-42"] and connection.last_used_at is not None
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "write": "1/min"}}
    assert agent.post("/memory", {"category": "fact", "content": "a"},
                      format="json").status_code == 429
    # Another connection of the same mind has a budget of its own.
    other = key_client(connect(owner, alice_mind)["access_token"])
    assert other.post("/memory", {"category": "fact", "content": "b"},
                      format="json").status_code == 201


def test_a_deactivated_owner_ends_the_connections_tokens(owner, alice, alice_mind):
    agent = key_client(connect(owner, alice_mind)["access_token"])
    assert agent.get("/memory").status_code == 200
    alice.is_active = False
    alice.save()
    refused = agent.get("/memory")
    assert refused.status_code == 401
    assert "deactivated" in refused.json()["error"]["message"]


def test_an_unknown_token_is_401_and_a_jwt_still_works(human):
    refused = key_client("NotAToken0123456789").get("/memory")
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "Unknown OAuth access token."
    assert human.get("/minds").status_code == 200


# -- Connected apps (web UI) -----------------------------------------------------------------


def test_connected_apps_lists_and_revokes_at_once(owner, alice_mind, ui):
    tokens = connect(owner, alice_mind, paths="projects")
    agent = key_client(tokens["access_token"])
    agent.get("/memory", HTTP_X_SYNAPSE_AGENT_INSTANCE="laptop-7")
    connection = connection_of(tokens)
    assert ui("apps") in owner.get(ui("keys")).content.decode()
    page = owner.get(ui("apps"))
    text = page.content.decode()
    assert page.status_code == 200
    assert "Test Host" in text and "laptop-7" in text and "projects/" in text
    assert "memory:write" in text
    revoked = owner.post(ui(f"apps/{connection.id}/revoke"))
    assert revoked.status_code == 302
    refused = agent.get("/memory")
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "This OAuth connection has been revoked."
    assert AuditEvent.objects.filter(mind=alice_mind, action="connection_revoke").count() == 1
    # Its refresh token went with it.
    refresh = Client().post("/oauth/token", urlencode({
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
        "client_id": connection.application.client_id}),
        content_type="application/x-www-form-urlencoded")
    assert refresh.status_code == 400


def test_another_human_cannot_see_or_revoke_a_connection(owner, alice_mind, bob):
    connection = connection_of(connect(owner, alice_mind))
    intruder = session_client(bob)
    assert intruder.get(f"/ui/minds/{alice_mind.id}/apps").status_code == 404
    assert intruder.post(
        f"/ui/minds/{alice_mind.id}/apps/{connection.id}/revoke").status_code == 404
    connection.refresh_from_db()
    assert connection.revoked_at is None


def test_the_admin_lists_connections_and_revokes_them(staff, owner, alice_mind):
    connection = connection_of(connect(owner, alice_mind))
    page = staff.get("/admin/minds/oauthconnection/")
    assert page.status_code == 200 and connection.id in page.content.decode()
    staff.post("/admin/minds/oauthconnection/", {
        "action": "revoke_connections", "_selected_action": [connection.id], "index": 0})
    connection.refresh_from_db()
    assert connection.revoked_at is not None


# -- Hardening, round 3 (issue 36) ----------------------------------------------------------


def token_request(data: dict, **extra):
    return Client().post("/oauth/token", urlencode(data),
                         content_type="application/x-www-form-urlencoded", **extra)


def with_rates(settings, **rates):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **rates}}


@pytest.mark.parametrize("grant", [
    {"grant_type": "password", "username": "alice"},
    {"grant_type": "client_credentials"},
])
def test_the_token_endpoint_never_checks_a_password(alice, monkeypatch, grant):
    """Finding 1: oauthlib's default Server carried the password grant, which checked the
    password before refusing the client (invalid_grant for a wrong one, unauthorized_client
    for the right one): an oracle without the sign-in limits. Only the code and refresh
    grants are carried now, so the answer is the same and no password is looked at."""
    import oauth2_provider.oauth2_validators as validators

    def no_password_check(*args, **kwargs):
        raise AssertionError("the token endpoint checked a password")

    monkeypatch.setattr(validators, "authenticate", no_password_check)
    client_id = register().json()["client_id"]
    answers = [token_request({**grant, "client_id": client_id, "password": password})
               for password in (PASSWORD, "wrong password")]
    assert [answer.status_code for answer in answers] == [400, 400]
    assert answers[0].json() == answers[1].json() == {"error": "unsupported_grant_type"}


def test_the_token_endpoint_is_rate_limited_per_address(settings):
    with_rates(settings, oauth_token="3/min")
    client_ids = [register().json()["client_id"] for _ in range(4)]
    answers = [token_request({"grant_type": "authorization_code", "code": "guess",
                              "client_id": client_id, "redirect_uri": REDIRECT_URI})
               for client_id in client_ids]
    assert [answer.status_code for answer in answers] == [400, 400, 400, 429]
    refused = answers[-1]
    assert int(refused["Retry-After"]) >= 1
    assert refused["Cache-Control"] == "no-store"
    assert refused["Content-Type"] == "application/json"
    body = refused.json()
    assert body["error"] == "slow_down" and "Too many token requests" in body[
        "error_description"]
    # Another address keeps its own budget.
    other = token_request({"grant_type": "authorization_code", "code": "guess",
                           "client_id": client_ids[0], "redirect_uri": REDIRECT_URI},
                          REMOTE_ADDR="10.9.9.9")
    assert other.status_code == 400


def test_the_token_endpoint_is_rate_limited_per_client_id(settings):
    """Per client id, whichever way the client names itself (form field or HTTP Basic),
    from any number of addresses."""
    import base64

    with_rates(settings, oauth_token_client="2/min")
    client_id = register().json()["client_id"]
    basic = base64.b64encode(f"{client_id}:not-the-secret".encode()).decode()
    answers = [
        token_request({"grant_type": "refresh_token", "refresh_token": "guess",
                       "client_id": client_id}, REMOTE_ADDR="10.0.0.1"),
        token_request({"grant_type": "refresh_token", "refresh_token": "guess"},
                      REMOTE_ADDR="10.0.0.2", HTTP_AUTHORIZATION=f"Basic {basic}"),
        token_request({"grant_type": "refresh_token", "refresh_token": "guess",
                       "client_id": client_id}, REMOTE_ADDR="10.0.0.3"),
    ]
    assert [answer.status_code for answer in answers][-1] == 429
    assert [answer.status_code for answer in answers][:2] != [429, 429]
    assert answers[-1].json()["error"] == "slow_down"
    another = register().json()["client_id"]
    assert token_request({"grant_type": "refresh_token", "refresh_token": "guess",
                          "client_id": another}, REMOTE_ADDR="10.0.0.4").status_code == 400


EVIL_REDIRECT = "https://evil.example/cb"


def evil_consent(client_id: str, **params) -> str:
    query = authorize_params(client_id, pkce_pair()[1], redirect_uri=EVIL_REDIRECT)
    query.update(params)
    return "/oauth/authorize?" + urlencode({k: v for k, v in query.items() if v is not None})


@pytest.mark.parametrize("params", [
    {"code_challenge": None, "code_challenge_method": None},  # no PKCE
    {"code_challenge_method": "plain"},
    {"scope": "memory:read admin"},  # an unknown scope
])
def test_an_authorization_error_is_shown_not_redirected_for_a_client_never_approved(
        owner, alice_mind, params):
    """Finding 3: anyone may register https://evil.example/cb; an error answered with a 302
    to it made /oauth/authorize an open redirector. The person sees the error, the host it
    would send them to, and a link they may follow."""
    client_id = register(redirect_uris=[EVIL_REDIRECT]).json()["client_id"]
    page = owner.get(evil_consent(client_id, **params))
    assert page.status_code == 400
    text = page.content.decode()
    assert "evil.example" in text
    link = page.context["error_redirect"]
    assert link.startswith(EVIL_REDIRECT + "?") and "error=" in link and "iss=" in link
    assert 'href="' + link.replace("&", "&amp;") + '"' in text


def test_a_signed_out_person_is_asked_to_sign_in_before_any_redirect(alice_mind):
    client_id = register(redirect_uris=[EVIL_REDIRECT]).json()["client_id"]
    response = Client().get(evil_consent(client_id, code_challenge=None,
                                         code_challenge_method=None))
    assert response.status_code == 302
    assert response["Location"].startswith("/ui/login?next=/oauth/authorize")


def test_an_authorization_error_still_redirects_to_a_client_this_person_approved(
        owner, alice, alice_mind, bob):
    client_id = register(redirect_uris=[EVIL_REDIRECT]).json()["client_id"]
    # Another person's approval does not count.
    bob_mind = mind_create(owner=bob, name="Bob's")
    approve(session_client(bob), client_id, bob_mind, redirect_uri=EVIL_REDIRECT)
    assert owner.get(evil_consent(client_id, code_challenge=None,
                                  code_challenge_method=None)).status_code == 400
    approve(owner, client_id, alice_mind, redirect_uri=EVIL_REDIRECT)
    redirected = owner.get(evil_consent(client_id, code_challenge=None,
                                        code_challenge_method=None))
    assert redirected.status_code == 302
    query = parse_qs(urlsplit(redirected["Location"]).query)
    assert redirected["Location"].startswith(EVIL_REDIRECT)
    assert query["error"] == ["invalid_request"] and query["iss"] == [ORIGIN]
    # Revoked, the approval no longer counts.
    OAuthConnection.objects.filter(approved_by=alice).update(revoked_at=timezone.now())
    assert owner.get(evil_consent(client_id, code_challenge=None,
                                  code_challenge_method=None)).status_code == 400


def test_an_unregistered_redirect_uri_is_never_followed(owner, alice_mind):
    client_id = register().json()["client_id"]
    page = owner.get(evil_consent(client_id))
    assert page.status_code == 400 and "error_redirect" not in page.context


@pytest.mark.parametrize("prompt", ["auto", "force", "none", "bogus"])
def test_approval_prompt_always_shows_the_consent_page(owner, alice_mind, prompt):
    """Finding 8: approval_prompt=auto took DOT's auto-approve path after a first
    approval and answered 500. The consent page is shown whatever it says."""
    client_id = register().json()["client_id"]
    connect(owner, alice_mind, client_id=client_id)
    page = owner.get(consent_url(client_id, approval_prompt=prompt))
    assert page.status_code == 200
    assert page.context["form"].fields["mind"].choices
    assert OAuthConnection.objects.count() == 1


def test_a_client_marked_skip_authorization_still_shows_the_consent_page(owner, alice_mind):
    client_id = register().json()["client_id"]
    Application.objects.filter(client_id=client_id).update(skip_authorization=True)
    page = owner.get(consent_url(client_id))
    assert page.status_code == 200 and "form" in page.context
    assert not OAuthConnection.objects.exists()


@pytest.mark.parametrize("body", [
    b"[" * 100_000,
    b'{"a":' * 50_000,
    json.dumps({"redirect_uris": [REDIRECT_URI], "deep": [[[[[[[[[[[[]]]]]]]]]]]]})
    .replace("[[", "[" * 60 + "[").replace("]]", "]" * 60 + "]").encode(),
])
def test_registration_parses_json_like_every_other_route(body):
    """Finding 6: json.loads raised RecursionError on deep nesting: a 500."""
    before = Application.objects.count()
    response = Client().post("/oauth/register", body, content_type="application/json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_client_metadata"
    assert "nested" in error["message"] or "JSON" in error["message"]
    assert Application.objects.count() == before


def test_registration_bounds_each_redirect_uri():
    """Finding 7: one registration stored 4.8 MB of redirect URIs."""
    long_uri = "https://host.example/" + "a" * 2_000
    response = register(redirect_uris=[long_uri])
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], list(error["fields"])) == ("invalid_redirect_uri",
                                                      ["redirect_uris"])
    assert "2000 characters" in error["message"]
    fits = "https://host.example/" + "a" * (2_000 - len("https://host.example/"))
    assert register(redirect_uris=[fits]).status_code == 201


def test_clients_that_never_completed_an_authorization_are_pruned_after_a_day(
        owner, alice, alice_mind):
    from django.core.management import call_command

    day_old = timezone.now() - timedelta(days=1, minutes=1)
    stale = register().json()["client_id"]
    fresh = register().json()["client_id"]
    used = register().json()["client_id"]
    connect(owner, alice_mind, client_id=used)
    revoked = register().json()["client_id"]
    connect(owner, alice_mind, client_id=revoked)
    OAuthConnection.objects.filter(application__client_id=revoked).update(
        revoked_at=timezone.now())
    pending = register().json()["client_id"]  # a code issued, never exchanged
    approve(owner, pending, alice_mind)
    hand_made = Application.objects.create(
        name="Made in the admin", user=alice, redirect_uris=REDIRECT_URI,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE)
    Application.objects.exclude(client_id=fresh).update(created=day_old)
    out = io.StringIO()
    call_command("prune_oauth_clients", stdout=out)
    left = set(Application.objects.values_list("client_id", flat=True))
    assert left == {fresh, used, revoked, pending, hand_made.client_id}
    assert stale not in left
    assert out.getvalue().startswith("1 unused OAuth clients deleted")


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/revoke"])
def test_a_nul_byte_in_basic_credentials_or_the_form_is_invalid_request(path):
    """PostgreSQL text cannot hold NUL: DOT looked such a client id or code up and answered
    500 (found by tests/security/test_fuzz_oauth.py)."""
    import base64

    basic = base64.b64encode(b"a\x00b:secret").decode()
    answers = [
        Client().post(path, urlencode({"grant_type": "refresh_token", "token": "t",
                                       "refresh_token": "t"}),
                      content_type="application/x-www-form-urlencoded",
                      HTTP_AUTHORIZATION=f"Basic {basic}"),
        Client().post(path, urlencode({"grant_type": "authorization_code", "code": "a\x00",
                                       "token": "a\x00", "client_id": "c"}),
                      content_type="application/x-www-form-urlencoded"),
    ]
    for answer in answers:
        assert answer.status_code == 400
        assert answer.json()["error"] == "invalid_request"
