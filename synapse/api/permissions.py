"""Who may call what: any principal (read-only keys read only), humans only, plaintext."""

from rest_framework.permissions import BasePermission

from minds.authentication import is_agent, www_authenticate
from minds.models import OAuthConnection
from synapse.api.errors import InsufficientScope


class MindAccess(BasePermission):
    """Any authenticated principal; a read-only Mind Key, or an OAuth token without
    ``memory:write``, may only read (the token gets a 403 ``insufficient_scope``)."""

    message = "This Mind Key is read-only."

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in ("GET", "HEAD", "OPTIONS") or not is_agent(request.user):
            return True
        if request.user.can_write:
            return True
        if request.user.connection is not None:
            raise InsufficientScope(
                "This OAuth connection is read-only (memory:read): writing needs "
                "memory:write, which the mind's owner grants by connecting the app again.",
                www_authenticate(request, error="insufficient_scope",
                                 scope=OAuthConnection.WRITE))
        return False


class HumanOnly(BasePermission):
    """A human (JWT or session); Mind Keys and OAuth tokens are refused with 403."""

    message = "Only a human may do this; Mind Keys and OAuth tokens cannot."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and not is_agent(request.user))


class PlaintextForHumans(BasePermission):
    """Credentials plaintext leaves in a diff or an export (``include_credentials``) only
    when a human asks for it; Mind Keys get them redacted and are refused the plaintext."""

    message = ("Only a human may export credentials in plaintext; Mind Keys get them "
               "redacted.")

    def has_permission(self, request, view):
        # view.query validates the parameters first: a malformed one is a 400 as before.
        return not (view.query.get("include_credentials") and is_agent(request.user))


class WholeMind(BasePermission):
    """Routes about the whole mind (its audit log, compaction, an import of a backup):
    a path-scoped Mind Key (MindKey.paths) is refused with 403 ``path_scoped_key``."""

    message = ("This Mind Key is limited to some paths; this route covers the whole mind: "
               "use a key without paths.")
    code = "path_scoped_key"

    def has_permission(self, request, view):
        return not (is_agent(request.user) and request.user.reach)
