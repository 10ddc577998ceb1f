"""OpenAPI bits shared by the routes: the mind parameter, human auth, the error-response table,
and the schema class that gives every operation its role line."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.permissions import AllowAny

from minds.access import least_role
from synapse.api.views import mind_action

MIND_PARAMETER = OpenApiParameter(
    "mind", str, description="The mind to act on (humans with a JWT or session only; a Mind "
    "Key always acts on its own mind).", required=False)

# A JWT, or a session (with CSRF); Mind Keys authenticate but are refused (403).
HUMAN_AUTH = [{"jwtAuth": []}, {"cookieAuth": []}]


def error_responses(*, not_found: str,
                    forbidden: str = "Not allowed for these credentials") -> dict:
    """The 400/401/403/404 answers of a route (all in the one error shape), as documented."""
    return {400: OpenApiResponse(description="Invalid input (error shape)"),
            401: OpenApiResponse(description="Missing or wrong credentials"),
            403: OpenApiResponse(description=forbidden),
            404: OpenApiResponse(description=not_found)}


CONFLICT = {409: OpenApiResponse(description="Conflicts with the current state (error shape)")}
VERSION_CONFLICT = {409: OpenApiResponse(
    description="version_conflict: the memory changed since the version sent (error shape)")}


ROLE_PREFIX = "Role: "
ANY_SIGNED_IN = "any signed-in person (no role on a mind involved)"
NO_SIGN_IN = "none (no sign-in needed)"


def role_needed(view, method: str) -> str:
    """Who may call an operation, in words: the least role on the mind it acts on, from the
    same declaration the check reads (synapse.api.views.mind_action, minds.access), or
    that it names no mind (any signed-in person) or needs no sign-in."""
    action = mind_action(view, method)
    if action is not None:
        return least_role(action)
    if not view.authentication_classes or any(
            issubclass(permission, AllowAny) for permission in view.permission_classes):
        return NO_SIGN_IN
    return ANY_SIGNED_IN


class RoleAutoSchema(AutoSchema):
    """drf-spectacular's schema, with each operation's role on its mind as the last line
    of its description ("Role: viewer or above", "editor or above", "owner"; docs/teams.md)."""

    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        if operation is not None:
            line = ROLE_PREFIX + role_needed(self.view, self.method) + "."
            description = operation.get("description", "").rstrip()
            operation["description"] = f"{description}\n\n{line}" if description else line
        return operation
