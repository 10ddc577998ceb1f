"""Secrets in transit and in logs: redacted log lines, private-cache headers, bare error bodies."""

import io
import logging

import httpx
import pytest
from django.test import Client

from synapse.logging import RedactSecretsFilter
from tests.security.conftest import bearer, jwt_for
from tests.security.live import PASSWORD as LIVE_PASSWORD
from tests.security.live import Server
from tests.security.openapi import load_schema, operations

JWT_SAMPLE = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VyX2lkIjoxfQ."
              "c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl")
KEY_SAMPLE = "mk_ABCDEFGHIJKLabcdefghijklmnopqrstuvwxyz0123456789ABCD"


def redacted(message: str) -> str:
    record = logging.LogRecord("t", logging.INFO, __file__, 1, message, None, None)
    RedactSecretsFilter().filter(record)
    return record.getMessage()


@pytest.mark.parametrize("line, secret", [
    (f'"GET /memory?key={KEY_SAMPLE} HTTP/1.1" 200', KEY_SAMPLE),
    (f'"GET /memory?limit=5&key={KEY_SAMPLE}&tag=x HTTP/1.1" 200', KEY_SAMPLE),
    ('"GET /memory?KEY=not_a_mind_key_but_secret HTTP/1.1" 401', "not_a_mind_key_but_secret"),
    (f"Authorization: Bearer {KEY_SAMPLE}", KEY_SAMPLE),
    (f"HTTP_AUTHORIZATION='Bearer {JWT_SAMPLE}'", JWT_SAMPLE),
    (f"authorization: bearer {JWT_SAMPLE}", JWT_SAMPLE),
    ('{"username": "alice", "password": "hunter2-hunter2"}', "hunter2-hunter2"),
    (f'{{"refresh": "{JWT_SAMPLE}"}}', JWT_SAMPLE),
    (f'{{"access":"{JWT_SAMPLE}"}}', JWT_SAMPLE),
    (f"key {KEY_SAMPLE} was used", KEY_SAMPLE),
    # OAuth: a redirect carrying a code, the token endpoint's form body and its answer.
    ("Success url for the request: http://127.0.0.1:8/cb?code=Zx9codeSecret&state=s",
     "Zx9codeSecret"),
    ("grant_type=refresh_token&refresh_token=R3fr3shS3cret&client_id=c", "R3fr3shS3cret"),
    ("code_verifier=V3rifierS3cretV3rifierS3cret&client_id=c", "V3rifierS3cretV3rifierS3cret"),
    ('{"access_token": "Acc3ssS3cret", "expires_in": 3600}', "Acc3ssS3cret"),
    ('{"client_secret": "Cl13ntS3cret"}', "Cl13ntS3cret"),
    ("token=T0kenToRevoke&token_type_hint=refresh_token", "T0kenToRevoke"),
    # An invitation's link, as Django logs a 4xx of its page.
    ("Bad Request: /ui/invitations/inv_1nv1tat10nS3cret", "inv_1nv1tat10nS3cret"),
])
def test_redaction_filter_removes_the_secret(line, secret):
    assert secret not in redacted(line)
    assert "[redacted]" in redacted(line)


@pytest.fixture
def console_output():
    """What the configured console handler (with its redaction filter) actually writes."""
    handlers = [handler for handler in logging.getLogger().handlers
                if any(isinstance(f, RedactSecretsFilter) for f in handler.filters)]
    assert handlers, "no log handler carries RedactSecretsFilter"
    buffer = io.StringIO()
    previous = [handler.setStream(buffer) for handler in handlers]
    yield buffer
    for handler, stream in zip(handlers, previous, strict=True):
        handler.setStream(stream)


def _fail_with_secrets():
    try:
        raise ValueError(f"lookup failed for {KEY_SAMPLE}")
    except ValueError as error:
        raise RuntimeError(f"upstream said Authorization: Bearer {JWT_SAMPLE}") from error


@pytest.mark.parametrize("logger_name", ["synapse.api", "django.request", "django.server"])
def test_tracebacks_carry_no_key_or_token(console_output, logger_name):
    """The exception text (a chained one too) goes through the redaction, not around it."""
    logger = logging.getLogger(logger_name)
    try:
        _fail_with_secrets()
    except RuntimeError:
        logger.exception("request failed")
        logger.error("again, with the stack", exc_info=True, stack_info=True)
    text = console_output.getvalue()
    assert text.count("Traceback (most recent call last)") == 4, text
    assert "RuntimeError: upstream said Authorization: Bearer [redacted]" in text
    assert "ValueError: lookup failed for mk_[redacted]" in text
    assert KEY_SAMPLE not in text and JWT_SAMPLE not in text


