"""How an agent connects to this server: the MCP URL, the two ways to authenticate, the
agent instance id, and ready configurations for each MCP host, built from the public origin.

The one place these are written: ``GET /mcp/config/autonomous-agent`` serves them, the
"Connect an agent" page renders them (with a new key filled in), and docs/agents.md shows
them for ``https://synapse.example.com`` (a test checks each snippet there is this one).
"""

import json
from dataclasses import dataclass, replace

from synapse.provenance import AGENT_HEADER, DEVICE_HEADER, INSTANCE_HEADER

MCP_PATH = "/mcp"
# Fixed by the OAuth server (issue 15): RFC 9728, RFC 8414, RFC 7591 routes and scopes.
PROTECTED_RESOURCE_PATHS = ("/.well-known/oauth-protected-resource/mcp",
                            "/.well-known/oauth-protected-resource")
AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server"
REGISTRATION_PATH = "/oauth/register"
SCOPES = ("memory:read", "memory:write")
CODE_CHALLENGE_METHODS = ("S256",)
MIND_KEY_VARIABLE = "SYNAPSE_MIND_KEY"
INSTANCE_VARIABLE = "SYNAPSE_AGENT_INSTANCE_ID"
# Where a configuration needs the key itself: the one string the human (or the Connect page,
# right after creating a key) replaces. Never a real key: the endpoint is public.
KEY_PLACEHOLDER = "mk_…"
# The origin docs/agents.md shows the configurations for.
DOCS_ORIGIN = "https://synapse.example.com"

OAUTH = "oauth"
MIND_KEY = "mind_key"


@dataclass(frozen=True)
class Snippet:
    """One thing to copy: a file's content, a command to run, or a value to paste."""

    kind: str  # "file" | "command" | "value"
    label: str  # what it is, or where it goes
    language: str  # "json" | "toml" | "sh" | "text"
    content: str


@dataclass(frozen=True)
class Variant:
    """One way to connect a host: its authentication, the steps, the snippets."""

    id: str
    auth: str  # OAUTH | MIND_KEY
    title: str
    steps: tuple[str, ...]
    snippets: tuple[Snippet, ...]


@dataclass(frozen=True)
class Host:
    id: str
    name: str
    agent: str  # the X-Synapse-Agent value its configurations send
    notes: tuple[str, ...]
    variants: tuple[Variant, ...]


def _json(document: dict) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def _export_key() -> Snippet:
    return Snippet("command", "Terminal: set the key in the environment the host starts from",
                   "sh", f'export {MIND_KEY_VARIABLE}="{KEY_PLACEHOLDER}"')


def _claude_desktop(mcp_url: str) -> Host:
    agent = "claude-desktop"
    location = ("claude_desktop_config.json — macOS: ~/Library/Application Support/Claude/"
                "claude_desktop_config.json; Windows: %APPDATA%\\Claude\\"
                "claude_desktop_config.json")
    edit = ("Open Settings → Developer → Edit Config (it opens claude_desktop_config.json) "
            "and merge this into it; keep any other servers under mcpServers.")
    bridge = ("mcp-remote (a Node.js bridge, run with npx: Node.js must be installed) "
              "connects Claude Desktop, which starts local commands, to the MCP URL.")
    return Host(id="claude-desktop", name="Claude Desktop", agent=agent, notes=(
        "claude_desktop_config.json starts local (stdio) servers only; a remote server is "
        "added as a connector, or through the mcp-remote bridge.",
    ), variants=(
        Variant("oauth-connector", OAUTH, "OAuth: add a custom connector", steps=(
            "Open Settings → Connectors → Add custom connector (the menu names vary with "
            "the version and plan: check Claude's help if yours differ).",
            f"Name it Synapse and give the MCP URL: {mcp_url}",
            "Connect: your browser opens this server's consent page; sign in, pick the mind "
            "and the scopes, and approve.",
            "Claude reaches custom connectors from Anthropic's servers, not from your "
            "computer: the URL must be reachable from the internet over HTTPS. For a server "
            "on localhost or a private network, use the mcp-remote configuration below.",
        ), snippets=(Snippet("value", "MCP URL", "text", mcp_url),)),
        Variant("oauth-mcp-remote", OAUTH, "OAuth through mcp-remote", steps=(
            edit, bridge,
            "Restart Claude Desktop: mcp-remote opens your browser on this server's consent "
            "page the first time; approve, and it keeps the tokens (in ~/.mcp-auth).",
        ), snippets=(Snippet("file", location, "json", _json({"mcpServers": {"synapse": {
            "command": "npx",
            "args": ["-y", "mcp-remote", mcp_url, "--header", f"{AGENT_HEADER}:{agent}"],
        }}})),)),
        Variant("mind-key", MIND_KEY, "Mind Key through mcp-remote", steps=(
            edit, bridge,
            f"Replace {KEY_PLACEHOLDER} with the key (Claude Desktop does not expand "
            "environment variables in this file), save, and restart Claude Desktop.",
        ), snippets=(Snippet("file", location, "json", _json({"mcpServers": {"synapse": {
            "command": "npx",
            "args": ["-y", "mcp-remote", mcp_url, "--header", "Authorization:${SYNAPSE_AUTH}",
                     "--header", f"{AGENT_HEADER}:{agent}"],
            "env": {"SYNAPSE_AUTH": f"Bearer {KEY_PLACEHOLDER}"},
        }}})),)),
    ))


