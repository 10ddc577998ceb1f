"""GET /mcp/config/autonomous-agent: every host's configuration with this server's URL, no
secret, public (through DRF and through synapse.asgi, beside /mcp); and docs/agents.md
shows exactly what synapse.agent_config builds."""

import asyncio
import json
import re
from pathlib import Path

import httpx
import pytest
from rest_framework.test import APIClient

from minds.services import key_issue
from synapse.agent_config import (
    DOCS_ORIGIN,
    KEY_PLACEHOLDER,
    MIND_KEY,
    OAUTH,
    hosts,
    with_key,
)
from tests.conftest import key_client

pytestmark = pytest.mark.django_db

ROUTE = "/mcp/config/autonomous-agent"
AGENTS_MD = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
REQUIRED_HOSTS = {"claude-desktop", "claude-code", "codex", "cursor", "vscode", "generic"}
# A Mind Key's shape (mk_ + 52 base62 characters), or anything that starts like one.
KEY_LIKE = re.compile(r"mk_[A-Za-z0-9]{4,}")
URL = re.compile(r"https?://[^\s\"'\\]+")


def configuration(client=None, **extra) -> dict:
    response = (client or APIClient()).get(ROUTE, **extra)
    assert response.status_code == 200, response.content[:300]
    return response.json()


def snippets(document: dict):
    for host in document["hosts"]:
        for variant in host["variants"]:
            for snippet in variant["snippets"]:
                yield host, variant, snippet


def test_every_host_has_its_configurations_with_the_mcp_url_of_the_request():
    document = configuration(HTTP_HOST="localhost:8123")
    origin = "http://localhost:8123"
    assert document["mcp_url"] == f"{origin}/mcp"
    assert [host["id"] for host in document["hosts"]] == [
        "claude-desktop", "claude-code", "codex", "cursor", "vscode", "gemini-cli", "chatgpt",
        "generic"]
    for host in document["hosts"]:
        kinds = {variant["auth"] for variant in host["variants"]}
        # ChatGPT cannot send a header: OAuth only. Every other host has both.
        assert kinds == ({OAUTH} if host["id"] == "chatgpt" else {OAUTH, MIND_KEY}), host["id"]
        contents = "\n".join(snippet["content"] for variant in host["variants"]
                             for snippet in variant["snippets"])
        assert f"{origin}/mcp" in contents, host["id"]
    assert {host["id"] for host in document["hosts"]} >= REQUIRED_HOSTS
    # Every URL handed out is this server's.
    text = json.dumps(document)
    assert {url for url in URL.findall(text) if not url.startswith(origin)} == set()
    oauth = document["auth"]["oauth"]
    assert oauth == {
        "resource": origin,
        "protected_resource_metadata": [
            f"{origin}/.well-known/oauth-protected-resource/mcp",
            f"{origin}/.well-known/oauth-protected-resource"],
        "authorization_server_metadata": f"{origin}/.well-known/oauth-authorization-server",
        "registration_endpoint": f"{origin}/oauth/register",
        "scopes": ["memory:read", "memory:write"], "code_challenge_methods": ["S256"],
        "grant_types": ["authorization_code", "refresh_token"]}
    mind_key = document["auth"]["mind_key"]
    assert (mind_key["header"], mind_key["format"], mind_key["environment_variable"]) == (
        "Authorization", "Bearer mk_…", "SYNAPSE_MIND_KEY")
    assert document["agent_instance_id"]["environment_variable"] == "SYNAPSE_AGENT_INSTANCE_ID"


def test_the_snippets_are_valid_json_and_toml_for_their_hosts():
    import tomllib

    document = configuration()
    checked = 0
    for host, variant, snippet in snippets(document):
        if snippet["language"] == "json":
            parsed = json.loads(snippet["content"])
            servers = parsed["servers"] if host["id"] == "vscode" else parsed["mcpServers"]
            assert list(servers) == ["synapse"], (host["id"], variant["id"])
        elif snippet["language"] == "toml":
            parsed = tomllib.loads(snippet["content"])
            entry = parsed["mcp_servers"]["synapse"]
            assert entry["url"] == "http://testserver/mcp"
            assert entry["http_headers"] == {"X-Synapse-Agent": "codex"}
            assert ("bearer_token_env_var" in entry) == (variant["auth"] == MIND_KEY)
        else:
            continue
        checked += 1
    assert checked == 11


def test_public_url_setting_wins_over_the_host_header(settings):
    settings.PUBLIC_URL = "https://memory.example.org"
    document = configuration(HTTP_HOST="localhost:8123")
    assert document["mcp_url"] == "https://memory.example.org/mcp"
    text = json.dumps(document)
    assert "localhost:8123" not in text
    assert all(url.startswith("https://memory.example.org") for url in URL.findall(text))


