"""A test-only OpenAPI document for the OAuth endpoints (minds.oauth_views), for fuzzing
them with schemathesis (tests/security/test_fuzz_oauth.py).

These routes are not in the public ``/api/schema/`` and must stay out of it: they follow
RFC 6749/7591/7009/8414/9728, not the REST API's conventions, and MCP hosts find them
through the metadata documents. So the fuzzer is given this description instead. It says
what the server accepts (the RFCs' parameters, Synapse's limits on them) and which
answers each route may give; the fuzzer generates requests within it (positive) and
outside it (negative), and checks that no answer is a 5xx and each one's status and
content type are among those listed here.
"""

JSON = "application/json"
HTML = "text/html"
FORM = "application/x-www-form-urlencoded"

_text = {"type": "string", "maxLength": 300}


def _answers(*statuses: int, content: str | None = JSON, extra: dict | None = None) -> dict:
    """``responses`` for ``statuses``, each with body type ``content`` (None: no body)."""
    answers = {}
    for status in statuses:
        answer = {"description": str(status)}
        if content is not None:
            answer["content"] = {content: {"schema": {}}}
        answers[str(status)] = answer
    return {**answers, **(extra or {})}


# Rate limits are lifted in the fuzz test, but a 429 is a documented answer of each.
_THROTTLED = {"429": {"description": "rate limited", "content": {JSON: {"schema": {}}}}}

_AUTHORIZATION_SERVER = {
    "type": "object",
    "required": ["issuer", "authorization_endpoint", "token_endpoint",
                 "registration_endpoint", "response_types_supported",
                 "code_challenge_methods_supported"],
    "properties": {
        "issuer": {"type": "string"},
        "authorization_endpoint": {"type": "string"},
        "token_endpoint": {"type": "string"},
        "registration_endpoint": {"type": "string"},
        "revocation_endpoint": {"type": "string"},
        "response_types_supported": {"type": "array", "items": {"type": "string"}},
        "code_challenge_methods_supported": {"type": "array", "items": {"enum": ["S256"]}},
    },
}
_PROTECTED_RESOURCE = {
    "type": "object",
    "required": ["resource", "authorization_servers"],
    "properties": {
        "resource": {"type": "string"},
        "authorization_servers": {"type": "array", "items": {"type": "string"},
                                  "minItems": 1},
        "scopes_supported": {"type": "array", "items": {"type": "string"}},
    },
}


def _metadata(schema: dict, summary: str) -> dict:
    return {
        "get": {"summary": summary, "security": [], "responses": {
            "200": {"description": "the document", "content": {JSON: {"schema": schema}}}}},
        "options": {"summary": "CORS preflight", "security": [],
                    "responses": {"204": {"description": "allowed"}}},
    }


_REGISTRATION = {
    "type": "object",
    "required": ["redirect_uris"],
    "properties": {
        "redirect_uris": {"type": "array", "minItems": 1, "maxItems": 10, "items": {
            "type": "string", "maxLength": 2000,
            "pattern": r"^(https://[a-z0-9.-]+(:[0-9]{1,5})?|http://127\.0\.0\.1:[0-9]{1,5})"
                       r"(/[A-Za-z0-9._~/-]*)?$"}},
        "client_name": {"type": "string", "maxLength": 100},
        "grant_types": {"type": "array", "items": {
            "enum": ["authorization_code", "refresh_token"]}},
        "response_types": {"type": "array", "items": {"enum": ["code"]}},
        "token_endpoint_auth_method": {
            "enum": ["none", "client_secret_basic", "client_secret_post"]},
        "scope": {"enum": ["memory:read", "memory:write", "memory:read memory:write"]},
    },
}

