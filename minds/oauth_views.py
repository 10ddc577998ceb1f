"""The OAuth 2.1 endpoints an MCP host uses (docs/security.md, "OAuth").

Synapse's own: the metadata documents (RFC 9728, RFC 8414), client registration
(RFC 7591, on DOT's Application model) and the consent page (DOT's authorization view with
Synapse's form: a mind, read or write, paths). DOT's own: the token endpoint (behind
Synapse's rate limits) and revocation (RFC 7009), which answer in RFC 6749's error format,
as the protocol says.
"""

import base64
import binascii
import hashlib
import io
import time
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponse, JsonResponse
from django.utils.crypto import get_random_string
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.http import OAuth2ResponseRedirect
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView
from oauth2_provider.views import RevokeTokenView as DOTRevokeTokenView
from oauth2_provider.views import TokenView as DOTTokenView
from oauth2_provider.views.mixins import OAuthLibMixin
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error
from rest_framework.exceptions import ParseError
from rest_framework.throttling import BaseThrottle

from minds.access import Action, minds_for
from minds.forms import ConsentForm
from minds.models import OAuthConnection
from minds.oauth import (
    GRANT_TYPES,
    SCOPES,
    TOKEN_ENDPOINT_AUTH_METHODS,
    approved_by_person,
    authorization_server_metadata,
    is_loopback,
    protected_resource_metadata,
    redirect_uri_problem,
)
from minds.services import connection_create
from synapse.api import error_response
from synapse.origin import public_origin
from synapse.parsers import JSONParser
from synapse.text import validate_single_line
from synapse.throttling import wait_for

CLIENT_NAME_MAX_LENGTH = 100
MAX_REDIRECT_URIS = 10
REDIRECT_URI_MAX_LENGTH = 2000


def _public_document(request, document) -> HttpResponse:
    """A metadata document: public and credential-free, so a browser-based MCP client may
    read it from any origin (its preflight included: the SDK sends MCP-Protocol-Version)."""
    if request.method == "OPTIONS":
        response = HttpResponse(status=204)
        response["Access-Control-Allow-Methods"] = "GET, HEAD, OPTIONS"
        response["Access-Control-Allow-Headers"] = "MCP-Protocol-Version, Content-Type"
    elif request.method in ("GET", "HEAD"):
        response = JsonResponse(document(request))
        response["Cache-Control"] = "public, max-age=300"
    else:
        return error_response(405, "method_not_allowed", "A metadata document is read with "
                              "GET.", headers={"Allow": "GET, HEAD, OPTIONS"})
    response["Access-Control-Allow-Origin"] = "*"
    return response


def protected_resource_view(request):
    """GET /.well-known/oauth-protected-resource and …/mcp (RFC 9728)."""
    return _public_document(request, protected_resource_metadata)


def authorization_server_view(request):
    """GET /.well-known/oauth-authorization-server (RFC 8414)."""
    return _public_document(request, authorization_server_metadata)


def _with_iss(uri: str, issuer: str) -> str:
    """RFC 9207: the authorization response names its issuer (``iss``), so a client
    talking to several servers cannot be fooled into sending a code to the wrong one."""
    parts = urlsplit(uri)
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
             if name != "iss"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("iss", issuer)])))


def _oauth_error(error: str, description: str, credentials) -> OAuthToolkitError:
    return OAuthToolkitError(
        error=CustomOAuth2Error(error=error, description=description,
                                state=credentials.get("state")),
        redirect_uri=credentials.get("redirect_uri"))


