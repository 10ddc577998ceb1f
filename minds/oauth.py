"""OAuth 2.1 for MCP hosts, on django-oauth-toolkit (DOT): what Synapse adds to it.

DOT issues and checks the codes and tokens (PKCE, rotation, hashing at rest). Synapse ties
each of them to an OAuthConnection (minds.models) — the mind, scopes, paths and resource a
human approved on the consent page — and publishes the metadata documents an MCP client
discovers it by (RFC 9728, RFC 8414), and the client registration rules (RFC 7591).
The views: minds.oauth_views; the design: docs/security.md, "OAuth".
"""

import hashlib
import ipaddress
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from minds.models import OAuthConnection
from synapse.origin import public_origin, public_url

# The paths of the endpoints (synapse.urls); the metadata documents name them.
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"  # noqa: S105 (a path)
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_RESOURCE_METADATA_PATH = RESOURCE_METADATA_PATH + "/mcp"
SERVER_METADATA_PATH = "/.well-known/oauth-authorization-server"

SCOPES = list(settings.OAUTH_SCOPES)
TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]
GRANT_TYPES = ["authorization_code", "refresh_token"]
LOOPBACK_HOSTS = ("localhost",)


def protected_resource_metadata(request) -> dict:
    """RFC 9728: this server's origin is the resource; it is its own authorization
    server. The same document answers for the origin and for /mcp."""
    origin = public_origin(request)
    return {
        "resource": origin,
        "authorization_servers": [origin],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": "Synapse",
    }


def authorization_server_metadata(request) -> dict:
    """RFC 8414. Client ID metadata documents are not advertised: accepting one means
    fetching a URL the client names, on the internet, from this server (docs/security.md,
    "OAuth"); MCP clients then register (RFC 7591)."""
    origin = public_origin(request)
    return {
        "issuer": origin,
        "authorization_endpoint": public_url(request, AUTHORIZE_PATH),
        "token_endpoint": public_url(request, TOKEN_PATH),
        "registration_endpoint": public_url(request, REGISTER_PATH),
        "revocation_endpoint": public_url(request, REVOKE_PATH),
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": GRANT_TYPES,
        "token_endpoint_auth_methods_supported": TOKEN_ENDPOINT_AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": TOKEN_ENDPOINT_AUTH_METHODS,
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": False,
    }


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 or ::1 (RFC 8252 §7.3: a native app's redirect)."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: str) -> str | None:
    """Why a redirect URI may not be registered, or None: https, or http to a loopback
    host only; absolute, no fragment, no user information."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError:
        return f"{uri!r} is not a URL."
    if parts.scheme not in ("http", "https") or not host:
        return f"{uri!r} must be an https URL (or http to a loopback address)."
    if parts.scheme == "http" and not is_loopback(host):
        return (f"{uri!r}: http is allowed for loopback addresses only (localhost, "
                "127.0.0.1, [::1]); use https.")
    if parts.fragment or "#" in uri:
        return f"{uri!r} must not have a fragment."
    if parts.username or parts.password:
        return f"{uri!r} must not carry user information."
    return None


def approved_by_person(user, application) -> bool:
    """Whether ``user`` approved ``application``: they hold a live, unrevoked
    OAuthConnection for it (on any of their minds). Only such a client is sent an
    authorization error without the person's action (minds.oauth_views.ConsentView)."""
    if not getattr(user, "is_authenticated", False):
        return False
    return OAuthConnection.objects.usable().filter(approved_by=user,
                                                   application=application).exists()


# A registered client no person approved within this long is deleted (prune_unused_clients).
UNUSED_CLIENT_LIFETIME = timedelta(days=1)


def prune_unused_clients(now=None) -> int:
    """Delete the clients registered anonymously (``/oauth/register``: no owning user)
    more than a day ago that no person ever approved (no OAuthConnection, revoked or not,
    was ever made for them): registration is open to anyone, so unused ones would pile up.
    A client made in the admin (it has a user) is kept. Run by the worker now and then and
    by ``manage.py prune_oauth_clients``; the number deleted."""
    cutoff = (now or timezone.now()) - UNUSED_CLIENT_LIFETIME
    Application = get_application_model()  # noqa: N806 (a model class)
    _total, by_model = Application.objects.filter(
        user__isnull=True, created__lt=cutoff, synapse_connections__isnull=True).delete()
    return by_model.get(Application._meta.label, 0)


def token_checksum(token: str) -> str:
    """How DOT finds a token it stores hashed (COMPLIANT_BCP_RFC9700_TOKEN_STORAGE)."""
    return hashlib.sha256(token.encode()).hexdigest()


class SynapseOAuth2Validator(OAuth2Validator):
    """DOT's validator, with every code and token tied to its OAuthConnection.

    The consent view passes the connection it created as ``synapse_connection`` among
    the credentials (oauthlib sets them on its request); the code is tied to it here, and
    the tokens exchanged for that code, or for a refresh token of it, are too. A revoked
    connection's code or refresh token is refused."""

    def save_authorization_code(self, client_id, code, request, *args, **kwargs):
        grant = self._create_authorization_code(request, code)
        connection = getattr(request, "synapse_connection", None)
        if connection is None:  # only the consent view issues codes
            raise RuntimeError("An authorization code without its OAuth connection.")
        OAuthConnection.objects.filter(pk=connection.pk).update(grant=grant)

    def validate_code(self, client_id, code, client, request, *args, **kwargs):
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            return False
        return self._use_connection(
            request, OAuthConnection.objects.filter(grant__code=code,
                                                    grant__application=client).first())

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs):
        if not super().validate_refresh_token(refresh_token, client, request, *args,
                                              **kwargs):
            return False
        previous = request.refresh_token_instance.access_token_id
        return self._use_connection(
            request, None if previous is None
            else OAuthConnection.objects.filter(access_token_id=previous).first())

    @staticmethod
    def _use_connection(request, connection: OAuthConnection | None) -> bool:
        if connection is None or connection.revoked_at is not None:
            return False
        request.synapse_connection = connection
        return True

    def _save_bearer_token(self, token, request, *args, **kwargs):
        super()._save_bearer_token(token, request, *args, **kwargs)
        connection = getattr(request, "synapse_connection", None)
        if connection is None:
            return
        access = get_access_token_model().objects.get(
            token_checksum=token_checksum(token["access_token"]))
        # The code is spent (DOT deletes it next); the connection now rides on this token.
        OAuthConnection.objects.filter(pk=connection.pk).update(access_token=access,
                                                                 grant=None)