def _claude_code(mcp_url: str) -> Host:
    agent = "claude-code"
    return Host(id="claude-code", name="Claude Code", agent=agent, notes=(
        "claude mcp add stores the server for this project only unless given "
        "--scope user (every project) or --scope project (.mcp.json, shared).",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth", steps=(
            "Add the server (in the project's folder):",
            "Start claude, type /mcp, pick synapse and choose Authenticate: your browser "
            "opens this server's consent page; approve.",
        ), snippets=(Snippet("command", "Terminal", "sh",
                             f"claude mcp add --transport http synapse {mcp_url} \\\n"
                             f'  --header "{AGENT_HEADER}: {agent}"'),)),
        Variant("mind-key", MIND_KEY, "Mind Key", steps=(
            "Add the server with the key as a header (the shell puts the key in; Claude "
            "Code keeps it in ~/.claude.json):",
            "Check with claude mcp list, or /mcp inside a session.",
        ), snippets=(_export_key(), Snippet(
            "command", "Terminal", "sh",
            f"claude mcp add --transport http synapse {mcp_url} \\\n"
            f'  --header "Authorization: Bearer ${MIND_KEY_VARIABLE}" \\\n'
            f'  --header "{AGENT_HEADER}: {agent}"'))),
        Variant("mind-key-project", MIND_KEY, "Mind Key, shared with a project (.mcp.json)",
                steps=(
            "Put .mcp.json at the project's root. Claude Code expands ${…} from the "
            "environment when it starts, so the file holds no key and can be committed.",
            f"Export {MIND_KEY_VARIABLE} before starting claude; Claude Code asks once "
            "whether to trust the project's servers.",
        ), snippets=(_export_key(), Snippet("file", ".mcp.json (the project's root)", "json",
                                            _json({"mcpServers": {"synapse": {
            "type": "http", "url": mcp_url,
            "headers": {"Authorization": f"Bearer ${{{MIND_KEY_VARIABLE}}}",
                        AGENT_HEADER: agent},
        }}})))),
    ))


def _codex(mcp_url: str) -> Host:
    agent = "codex"
    location = "~/.codex/config.toml (or .codex/config.toml in a trusted project)"
    table = (f"[mcp_servers.synapse]\nurl = {json.dumps(mcp_url)}\n")
    headers = f'http_headers = {{ "{AGENT_HEADER}" = "{agent}" }}\n'
    return Host(id="codex", name="Codex", agent=agent, notes=(
        "Streamable HTTP servers and codex mcp login need a recent Codex; older versions "
        "also needed experimental_use_rmcp_client = true at the top of config.toml. Check "
        "codex mcp --help for login.",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth", steps=(
            "Add the server to config.toml:",
            "Run codex mcp login synapse: your browser opens this server's consent page; "
            "approve, and Codex keeps the tokens.",
        ), snippets=(Snippet("file", location, "toml", table + headers),
                     Snippet("command", "Terminal", "sh", "codex mcp login synapse"))),
        Variant("mind-key", MIND_KEY, "Mind Key", steps=(
            f"Add the server to config.toml: Codex sends the value of {MIND_KEY_VARIABLE} "
            "as the bearer token, so the file holds no key.",
            f"Export {MIND_KEY_VARIABLE} in the shell you start codex from.",
        ), snippets=(_export_key(), Snippet(
            "file", location, "toml",
            table + f'bearer_token_env_var = "{MIND_KEY_VARIABLE}"\n' + headers))),
    ))


