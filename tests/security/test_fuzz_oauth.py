"""Fuzzing the OAuth endpoints with schemathesis: no 5xx, and every answer's status and
content type among those the test-only description lists (tests/security/oauth_openapi.py;
these routes are not in the public /api/schema/).

Every operation gets schema-valid (positive) and schema-breaking (negative) cases;
``/oauth/authorize`` once signed out and once signed in as a person who has already
approved the fuzzed client (so ``approval_prompt=auto`` and the other shortcuts past the
consent page are reached). Positive cases name a registered client (its id and redirect
URI), so they get past "unknown client" into the real checks. The budget per operation and
mode is ``SYNAPSE_FUZZ_EXAMPLES``, as in test_fuzz.py (small in CI; ``make fuzz`` raises
it). Rate limits are lifted (the fuzzer is one very fast client); the limits have their
own tests.
"""

import json

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.db import transaction
from django.test import Client
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.minds.oauth_flow import REDIRECT_URI, approve, register
from tests.security import fuzzing
from tests.security.fuzzing import MODES, connection_kept_across_requests
from tests.security.oauth_openapi import OAUTH_SCHEMA

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

CHECKS = [schemathesis.checks.not_a_server_error, status_code_conformance,
          content_type_conformance, response_schema_conformance]


def oauth_schema():
    schema = schemathesis.openapi.from_dict(json.loads(json.dumps(OAUTH_SCHEMA)))
    schema.app = WSGIHandler()
    return schema


def operation(schema, method: str, path: str):
    for result in schema.get_all_operations():
        found = result.ok()
        if found.method.upper() == method and found.path == path:
            return found
    raise LookupError(f"{method} {path}")


@pytest.fixture(name="connection_kept_across_requests")
def connection_kept(oauth_client):
    """After ``oauth_client``, whose requests go through Django's test client."""
    with connection_kept_across_requests():
        yield


@pytest.fixture
def unthrottled(settings):
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
             **dict.fromkeys(("oauth_register", "oauth_token", "oauth_token_client"),
                             "100000/min")}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


@pytest.fixture
def oauth_client(tenants) -> dict:
    """A registered public client, already approved once by tenant a1's owner, and that
    person's session cookie."""
    tenant = tenants["a1"]
    client_id = register().json()["client_id"]
    person = Client()
    person.force_login(tenant.owner)
    approve(person, client_id, tenant.mind)
    return {"client_id": client_id,
            "cookie": f"sessionid={person.cookies['sessionid'].value}"}


def fuzz_operation(op, mode, failures: list[str], **options) -> int:
    """tests.security.fuzzing.fuzz_operation with these endpoints' checks."""
    return fuzzing.fuzz_operation(op, mode, failures, checks=CHECKS, **options)


def named_client(client_id: str, field: str):
    """A ``fill``: the case names the registered client (and its redirect URI)."""
    def fill(case):
        if field == "query":
            case.query = {**(case.query or {}), "client_id": client_id,
                          "redirect_uri": REDIRECT_URI}
        elif isinstance(case.body, dict):
            case.body = {**case.body, "client_id": client_id}
            if "redirect_uri" in case.body:
                case.body["redirect_uri"] = REDIRECT_URI
    return fill


def fuzz_all(oauth_client: dict) -> tuple[int, list[str]]:
    schema = oauth_schema()
    client_id = oauth_client["client_id"]
    runs = [  # (method, path, headers, fill, label)
        ("GET", "/.well-known/oauth-authorization-server", None, None, ""),
        ("OPTIONS", "/.well-known/oauth-authorization-server", None, None, ""),
        ("GET", "/.well-known/oauth-protected-resource", None, None, ""),
        ("OPTIONS", "/.well-known/oauth-protected-resource", None, None, ""),
        ("GET", "/.well-known/oauth-protected-resource/mcp", None, None, ""),
        ("OPTIONS", "/.well-known/oauth-protected-resource/mcp", None, None, ""),
        ("POST", "/oauth/register", None, None, ""),
        ("GET", "/oauth/authorize", None, named_client(client_id, "query"), " (signed out)"),
        ("GET", "/oauth/authorize", {"Cookie": oauth_client["cookie"]},
         named_client(client_id, "query"), " (signed in)"),
        ("POST", "/oauth/token", None, named_client(client_id, "body"), ""),
        ("POST", "/oauth/revoke", None, named_client(client_id, "body"), ""),
    ]
    cases, failures = 0, []
    for method, path, headers, fill, label in runs:
        op = operation(schema, method, path)
        for mode in MODES:
            cases += fuzz_operation(op, mode, failures, headers=headers, fill=fill,
                                    label_extra=label)
    return cases, failures


