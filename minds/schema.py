"""OpenAPI description of Mind Key authentication (drf-spectacular extension)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class MindKeyScheme(OpenApiAuthenticationExtension):
    target_class = "minds.authentication.MindKeyAuthentication"
    name = ["MindKey", "MindKeyQuery"]

    def get_security_requirement(self, auto_schema):
        # Either form is enough (OR), not both.
        return [{"MindKey": []}, {"MindKeyQuery": []}]

    def get_security_definition(self, auto_schema):
        return [
            {"type": "http", "scheme": "bearer", "bearerFormat": "mk_…",
             "description": "A Mind Key: `Authorization: Bearer mk_…`."},
            {"type": "apiKey", "in": "query", "name": "key",
             "description": "A Mind Key as `?key=mk_…` (never logged unredacted)."},
        ]