def _cursor(mcp_url: str) -> Host:
    agent = "cursor"
    location = "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)"
    return Host(id="cursor", name="Cursor", agent=agent, notes=(
        "This server accepts OAuth redirects to https addresses and to loopback http "
        "addresses only, as the MCP authorization specification asks. A Cursor version "
        "that registers a cursor:// callback is refused (invalid_redirect_uri): use the "
        "Mind Key variant with it.",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth", steps=(
            "Add the server to mcp.json:",
            "In Cursor Settings → MCP (Tools & Integrations in recent versions), synapse "
            "asks to log in: click it, and approve on this server's consent page.",
        ), snippets=(Snippet("file", location, "json", _json({"mcpServers": {"synapse": {
            "url": mcp_url, "headers": {AGENT_HEADER: agent}}}})),)),
        Variant("mind-key", MIND_KEY, "Mind Key", steps=(
            "Add the server to mcp.json: Cursor fills in ${env:…} from its environment, "
            "so the file holds no key.",
            f"Export {MIND_KEY_VARIABLE} and start Cursor from that shell (cursor .): an "
            "app started from the dock or the start menu does not see your shell's "
            "variables.",
        ), snippets=(_export_key(), Snippet("file", location, "json", _json({"mcpServers": {
            "synapse": {"url": mcp_url, "headers": {
                "Authorization": f"Bearer ${{env:{MIND_KEY_VARIABLE}}}", AGENT_HEADER: agent}},
        }})))),
    ))


def _vscode(mcp_url: str) -> Host:
    agent = "vscode"
    location = (".vscode/mcp.json (one workspace), or the command MCP: Open User "
                "Configuration (every workspace)")
    return Host(id="vscode", name="VS Code (GitHub Copilot)", agent=agent, notes=(
        "VS Code's mcp.json lists servers under \"servers\" (not \"mcpServers\"); Copilot "
        "Chat uses their tools in agent mode.",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth", steps=(
            "Add the server to mcp.json:",
            "Start it (the Start action above its entry, or MCP: List Servers); VS Code "
            "asks to sign in: allow it and approve on this server's consent page.",
        ), snippets=(Snippet("file", location, "json", _json({"servers": {"synapse": {
            "type": "http", "url": mcp_url, "headers": {AGENT_HEADER: agent}}}})),)),
        Variant("mind-key", MIND_KEY, "Mind Key", steps=(
            "Add the server to mcp.json: the key is an input VS Code asks for once and "
            "keeps in its secret storage, so the file holds no key.",
            "Start the server and paste the key when VS Code asks for it.",
        ), snippets=(
            Snippet("file", location, "json", _json({
                "inputs": [{"type": "promptString", "id": "synapse-mind-key",
                            "description": "Synapse Mind Key", "password": True}],
                "servers": {"synapse": {"type": "http", "url": mcp_url, "headers": {
                    "Authorization": "Bearer ${input:synapse-mind-key}",
                    AGENT_HEADER: agent}}},
            })),
            Snippet("value", "The key, when VS Code asks for “Synapse Mind Key”", "text",
                    KEY_PLACEHOLDER),
        )),
    ))


