"""The root URLconf: the web UI, the admin, the OpenAPI schema and docs, and both APIs."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from minds import oauth_views
from synapse.agent_config_api import AgentConfigurationView
from synapse.api.errors import mcp_not_served
from synapse.metrics_view import metrics_view

handler404 = "synapse.api.json_handler404"

handler500 = "synapse.api.json_handler500"

urlpatterns = [
    path("", RedirectView.as_view(url="/ui/", permanent=False)),
    path("ui/", include("synapse.ui_urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    # OAuth 2.1 for MCP hosts (minds.oauth_views; docs/security.md, "OAuth").
    path(".well-known/oauth-protected-resource", oauth_views.protected_resource_view,
         name="oauth-protected-resource"),
    path(".well-known/oauth-protected-resource/mcp", oauth_views.protected_resource_view,
         name="oauth-protected-resource-mcp"),
    path(".well-known/oauth-authorization-server", oauth_views.authorization_server_view,
         name="oauth-authorization-server"),
    path("oauth/authorize", oauth_views.ConsentView.as_view(), name="oauth-authorize"),
    path("oauth/token", oauth_views.TokenView.as_view(), name="oauth-token"),
    path("oauth/register", oauth_views.RegisterView.as_view(), name="oauth-register"),
    path("oauth/revoke", oauth_views.RevokeTokenView.as_view(), name="oauth-revoke"),
    # Reached only where Django serves /mcp itself: a gthread (WSGI) node; on the default
    # server synapse.asgi hands /mcp to MCP before Django sees it.
    path("mcp", mcp_not_served),
    path("mcp/", mcp_not_served),
    # Django serves it: synapse.asgi hands MCP exactly /mcp and /mcp/, nothing below them.
    path("mcp/config/autonomous-agent", AgentConfigurationView.as_view(),
         name="mcp-agent-config"),
    # Prometheus (docs/scaling.md, "Metrics"): 404 unless SYNAPSE_METRICS_TOKEN is set.
    path("metrics", metrics_view, name="metrics"),
    path("", include("minds.api.urls")),
    path("", include("memories.api.urls")),
]