_AUTHORIZE_QUERY = [
    {"name": name, "in": "query", "required": required, "schema": schema}
    for name, required, schema in (
        ("response_type", True, {"enum": ["code"]}),
        ("client_id", True, {"type": "string", "maxLength": 100}),
        ("redirect_uri", False, _text),
        ("scope", False, {"enum": ["memory:read", "memory:write",
                                   "memory:read memory:write"]}),
        ("state", False, {"type": "string", "maxLength": 100}),
        ("code_challenge", True, {"type": "string", "minLength": 43, "maxLength": 128,
                                  "pattern": "^[A-Za-z0-9._~-]+$"}),
        ("code_challenge_method", True, {"enum": ["S256"]}),
        ("resource", False, _text),
        # DOT's: "auto" skips the page after an earlier approval (Synapse always shows it).
        ("approval_prompt", False, {"enum": ["auto", "force"]}),
        ("prompt", False, {"enum": ["none", "login", "consent"]}),
        ("nonce", False, {"type": "string", "maxLength": 100}),
    )
]

_TOKEN_FORM = {
    "type": "object",
    "required": ["grant_type"],
    "properties": {
        "grant_type": {"enum": ["authorization_code", "refresh_token"]},
        "code": _text,
        "redirect_uri": _text,
        "client_id": {"type": "string", "maxLength": 100},
        "client_secret": {"type": "string", "maxLength": 100},
        "code_verifier": {"type": "string", "minLength": 43, "maxLength": 128,
                          "pattern": "^[A-Za-z0-9._~-]+$"},
        "refresh_token": _text,
        "resource": _text,
        "scope": {"enum": ["memory:read", "memory:write", "memory:read memory:write"]},
    },
}

_REVOKE_FORM = {
    "type": "object",
    "required": ["token"],
    "properties": {
        "token": _text,
        "token_type_hint": {"enum": ["access_token", "refresh_token"]},
        "client_id": {"type": "string", "maxLength": 100},
        "client_secret": {"type": "string", "maxLength": 100},
    },
}


OAUTH_SCHEMA = {
    "openapi": "3.0.3",
    "info": {"title": "Synapse OAuth (test only)", "version": "1"},
    "paths": {
        "/.well-known/oauth-authorization-server": _metadata(
            _AUTHORIZATION_SERVER, "RFC 8414 authorization server metadata"),
        "/.well-known/oauth-protected-resource": _metadata(
            _PROTECTED_RESOURCE, "RFC 9728 protected resource metadata"),
        "/.well-known/oauth-protected-resource/mcp": _metadata(
            _PROTECTED_RESOURCE, "RFC 9728 protected resource metadata of /mcp"),
        "/oauth/register": {"post": {
            "summary": "RFC 7591 dynamic client registration",
            "security": [],
            "requestBody": {"required": True,
                            "content": {JSON: {"schema": _REGISTRATION}}},
            "responses": _answers(201, 400, 413, extra=_THROTTLED),
        }},
        "/oauth/authorize": {"get": {
            "summary": "the consent page (signed in) or a redirect to sign in",
            "security": [],
            "parameters": _AUTHORIZE_QUERY,
            # 200 the consent page; 302 to sign in, or back to an approved client with an
            # error; 400 (and DOT's 401 for an unknown client) an error page, or Synapse's
            # JSON error from a middleware (a NUL byte in the query string, say).
            "responses": {**_answers(200, 401, 403, content=HTML),
                          "302": {"description": "a redirect"},
                          "400": {"description": "an error page, or a JSON error",
                                  "content": {HTML: {"schema": {}}, JSON: {"schema": {}}}}},
        }},
        "/oauth/token": {"post": {
            "summary": "RFC 6749 token endpoint (authorization code, refresh token)",
            "security": [],
            "requestBody": {"required": True, "content": {FORM: {"schema": _TOKEN_FORM}}},
            "responses": _answers(200, 400, 401, 413, extra=_THROTTLED),
        }},
        "/oauth/revoke": {"post": {
            "summary": "RFC 7009 token revocation",
            "security": [],
            "requestBody": {"required": True, "content": {FORM: {"schema": _REVOKE_FORM}}},
            # 200 with no body whether or not the token existed (RFC 7009 §2.2).
            "responses": {"200": {"description": "revoked, or no such token"},
                          **_answers(400, 401, 413)},
        }},
    },
}