def test_no_secret_anywhere_whatever_the_credentials(alice, alice_mind, alice_key, bob,
                                                     bob_mind):
    bobs = key_issue(mind=bob_mind, name="bob agent", created_by=bob)[1]
    answers = [
        APIClient().get(ROUTE),
        key_client(alice_key[1]).get(ROUTE),
        # A wrong key is not looked at: the route is public.
        key_client("mk_" + "x" * 52).get(ROUTE),
    ]
    for response in answers:
        assert response.status_code == 200
        text = response.content.decode()
        assert alice_key[1] not in text and bobs not in text
        assert KEY_LIKE.findall(text) == []
        assert alice_mind.id not in text and bob_mind.id not in text
        assert response["Cache-Control"] == "public, max-age=300"
    assert answers[0].json() == answers[1].json() == answers[2].json()


def test_an_unknown_query_parameter_is_a_400_in_the_error_shape():
    response = APIClient().get(ROUTE, {"host": "claude"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"host": ["Unknown query parameter."]}


def test_the_schema_declares_it_public_with_its_response():
    from tests.security.openapi import load_schema, operations

    (operation,) = [op for op in operations(load_schema()) if op.path == ROUTE]
    assert operation.is_public and operation.method == "GET"
    response = operation.resolve(operation.spec["responses"]["200"]["content"][
        "application/json"]["schema"])
    assert set(response["properties"]) == set(configuration())


def test_served_by_django_through_the_asgi_app_not_swallowed_by_mcp():
    from synapse.asgi import application

    async def fetch():
        transport = httpx.ASGITransport(app=application, client=("127.0.0.1", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            config = await http.get(ROUTE)
            config_slash = await http.get(ROUTE + "/")
            mcp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                "method": "tools/list"})
            mcp_slash = await http.post("/mcp/", json={})
            below = await http.post("/mcp/config", json={})
        return config, config_slash, mcp, mcp_slash, below

    config, config_slash, mcp, mcp_slash, below = asyncio.run(fetch())
    assert config.status_code == 200
    assert config.json()["mcp_url"] == "http://localhost/mcp"
    assert config.headers["Cache-Control"] == "public, max-age=300"
    # /mcp and /mcp/ are the MCP endpoint (a Mind Key or token required)...
    for refused in (mcp, mcp_slash):
        assert refused.status_code == 401
        assert refused.json()["error"]["message"].startswith("A Mind Key (Authorization")
        assert refused.headers["WWW-Authenticate"].endswith(
            '/.well-known/oauth-protected-resource/mcp"')
    # ... and nothing below them: Django answers, with its own 404.
    for missing in (config_slash, below):
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"


def test_a_new_key_fills_only_the_key_placeholder_of_the_key_variants():
    plain = hosts("https://synapse.example.com")
    filled = with_key(plain, "mk_" + "A" * 52)
    for before, after in zip(plain, filled, strict=True):
        for old, new in zip(before.variants, after.variants, strict=True):
            for old_snippet, new_snippet in zip(old.snippets, new.snippets, strict=True):
                if old.auth == OAUTH or KEY_PLACEHOLDER not in old_snippet.content:
                    assert new_snippet == old_snippet
                else:
                    assert new_snippet.content == old_snippet.content.replace(
                        KEY_PLACEHOLDER, "mk_" + "A" * 52)
    # Every host that takes a key gets it somewhere once filled in.
    for host in filled:
        if any(variant.auth == MIND_KEY for variant in host.variants):
            assert any("mk_" + "A" * 52 in snippet.content for variant in host.variants
                       for snippet in variant.snippets), host.id


def fenced_blocks(markdown: str) -> list[str]:
    return [match.group(1) for match in
            re.finditer(r"^```[a-z]*\n(.*?)\n```$", markdown, re.MULTILINE | re.DOTALL)]


def test_docs_agents_md_shows_exactly_the_configurations_the_server_builds():
    """Each file and command of every host, for DOCS_ORIGIN, is a code block of
    docs/agents.md; and every code block there with DOCS_ORIGIN in it is one of them."""
    blocks = fenced_blocks(AGENTS_MD.read_text())
    built = {(host.id, variant.id, snippet.label): snippet.content
             for host in hosts(DOCS_ORIGIN) for variant in host.variants
             for snippet in variant.snippets if snippet.kind != "value"}
    missing = {where: content for where, content in built.items() if content not in blocks}
    assert not missing, ("docs/agents.md lacks (or has an outdated copy of) these snippets "
                         "of synapse.agent_config, for " + DOCS_ORIGIN + ":\n\n" +
                         "\n\n".join(f"{where}:\n{content}"
                                     for where, content in missing.items()))
    stray = [block for block in blocks
             if DOCS_ORIGIN in block and block not in built.values()]
    assert not stray, "code blocks in docs/agents.md that the builder does not make:\n\n" + \
        "\n\n".join(stray)