def _gemini_cli(mcp_url: str) -> Host:
    agent = "gemini-cli"
    location = "~/.gemini/settings.json (every project) or .gemini/settings.json (one project)"
    return Host(id="gemini-cli", name="Gemini CLI", agent=agent, notes=(
        "Gemini CLI takes a streamable HTTP server as httpUrl (url is for SSE).",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth", steps=(
            "Add the server to settings.json:",
            "Start gemini and run /mcp auth synapse: your browser opens this server's "
            "consent page; approve.",
        ), snippets=(Snippet("file", location, "json", _json({"mcpServers": {"synapse": {
            "httpUrl": mcp_url, "headers": {AGENT_HEADER: agent}}}})),
            Snippet("command", "Inside gemini", "text", "/mcp auth synapse"))),
        Variant("mind-key", MIND_KEY, "Mind Key", steps=(
            "Add the server to settings.json: Gemini CLI expands ${…} from the "
            "environment, so the file holds no key.",
            f"Export {MIND_KEY_VARIABLE} in the shell you start gemini from.",
        ), snippets=(_export_key(), Snippet("file", location, "json", _json({"mcpServers": {
            "synapse": {"httpUrl": mcp_url, "headers": {
                "Authorization": f"Bearer ${{{MIND_KEY_VARIABLE}}}", AGENT_HEADER: agent}},
        }})))),
    ))


def _chatgpt(mcp_url: str) -> Host:
    return Host(id="chatgpt", name="ChatGPT (connectors)", agent="chatgpt", notes=(
        "ChatGPT sends no custom header, so it connects with OAuth only.",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth: a custom connector", steps=(
            "In ChatGPT, open Settings → Apps & Connectors → Advanced settings and turn on "
            "developer mode (the names and the plans that have it change: check ChatGPT's "
            "help if yours differ).",
            "Create a connector: a name (Synapse), the MCP URL below, and OAuth as the "
            "authentication.",
            "Create it: ChatGPT opens this server's consent page; approve.",
            "ChatGPT reaches the server from OpenAI's servers: the URL must be reachable from "
            "the internet over HTTPS.",
        ), snippets=(Snippet("value", "MCP URL", "text", mcp_url),)),
    ))


def _generic(origin: str, mcp_url: str) -> Host:
    agent = "my-agent"
    tools_list = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
    return Host(id="generic", name="Any streamable HTTP client", agent=agent, notes=(
        "Stateless streamable HTTP: each POST carries one JSON-RPC message and gets one "
        "JSON answer; send Accept: application/json, text/event-stream.",
        f"Name your agent in {AGENT_HEADER} (1–64 characters of A-Z a-z 0-9 . _ -).",
    ), variants=(
        Variant("oauth", OAUTH, "OAuth (any MCP client with authorization support)", steps=(
            "A request without a token gets 401 with WWW-Authenticate: Bearer "
            "resource_metadata=\"…\" naming the protected resource metadata.",
            "It names the authorization server, whose metadata gives the authorization, "
            "token and registration endpoints.",
            "Register the client (dynamic client registration), then run the authorization "
            "code flow with PKCE (S256), resource set to the server's origin and the scopes "
            "memory:read memory:write; a human approves on the consent page.",
            "Send the access token as Authorization: Bearer …; refresh it with the refresh "
            "token (each refresh token works once).",
        ), snippets=(Snippet("value", "MCP URL", "text", mcp_url),
                     Snippet("command", "Terminal: the protected resource metadata", "sh",
                             f"curl -s {origin}{PROTECTED_RESOURCE_PATHS[0]}"))),
        Variant("mind-key", MIND_KEY, "Mind Key", steps=(
            "Send the key as Authorization: Bearer mk_… on every request (never in the URL: "
            "/mcp refuses ?key=).",
        ), snippets=(_export_key(), Snippet(
            "command", "Terminal: list the tools", "sh",
            f"curl -s {mcp_url} \\\n"
            f'  -H "Authorization: Bearer ${MIND_KEY_VARIABLE}" \\\n'
            f'  -H "{AGENT_HEADER}: {agent}" \\\n'
            '  -H "Content-Type: application/json" \\\n'
            '  -H "Accept: application/json, text/event-stream" \\\n'
            f"  -d '{tools_list}'"))),
    ))


