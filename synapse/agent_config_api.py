"""``GET /mcp/config/autonomous-agent``: how an agent connects to this server (public, no
secrets), as synapse.agent_config builds it for the server's public origin."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from synapse.agent_config import MIND_KEY, OAUTH, agent_configuration
from synapse.api import SynapseAPIView
from synapse.origin import public_origin

# The same for every caller of one origin: a proxy or client may keep it a few minutes.
CACHE_SECONDS = 300


class SnippetSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["file", "command", "value"], help_text=(
        "file: the content of the file named in label; command: run it; value: paste it "
        "where the host asks."))
    label = serializers.CharField()
    language = serializers.ChoiceField(choices=["json", "toml", "sh", "text"])
    content = serializers.CharField(help_text=(
        "With this server's URL filled in; a key appears only as the placeholder mk_… or "
        "as the host's reference to the SYNAPSE_MIND_KEY variable."))


class VariantSerializer(serializers.Serializer):
    id = serializers.CharField()
    auth = serializers.ChoiceField(choices=[OAUTH, MIND_KEY])
    title = serializers.CharField()
    steps = serializers.ListField(child=serializers.CharField())
    snippets = SnippetSerializer(many=True)


class HostSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="claude-desktop, claude-code, codex, cursor, vscode, "
                                         "gemini-cli, chatgpt, generic")
    name = serializers.CharField()
    agent = serializers.CharField(help_text="The X-Synapse-Agent value its configurations send.")
    notes = serializers.ListField(child=serializers.CharField())
    variants = VariantSerializer(many=True)


class OAuthModeSerializer(serializers.Serializer):
    resource = serializers.URLField(help_text="The RFC 8707 resource tokens are issued for.")
    protected_resource_metadata = serializers.ListField(child=serializers.URLField())
    authorization_server_metadata = serializers.URLField()
    registration_endpoint = serializers.URLField()
    scopes = serializers.ListField(child=serializers.CharField())
    code_challenge_methods = serializers.ListField(child=serializers.CharField())
    grant_types = serializers.ListField(child=serializers.CharField())


class MindKeyModeSerializer(serializers.Serializer):
    header = serializers.CharField()
    format = serializers.CharField()
    placeholder = serializers.CharField()
    environment_variable = serializers.CharField()
    url_variable = serializers.CharField()
    url = serializers.URLField()
    where = serializers.CharField()


class AuthModesSerializer(serializers.Serializer):
    oauth = OAuthModeSerializer()
    mind_key = MindKeyModeSerializer()


class ProvenanceHeadersSerializer(serializers.Serializer):
    agent = serializers.CharField()
    instance = serializers.CharField()
    device = serializers.CharField()


class InstanceIdSerializer(serializers.Serializer):
    environment_variable = serializers.CharField()
    header = serializers.CharField()
    format = serializers.CharField()
    rules = serializers.ListField(child=serializers.CharField())
    python_client = serializers.CharField()
    http_hosts = serializers.CharField()


class AgentConfigurationSerializer(serializers.Serializer):
    origin = serializers.URLField()
    mcp_url = serializers.URLField()
    transport = serializers.CharField()
    auth = AuthModesSerializer()
    provenance_headers = ProvenanceHeadersSerializer()
    agent_instance_id = InstanceIdSerializer()
    hosts = HostSerializer(many=True)


class AgentConfigurationView(SynapseAPIView):
    # Public and the same for everyone: credentials, good or bad, are not looked at.
    authentication_classes = ()
    permission_classes = (AllowAny,)

    @extend_schema(operation_id="mcp_agent_config", tags=["mcp"],
                   responses={200: AgentConfigurationSerializer,
                              400: OpenApiResponse(description="Unknown query parameter "
                                                               "(error shape)")})
    def get(self, request):
        """How an agent connects: the MCP URL, OAuth and Mind Key authentication, the agent
        instance id, and ready configurations for Claude Desktop, Claude Code, Codex,
        Cursor, VS Code, Gemini CLI, ChatGPT and any streamable HTTP client, with this
        server's URL filled in. Public; it holds no secret (a key is only ever the
        placeholder mk_…)."""
        document = AgentConfigurationSerializer(agent_configuration(public_origin(request)))
        response = Response(document.data)
        response["Cache-Control"] = f"public, max-age={CACHE_SECONDS}"
        return response