def test_the_oauth_endpoints_stay_out_of_the_public_schema():
    from tests.security.openapi import load_schema

    public = load_schema()["paths"]
    assert not [path for path in OAUTH_SCHEMA["paths"] if path in public]


def test_fuzzing_the_oauth_endpoints_finds_no_server_error(oauth_client, unthrottled,
                                                          connection_kept_across_requests):
    cases, failures = fuzz_all(oauth_client)
    print(f"\nfuzz of the OAuth endpoints: {cases} cases, {len(failures)} failures")
    assert cases > 0
    assert not failures, "\n\n".join(failures)


# Known inputs that once answered 500, sent through the same checks (each is also within
# what the fuzzer generates, but not certain to be drawn with a few examples).
KNOWN_CASES = [
    ("POST", "/oauth/register", {"raw": b"[" * 5000 + b"]" * 5000},
     "deeply nested JSON (a RecursionError in the JSON parser)"),
    ("GET", "/oauth/authorize", {"query": {"approval_prompt": "auto"}},
     "approval_prompt=auto for a client the person approved before"),
    # Found by this fuzzer: a NUL byte reaching PostgreSQL in a client id or code lookup
    # (psycopg DataError, "text fields cannot contain NUL (0x00) bytes").
    ("POST", "/oauth/revoke", {"form": {"token": "abc", "client_id": "a\x00b"}},
     "revoke with a NUL byte in client_id"),
    ("POST", "/oauth/token", {"form": {"grant_type": "authorization_code", "code": "abc",
                                       "client_id": "a\x00b"}},
     "token with a NUL byte in client_id"),
    ("POST", "/oauth/token", {"form": {"grant_type": "authorization_code", "code": "a\x00b",
                                       "client_id": "REGISTERED",
                                       "redirect_uri": REDIRECT_URI, "code_verifier": "v" * 43}},
     "token with a NUL byte in the code of a registered client"),
]


@pytest.mark.parametrize(("method", "path", "parts", "what"), KNOWN_CASES,
                         ids=[case[3] for case in KNOWN_CASES])
def test_known_server_errors_stay_fixed(oauth_client, unthrottled,
                                        connection_kept_across_requests, method, path, parts,
                                        what):
    op = operation(oauth_schema(), method, path)
    if path == "/oauth/authorize":
        query = {"response_type": "code", "client_id": oauth_client["client_id"],
                 "redirect_uri": REDIRECT_URI, "state": "st4te",
                 "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                 "code_challenge_method": "S256", "scope": "memory:read memory:write",
                 **parts["query"]}
        case = op.Case(query=query)
        headers = {"Cookie": oauth_client["cookie"]}
        extra = {}
    elif "form" in parts:
        form = {name: oauth_client["client_id"] if value == "REGISTERED" else value
                for name, value in parts["form"].items()}
        case = op.Case(body=form, media_type="application/x-www-form-urlencoded")
        headers, extra = None, {}
    else:
        # Sent as bytes: the fuzzer's own JSON encoder cannot nest that deep either.
        case = op.Case(body={"redirect_uris": [REDIRECT_URI]}, media_type="application/json")
        headers = {"Content-Type": "application/json"}
        extra = {"data": parts["raw"]}
    with transaction.atomic():
        case.call_and_validate(headers=headers, checks=CHECKS, **extra)


def test_the_fuzzer_reports_a_server_error(oauth_client, unthrottled,
                                          connection_kept_across_requests, monkeypatch):
    """The harness itself: a route answering 500 is reported, not passed over."""
    from django.http import HttpResponse

    from minds import oauth_views

    monkeypatch.setattr(oauth_views.RegisterView, "post",
                        lambda self, request: HttpResponse("boom", status=500))
    failures: list[str] = []
    fuzz_operation(operation(oauth_schema(), "POST", "/oauth/register"),
                   GenerationMode.POSITIVE, failures)
    assert failures and "Server error" in failures[0], failures