def hosts(origin: str) -> tuple[Host, ...]:
    """Every host's configurations for the server at ``origin`` (no trailing slash)."""
    mcp_url = origin + MCP_PATH
    return (_claude_desktop(mcp_url), _claude_code(mcp_url), _codex(mcp_url),
            _cursor(mcp_url), _vscode(mcp_url), _gemini_cli(mcp_url), _chatgpt(mcp_url),
            _generic(origin, mcp_url))


def with_key(configured: tuple[Host, ...], plaintext: str) -> tuple[Host, ...]:
    """``configured`` with ``plaintext`` in place of the key placeholder in the snippets of
    the Mind Key variants (for the page that has just created that key, once)."""
    def fill(variant: Variant) -> Variant:
        if variant.auth != MIND_KEY:
            return variant
        return replace(variant, snippets=tuple(
            replace(snippet, content=snippet.content.replace(KEY_PLACEHOLDER, plaintext))
            for snippet in variant.snippets))

    return tuple(replace(host, variants=tuple(fill(v) for v in host.variants))
                 for host in configured)


def instance_id_guidance() -> dict:
    return {
        "environment_variable": INSTANCE_VARIABLE,
        "header": INSTANCE_HEADER,
        "format": "1–64 characters of A-Z a-z 0-9 . _ -",
        "rules": [
            "One id per installation of an agent (this laptop's Claude Code, the CI "
            "runner's Codex): stable across restarts, never regenerated per start or per "
            "session.",
            "Not a secret: it says which installation wrote a memory, it grants nothing.",
            "Kept out of git: a repository's configuration is shared by every clone, and "
            "each clone is another installation.",
            "Made once, for example: python3 -c \"import secrets; "
            "print(secrets.token_hex(8))\".",
        ],
        "python_client": (
            f"synapse-mcp and the synapse CLI send {INSTANCE_VARIABLE} when set; otherwise "
            "16 lower-case hex characters made on first use and kept in the file "
            "agent_instance_id of the config folder ($SYNAPSE_CONFIG_DIR, else "
            "$XDG_CONFIG_HOME/synapse, else ~/.config/synapse; the folder 0700, the file "
            "0600), and never made again while the file is there."),
        "http_hosts": (
            f"A host connected to the MCP URL sends {INSTANCE_HEADER} only when its "
            "configuration adds that header with the id; it is optional."),
    }


def agent_configuration(origin: str) -> dict:
    """The document ``GET /mcp/config/autonomous-agent`` serves for ``origin``."""
    mcp_url = origin + MCP_PATH
    return {
        "origin": origin,
        "mcp_url": mcp_url,
        "transport": "streamable-http",
        "auth": {
            OAUTH: {
                "resource": origin,
                "protected_resource_metadata": [origin + path
                                                for path in PROTECTED_RESOURCE_PATHS],
                "authorization_server_metadata": origin + AUTHORIZATION_SERVER_PATH,
                "registration_endpoint": origin + REGISTRATION_PATH,
                "scopes": list(SCOPES),
                "code_challenge_methods": list(CODE_CHALLENGE_METHODS),
                "grant_types": ["authorization_code", "refresh_token"],
            },
            MIND_KEY: {
                "header": "Authorization",
                "format": f"Bearer {KEY_PLACEHOLDER}",
                "placeholder": KEY_PLACEHOLDER,
                "environment_variable": MIND_KEY_VARIABLE,
                "url_variable": "SYNAPSE_URL",
                "url": origin,
                "where": ("A mind's owner creates one on the mind's Connect or Keys page in "
                          "the web UI, or with POST /minds/{mind_id}/keys; it is shown once."),
            },
        },
        "provenance_headers": {"agent": AGENT_HEADER, "instance": INSTANCE_HEADER,
                               "device": DEVICE_HEADER},
        "agent_instance_id": instance_id_guidance(),
        "hosts": [host_document(host) for host in hosts(origin)],
    }


def host_document(host: Host) -> dict:
    return {
        "id": host.id, "name": host.name, "agent": host.agent, "notes": list(host.notes),
        "variants": [{
            "id": variant.id, "auth": variant.auth, "title": variant.title,
            "steps": list(variant.steps),
            "snippets": [{"kind": s.kind, "label": s.label, "language": s.language,
                          "content": s.content} for s in variant.snippets],
        } for variant in host.variants],
    }