@method_decorator(never_cache, name="dispatch")
class ConsentView(AuthorizationView):
    """GET/POST /oauth/authorize: a signed-in human approves (or denies) an OAuth client.

    DOT checks the client, its redirect URI, the scopes and PKCE; Synapse adds that the
    PKCE method is S256, that the resource (RFC 8707) is this server's origin (an absent
    one means it too), and what the human picks. Approving creates the OAuthConnection
    the code, and then the tokens, are tied to (minds.oauth.SynapseOAuth2Validator)."""

    template_name = "oauth/authorize.html"
    form_class = ConsentForm

    def get(self, request, *args, **kwargs):
        self.consent = None
        try:
            _scopes, credentials = self.validate_authorization_request(request)
            application = get_application_model().objects.get(
                client_id=credentials["client_id"])
        except OAuthToolkitError as error:
            return self.error_response(error, application=None)
        try:
            self._check(credentials, request.GET.getlist("resource"))
        except OAuthToolkitError as error:
            return self.error_response(error, application)
        try:
            return super().get(request, *args, **kwargs)
        except _ConsentNeeded:
            # DOT's shortcuts past the page (``approval_prompt=auto`` after an earlier
            # approval, an application marked ``skip_authorization``) would issue a code
            # with no mind, access or paths picked: the person always picks them here.
            return self.render_to_response(self.get_context_data(**self.oauth2_data))

    def error_response(self, error, application, **kwargs):
        """RFC 6749 §4.1.2.1 sends most errors back to the client's redirect URI. Without a
        person's action that makes this endpoint an open redirector to any URI anyone
        registered, so on a GET the error is sent back only to a client *approved by this
        person* (minds.oauth.approved_by_person); for any other client the person sees the
        error and the host it would send them to, with a link they may follow. Errors that
        must never redirect (an unknown client, a redirect URI it did not register) keep
        DOT's page; a POST is the person's own answer on the consent form."""
        if self.request.method != "GET" or isinstance(error, FatalClientError):
            return super().error_response(error, application, **kwargs)
        oauthlib_error = error.oauthlib_error
        client = application or get_application_model().objects.filter(
            client_id=self.request.GET.get("client_id", "")).first()
        if client is not None and approved_by_person(self.request.user, client):
            return super().error_response(error, application, **kwargs)
        # The URL DOT would redirect to (OAuthLibMixin builds it), shown as a link instead.
        _redirect, answer = OAuthLibMixin.error_response(self, error, **kwargs)
        link = _with_iss(answer["url"], public_origin(self.request))
        return self.render_to_response({
            "error": oauthlib_error, "error_redirect": link,
            "error_redirect_host": urlsplit(link).hostname or "",
            "client_name": (client.name or client.client_id) if client else "",
        }, status=oauthlib_error.status_code)

    def _check(self, credentials, resources: list[str]) -> None:
        if credentials.get("code_challenge_method") != "S256":
            raise _oauth_error("invalid_request",
                               "PKCE with code_challenge_method=S256 is required.", credentials)
        origin = public_origin(self.request)
        foreign = [resource for resource in resources if resource != origin]
        if foreign:
            raise _oauth_error(
                "invalid_target", f"This server issues tokens for {origin} only, not "
                                  f"{foreign[0]}.", credentials)

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs()
        requested = (self.oauth2_data.get("scopes")
                     or self.request.POST.get("scope", "").split())
        return {**kwargs, "user": self.request.user, "requested_scopes": requested}

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        data = {**self.request.POST.dict(), **self.oauth2_data}
        application = data.get("application") or get_application_model().objects.filter(
            client_id=data.get("client_id", "")).first()
        context.update({
            "application": application,
            "client_name": (application.name or application.client_id) if application else "",
            "redirect_host": urlsplit(data.get("redirect_uri") or "").hostname or "",
            "has_minds": minds_for(self.request.user, Action.MANAGE).exists(),
        })
        return context

    def form_invalid(self, form):
        response = super().form_invalid(form)
        response.status_code = 400
        return response

    def form_valid(self, form):
        self.consent = form.cleaned_data
        return super().form_valid(form)

    def create_authorization_response(self, request, scopes, credentials, allow):
        if not allow:
            return super().create_authorization_response(request, scopes, credentials, allow)
        if getattr(self, "consent", None) is None:  # DOT approving alone (ConsentView.get)
            raise _ConsentNeeded
        self._check(credentials, credentials.get("resource") or [])
        origin = public_origin(request)
        application = get_application_model().objects.get(client_id=credentials["client_id"])
        try:
            with transaction.atomic():
                connection = connection_create(
                    mind=self.consent["mind"], application=application,
                    approved_by=request.user,
                    write=self.consent["access"] == OAuthConnection.WRITE,
                    paths=self.consent["paths"], resource=origin)
                credentials = {**credentials, "resource": [origin],
                               "synapse_connection": connection}
                return super().create_authorization_response(
                    request, " ".join(connection.scopes), credentials, True)
        except ValidationError as error:  # the paths, checked again by the service
            raise _oauth_error("invalid_request", " ".join(error.messages),
                               credentials) from None

    def redirect(self, redirect_to, application):
        """Back to the client (a code or an error), naming the issuer; http only to a
        loopback address (RFC 8252), as registration allowed."""
        loopback = is_loopback(urlsplit(redirect_to).hostname or "")
        return OAuth2ResponseRedirect(_with_iss(redirect_to, public_origin(self.request)),
                                      ["https", "http"] if loopback else ["https"])


