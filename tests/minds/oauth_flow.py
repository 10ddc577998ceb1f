"""The OAuth flow through Django's test client, step by step: register a client, approve it
on the consent page as a signed-in human, exchange the code (PKCE S256). Shared by the
OAuth tests and the isolation matrix."""

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

from django.test import Client

REDIRECT_URI = "http://127.0.0.1:8765/callback"
ORIGIN = "http://testserver"


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.decode().rstrip("=")


def register(client: Client | None = None, **metadata):
    """POST /oauth/register; the response."""
    body = {"client_name": "Test Host", "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none", **metadata}
    return (client or Client()).post("/oauth/register", json.dumps(body),
                                     content_type="application/json")


@dataclass
class Authorization:
    client_id: str
    verifier: str
    code: str
    query: dict


def authorize_params(client_id: str, challenge: str, **extra) -> dict:
    return {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
            "state": "st4te", "code_challenge": challenge, "code_challenge_method": "S256",
            "scope": "memory:read memory:write", "resource": ORIGIN, **extra}


def approve(owner: Client, client_id: str, mind, *, access: str = "memory:write",
            paths: str = "", **extra) -> Authorization:
    """The human approves ``client_id`` for ``mind`` on the consent page."""
    verifier, challenge = pkce_pair()
    params = authorize_params(client_id, challenge, **extra)
    page = owner.get("/oauth/authorize?" + urlencode(params))
    assert page.status_code == 200, page.content
    form = {name: value for name, value in page.context["form"].initial.items()
            if value is not None}
    form.update(allow="Authorize", mind=mind.id, access=access, paths=paths)
    answer = owner.post("/oauth/authorize?" + urlencode(params), form)
    assert answer.status_code == 302, answer.content
    query = {name: values[0] for name, values in
             parse_qs(urlsplit(answer["Location"]).query).items()}
    return Authorization(client_id, verifier, query.get("code", ""), query)


def exchange(authorization: Authorization, **overrides):
    """POST /oauth/token for the code; the response."""
    data = {"grant_type": "authorization_code", "code": authorization.code,
            "redirect_uri": REDIRECT_URI, "client_id": authorization.client_id,
            "code_verifier": authorization.verifier, "resource": ORIGIN, **overrides}
    return Client().post("/oauth/token", urlencode(data),
                         content_type="application/x-www-form-urlencoded")


def connect(owner: Client, mind, *, client_id: str = "", **options) -> dict:
    """Register (unless ``client_id`` is given), approve and exchange: the token response
    (access_token, refresh_token…)."""
    client_id = client_id or register().json()["client_id"]
    response = exchange(approve(owner, client_id, mind, **options))
    assert response.status_code == 200, response.content
    return response.json()