@pytest.mark.django_db
def test_request_log_lines_carry_no_credentials(console_output, tenants, settings):
    tenant = tenants["a1"]
    token = jwt_for(tenant.owner)
    secrets = [tenant.write_key, tenant.read_key, tenant.revoked_key, token]
    client = Client()
    client.get(f"/memory?key={tenant.write_key}")
    client.get(f"/memory?key={tenant.revoked_key}")
    client.get(f"/memory/mem_nosuchmemory?key={tenant.read_key}")
    client.post(f"/memory?key={tenant.read_key}", {"category": "note", "content": "x"},
                content_type="application/json")
    client.get("/memory?unknown=1", HTTP_AUTHORIZATION=f"Bearer {token}")
    client.get(f"/memory?mind={tenant.mind.id}&key={tenant.write_key}",
               HTTP_AUTHORIZATION=f"Bearer {token}")
    client.post("/auth/login", {"username": tenant.owner.username,
                                "password": "wrong password 123"},
                content_type="application/json")
    # Something was logged at all (401, 403, 404 and 400 warnings), and none of it is secret.
    text = console_output.getvalue()
    assert "Unauthorized" in text and "Not Found" in text, text
    assert not [secret for secret in secrets + ["wrong password 123"] if secret in text]
    assert "mk_" not in text.replace("mk_[redacted]", "")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gunicorn", "runserver"])
def test_server_access_lines_carry_no_credentials(live_cluster, kind):
    server = Server(live_cluster, kind=kind, workers=1, threads=2)
    try:
        login = httpx.post(server.url + "/auth/login", json={
            "username": live_cluster.username, "password": LIVE_PASSWORD})
        assert login.status_code == 200, login.text
        access, refresh = login.json()["access"], login.json()["refresh"]
        bogus = "mk_" + "Q" * 52
        responses = [
            httpx.get(f"{server.url}/memory?limit=3&key={live_cluster.key}"),
            httpx.get(f"{server.url}/memory/recall",
                      headers={"Authorization": f"Bearer {live_cluster.key}"}),
            httpx.get(f"{server.url}/memory?key={bogus}"),
            httpx.get(f"{server.url}/memory?mind={live_cluster.mind_id}",
                      headers={"Authorization": f"Bearer {access}"}),
            httpx.post(server.url + "/auth/refresh", json={"refresh": refresh}),
            httpx.post(server.url + "/auth/login", json={"username": live_cluster.username,
                                                         "password": "not the password 9"}),
        ]
        assert [r.status_code for r in responses] == [200, 200, 401, 200, 200, 401]
    finally:
        output = server.stop()
    assert "/memory" in output, output  # the access lines are there
    for secret in (live_cluster.key, bogus, access, refresh, LIVE_PASSWORD,
                   "not the password 9"):
        assert secret not in output, f"{kind} logged a secret:\n{output}"


@pytest.mark.django_db
def test_every_api_answer_says_no_referrer_and_no_store(tenants):
    tenant = tenants["a1"]
    agent = bearer(tenant.write_key)
    checked = []
    for op in operations(load_schema()):
        if op.method != "GET" or op.is_human_only:
            continue
        path = op.path
        for name in op.path_params:
            path = path.replace("{" + name + "}", tenant.memory_ids[1])
        query = {p["name"]: "7d" if p["name"] == "within" else tenant.word
                 for p in op.parameters("query") if p.get("required")}
        response = agent.get(path, query)
        assert response["Referrer-Policy"] == "no-referrer", op.label
        # A public route (no credentials, nothing private: GET /mcp/config/…) may be cached.
        cacheable = op.is_public and response["Cache-Control"].startswith("public, max-age=")
        assert "no-store" in response["Cache-Control"] or cacheable, op.label
        assert response["X-Content-Type-Options"] == "nosniff", op.label
        checked.append((op.label, response.status_code))
    assert ("GET /memory/{memory_id}", 200) in checked and ("GET /memory", 200) in checked
    for error in (bearer("mk_" + "x" * 52).get("/memory"), bearer(tenant.write_key).get(
            "/memory/mem_doesnotexist")):
        assert error["Referrer-Policy"] == "no-referrer"
        assert "no-store" in error["Cache-Control"]


@pytest.mark.django_db
@pytest.mark.urls("tests.security.error_urls")
@pytest.mark.parametrize("path", ["/broken/query", "/broken/plain"])
def test_server_errors_show_no_stack_trace_or_sql(settings, tenants, path):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {tenants['a1'].write_key}")
    assert response.status_code == 500
    assert response.json() == {"error": {"status": 500, "code": "server_error",
                                         "message": "Internal server error."}}
    text = response.content.decode()
    for tell in ("Traceback", "SELECT", "no_such_table", "File \"", "minds_mindkey"):
        assert tell not in text
