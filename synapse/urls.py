"""The root URLconf: the web UI, the admin, the OpenAPI schema and docs, and both APIs."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from synapse.agent_config_api import AgentConfigurationView

handler404 = "synapse.api.json_handler404"
handler500 = "synapse.api.json_handler500"

urlpatterns = [
    path("", RedirectView.as_view(url="/ui/", permanent=False)),
    path("ui/", include("synapse.ui_urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    # Django serves it: synapse.asgi hands MCP exactly /mcp and /mcp/, nothing below them.
    path("mcp/config/autonomous-agent", AgentConfigurationView.as_view(),
         name="mcp-agent-config"),
    path("", include("minds.api.urls")),
    path("", include("memories.api.urls")),
]
