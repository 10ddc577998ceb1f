"""OpenAPI bits shared by the routes: the mind parameter, human auth, the error-response table."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

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