class _ConsentNeeded(Exception):  # noqa: N818 (a signal inside ConsentView, not an error)
    """DOT tried to approve without the consent form (ConsentView.get)."""


def _client_ident(request) -> str:
    return BaseThrottle().get_ident(request)


def _protocol_error(status: int, error: str, description: str, **headers) -> JsonResponse:
    """An RFC 6749 §5.2 error body (the token and revocation endpoints' format), never
    cached."""
    response = JsonResponse({"error": error, "error_description": description},
                            status=status)
    response["Cache-Control"] = "no-store"
    for name, value in headers.items():
        response[name] = value
    return response


def _basic_credentials(request) -> tuple[str, str] | None:
    """HTTP Basic's (client id, secret) of a token or revocation request (RFC 6749 §2.3.1:
    each form-encoded, then base64), or None without (or with unreadable) Basic."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, _, secret = decoded.partition(":")
    return unquote(user.replace("+", " ")), unquote(secret.replace("+", " "))


def _presented_client_id(request) -> str:
    """The client id a token request names: HTTP Basic's user or the ``client_id`` field;
    "" when it names none."""
    basic = _basic_credentials(request)
    return basic[0] if basic and basic[0] else request.POST.get("client_id", "")


def _nul_refusal(request) -> JsonResponse | None:
    """RFC 6749's ``invalid_request`` for a form field or Basic credential holding a NUL
    byte, which PostgreSQL text cannot hold (DOT would look it up and answer 500); None
    when there is none. The query string is checked for every route by the middleware."""
    values = [*request.POST.keys(), *(v for vs in request.POST.lists() for v in vs[1]),
              *(_basic_credentials(request) or ())]
    if not any("\x00" in value for value in values):
        return None
    return _protocol_error(400, "invalid_request", "The request contains a NUL byte.")


class RevokeTokenView(DOTRevokeTokenView):
    """POST /oauth/revoke: DOT's (RFC 7009), refusing a NUL byte first (_nul_refusal)."""

    def post(self, request, *args, **kwargs):
        return _nul_refusal(request) or super().post(request, *args, **kwargs)


class TokenView(DOTTokenView):
    """POST /oauth/token: DOT's token endpoint (authorization code and refresh token only:
    ``OAUTH2_SERVER_CLASS``), rate-limited first per client address (``oauth_token``),
    then per client id (``oauth_token_client``), before any code, token or secret is
    looked at. A refusal is RFC 6749 §5.2's JSON error with 429 and ``Retry-After``; a NUL
    byte in the request is ``invalid_request`` (_nul_refusal)."""

    def post(self, request, *args, **kwargs):
        refused = _nul_refusal(request)
        if refused is not None:
            return refused
        wait = wait_for("oauth_token", _client_ident(request))
        if wait is None:
            client_id = _presented_client_id(request)
            digest = hashlib.sha256(client_id.encode()).hexdigest()[:32]
            wait = wait_for("oauth_token_client", digest) if client_id else None
        if wait is not None:
            return _protocol_error(429, "slow_down", f"Too many token requests; try again in "
                                   f"{wait} seconds.", **{"Retry-After": str(wait)})
        return super().post(request, *args, **kwargs)


def _refuse(code: str, message: str, field: str | None = None, status: int = 400):
    return error_response(status, code, message, {field: [message]} if field else None,
                          headers={"Cache-Control": "no-store"})


@method_decorator(csrf_exempt, name="dispatch")
class RegisterView(View):
    """POST /oauth/register: dynamic client registration (RFC 7591), open to anyone, as
    MCP hosts need; rate-limited per client address (``oauth_register``).

    Accepted: redirect URIs that are https, or http to a loopback address (at most 10, of
    at most 2,000 characters each);
    a single-line ``client_name`` of at most 100 characters; grant types
    ``authorization_code`` (required) and ``refresh_token``; response type ``code``;
    ``token_endpoint_auth_method`` ``none`` (a public client, no secret),
    ``client_secret_basic`` (the default) or ``client_secret_post`` (a secret, shown in
    this answer only); scopes among memory:read and memory:write. Other metadata is
    ignored. Refusals are 400s in Synapse's error shape, ``code`` the RFC 7591 error
    (``invalid_redirect_uri``, ``invalid_client_metadata``)."""

    http_method_names = ["post", "options"]

    def http_method_not_allowed(self, request, *args, **kwargs):
        return error_response(405, "method_not_allowed", "Register a client with POST.",
                              headers={"Allow": "POST"})

    def post(self, request):
        wait = wait_for("oauth_register", _client_ident(request))
        if wait is not None:
            return error_response(429, "throttled", "Too many client registrations from "
                                  "this address; try again later.",
                                  headers={"Retry-After": str(wait)})
        try:
            # The parser of every DRF route: deep nesting is a 400, never a RecursionError.
            metadata = JSONParser().parse(io.BytesIO(request.body or b"null"))
        except ParseError as error:
            return _refuse("invalid_client_metadata", f"The body must be a JSON object "
                           f"({error.detail}).")
        if not isinstance(metadata, dict):
            return _refuse("invalid_client_metadata", "The body must be a JSON object.")
        problem = self._problem(metadata)
        if problem is not None:
            return _refuse(*problem)
        return self._register(metadata)

    @staticmethod
    def _problem(metadata: dict) -> tuple[str, str, str] | None:
        """(code, message, field) of the first rule ``metadata`` breaks, or None."""
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
            return ("invalid_redirect_uri", "redirect_uris must be a list of one or more URLs.",
                    "redirect_uris")
        if len(uris) > MAX_REDIRECT_URIS:
            return ("invalid_redirect_uri", f"At most {MAX_REDIRECT_URIS} redirect_uris.",
                    "redirect_uris")
        for uri in uris:
            if len(uri) > REDIRECT_URI_MAX_LENGTH:
                return ("invalid_redirect_uri", f"Each redirect URI may be at most "
                        f"{REDIRECT_URI_MAX_LENGTH} characters.", "redirect_uris")
            why = redirect_uri_problem(uri) if not any(c.isspace() for c in uri) else (
                f"{uri!r} must not contain whitespace.")
            if why is not None:
                return "invalid_redirect_uri", why, "redirect_uris"
        name = metadata.get("client_name", "")
        if not isinstance(name, str) or len(name) > CLIENT_NAME_MAX_LENGTH:
            return ("invalid_client_metadata",
                    f"client_name must be text of at most {CLIENT_NAME_MAX_LENGTH} characters.",
                    "client_name")
        try:
            validate_single_line(name)
        except ValidationError as error:
            return "invalid_client_metadata", f"client_name: {error.messages[0]}", "client_name"
        grants = metadata.get("grant_types", GRANT_TYPES)
        if (not isinstance(grants, list) or "authorization_code" not in grants
                or any(grant not in GRANT_TYPES for grant in grants)):
            return ("invalid_client_metadata", "grant_types may be authorization_code "
                    "(required) and refresh_token only.", "grant_types")
        if metadata.get("response_types", ["code"]) != ["code"]:
            return "invalid_client_metadata", "response_types must be [\"code\"].", \
                "response_types"
        method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in TOKEN_ENDPOINT_AUTH_METHODS:
            return ("invalid_client_metadata", "token_endpoint_auth_method must be one of "
                    + ", ".join(TOKEN_ENDPOINT_AUTH_METHODS) + ".", "token_endpoint_auth_method")
        scope = metadata.get("scope", "")
        if not isinstance(scope, str) or any(s not in SCOPES for s in scope.split()):
            return ("invalid_client_metadata", "scope may name " + " and ".join(SCOPES)
                    + " only.", "scope")
        return None

    @staticmethod
    def _register(metadata: dict) -> JsonResponse:
        Application = get_application_model()  # noqa: N806 (a model class)
        method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
        public = method == "none"
        secret = "" if public else get_random_string(64)
        application = Application(
            name=metadata.get("client_name", ""),
            redirect_uris=" ".join(metadata["redirect_uris"]),
            client_type=Application.CLIENT_PUBLIC if public else Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            client_secret=secret, algorithm=Application.NO_ALGORITHM)
        # Not Application.full_clean(): its redirect rule is DOT's https-only one, and every
        # field has been checked above by Synapse's rules (loopback http besides).
        application.save()
        body = {
            "client_id": application.client_id,
            "client_id_issued_at": int(time.time()),
            "client_name": application.name,
            "redirect_uris": metadata["redirect_uris"],
            "grant_types": metadata.get("grant_types", GRANT_TYPES),
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "scope": metadata.get("scope") or " ".join(SCOPES),
        }
        if not public:
            # Shown once: DOT keeps only a hash of it.
            body.update(client_secret=secret, client_secret_expires_at=0)
        response = JsonResponse(body, status=201)
        response["Cache-Control"] = "no-store"
        return response
