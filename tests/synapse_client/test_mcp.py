"""The MCP tools through the official client SDK, over stdio (``synapse-mcp``) and over
streamable HTTP (``/mcp``), against a real server: the same tools, auth and tenancy."""

import re

import anyio
import httpx
import pytest
from mcp import MCPError

from memories.models import Memory
from minds.services import key_issue
from tests.synapse_client.conftest import http_session, stdio_session, text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOOLS = {"recall", "remember", "search", "timeline", "get_memory", "update_memory", "forget",
         "restore", "list_unverified", "stats"}
MEMORY_ID = re.compile(r"mem_[A-Za-z0-9]+")


def run(scenario, *args):
    return anyio.run(scenario, *args)


def test_tools_are_listed_with_descriptions_and_schemas(connect, alice_key):
    async def scenario():
        async with connect(alice_key[1]) as session:
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run(scenario)}
    assert set(tools) == TOOLS
    assert all(len(tool.description) > 40 for tool in tools.values())
    remember = tools["remember"].input_schema
    assert sorted(remember["required"]) == ["category", "content"]
    assert "credentials" in remember["properties"]["category"]["enum"]
    assert tools["search"].input_schema["properties"]["mode"]["enum"] == [
        "keyword", "semantic", "hybrid"]
    assert tools["recall"].annotations.read_only_hint is True
    assert {"path", "memory_type", "occurred_at"} <= set(remember["properties"])
    assert remember["properties"]["memory_type"]["anyOf"][0]["enum"] == [
        "semantic", "episodic", "procedural", "working", "identity"]
    assert {"path", "budget"} <= set(tools["recall"].input_schema["properties"])
    assert set(tools["timeline"].input_schema["properties"]) == {
        "path", "after", "before", "limit", "around"}
    assert tools["timeline"].annotations.read_only_hint is True


def test_remember_says_what_priorities_really_do_under_a_budget(connect, alice_key):
    async def scenario():
        async with connect(alice_key[1]) as session:
            return (await session.list_tools()).tools

    remember = next(tool for tool in run(scenario) if tool.name == "remember")
    priority = remember.input_schema["properties"]["priority"]["description"]
    assert "critical, then high, normal (the default), low" in priority
    assert "when low ones are, recall ends with one line giving their number and keys" in \
        priority
    memory_type = remember.input_schema["properties"]["memory_type"]["description"]
    assert "expires after 24 h unless expires_at" in memory_type
    assert "occurred_at" in memory_type
    assert "projects/memory-os/decisions" in remember.input_schema["properties"]["path"][
        "description"]


def test_remembered_memory_appears_in_recall_with_its_id(connect, alice_key, alice_mind):
    async def scenario():
        async with connect(alice_key[1]) as session:
            stored = await session.call_tool("remember", {
                "category": "preference", "key": "preference_editor",
                "content": "Prefers Helix over Vim", "tags": ["Editor"], "priority": "high"})
            recalled = await session.call_tool("recall", {})
            return stored, recalled

    stored, recalled = run(scenario)
    assert not stored.is_error
    memory_id = MEMORY_ID.search(text_of(stored)).group()
    assert text_of(stored).startswith(f"Stored {memory_id}@v1 (preference).")
    memory = Memory.objects.get(pk=memory_id)
    assert (memory.mind, memory.source, memory.verified) == (alice_mind, "agent", False)
    assert memory.tags == ["editor"]
    text = text_of(recalled)
    assert f"[{memory_id}@v1] preference/preference_editor (HIGH) [unverified]" in text
    assert "  Prefers Helix over Vim" in text
    assert "Mind: Alice's Mind" in text


def test_recall_keeps_within_the_budget_and_says_what_was_left_out(connect, alice_key,
                                                                   remember):
    remember(category="identity", key="user_name", content="Ada", priority="critical")
    for number in range(6):
        remember(category="note", key=f"note_{number}", content="filler text " * 20)

    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("recall", {"budget": 120})

    text = text_of(run(scenario))
    assert len(text) / 4 <= 120
    assert "identity/user_name (CRITICAL)" in text
    assert "left out to stay within the budget" in text


def test_recall_under_a_budget_names_the_low_priority_memories_left_out(connect, alice_key,
                                                                        remember):
    """What the remember tool promises about low priorities is what recall does."""
    remember(category="identity", key="user_name", content="Ada", priority="critical")
    for number in range(6):
        remember(category="note", key=f"aside_{number}", content="filler text " * 20,
                 priority="low")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("recall", {"budget": 150})

    text = text_of(run(scenario))
    assert len(text) / 4 <= 150 and "identity/user_name (CRITICAL)" in text
    shown = len(re.findall(r"\] note/aside_\d", text))
    last = text.rstrip().splitlines()[-1]
    assert shown < 6
    assert re.fullmatch(rf"Left out \(low priority, {6 - shown}\): aside_\d.*", last), last


def test_timeline_pages_twenty_episodes_unless_asked_and_bounds_around(connect, alice_key,
                                                                      remember):
    for number in range(25):
        remember(category="context", key=f"turn_{number:02d}", content=f"Turn {number}",
                 memory_type="episodic", path="talks/one")

    third = Memory.objects.get(key="turn_03").id

    async def scenario():
        async with connect(alice_key[1]) as session:
            page = await session.call_tool("timeline", {"path": "talks/one"})
            around = await session.call_tool("timeline", {"around": third, "limit": 21})
            return page, around

    page, around = run(scenario)
    assert text_of(page).count("] context/turn_") == 20
    assert around.is_error and "at most 20" in text_of(around)


def test_update_memory_makes_a_new_version(connect, alice_key, remember):
    memory = remember(category="fact", key="office_city", content="Office in Berlin")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("update_memory", {
                "memory_id": memory.id, "content": "Office in Hamburg", "priority": "high"})

    result = run(scenario)
    assert not result.is_error
    assert f"Updated {memory.id}: now {memory.id}@v2" in text_of(result)
    memory.refresh_from_db()
    assert (memory.content, memory.priority, memory.version) == ("Office in Hamburg", "high", 2)


def test_forget_moves_the_memory_to_the_trash_and_out_of_recall(connect, alice_key, remember):
    memory = remember(category="fact", key="old_phone", content="Phone 555-0100")

    async def scenario():
        async with connect(alice_key[1]) as session:
            forgotten = await session.call_tool("forget", {"memory_id": memory.id})
            return forgotten, await session.call_tool("recall", {})

    forgotten, recalled = run(scenario)
    assert f"Moved {memory.id}@v1 (" in text_of(forgotten)
    assert memory.id not in text_of(recalled)
    memory.refresh_from_db()
    assert memory.deleted_at is not None


def test_get_memory_shows_everything_about_one_memory(connect, alice_key, remember):
    memory = remember(category="credentials", key="build_token", content="tok-123")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("get_memory", {"memory_id": memory.id})

    text = text_of(run(scenario))
    assert text.startswith(f"[{memory.id}@v1] credentials/build_token")
    assert "  tok-123" in text  # the owning mind reads credentials in plaintext here
    assert "version 1, source agent, confidence 0.7" in text


def test_api_refusal_is_a_tool_error_with_the_api_message(connect, alice_key):
    async def scenario():
        async with connect(alice_key[1]) as session:
            missing = await session.call_tool("get_memory", {"memory_id": "mem_doesnotexist"})
            blank = await session.call_tool("remember", {"category": "fact", "content": "  "})
            return missing, blank

    missing, blank = run(scenario)
    assert missing.is_error
    assert text_of(missing).endswith("get_memory: No such memory. [HTTP 404 not_found]")
    assert blank.is_error and "content: Content cannot be blank." in text_of(blank)
    assert "Traceback" not in text_of(missing) + text_of(blank)


def test_read_only_key_cannot_remember(connect, alice_mind, alice):
    _key, plaintext = key_issue(mind=alice_mind, name="reader", scope="read", created_by=alice)

    async def scenario():
        async with connect(plaintext) as session:
            return await session.call_tool("remember", {"category": "fact", "content": "x"})

    result = run(scenario)
    assert result.is_error and "This Mind Key is read-only." in text_of(result)
    assert not Memory.objects.exists()


def test_one_minds_key_never_reaches_another_minds_memories(connect, alice_key, bob_mind,
                                                             bob_key, remember):
    secret = remember(mind=bob_mind, category="fact", key="bob_secret",
                      content="Bob's private plan")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return [await session.call_tool(name, arguments) for name, arguments in (
                ("get_memory", {"memory_id": secret.id}),
                ("update_memory", {"memory_id": secret.id, "content": "hijacked"}),
                ("forget", {"memory_id": secret.id}),
                ("recall", {}))]

    *refused, recalled = run(scenario)
    assert all(result.is_error and "No such memory." in text_of(result) for result in refused)
    assert "Bob's private plan" not in text_of(recalled)
    secret.refresh_from_db()
    assert (secret.content, secret.deleted_at, secret.version) == ("Bob's private plan", None, 1)


# -- Wrong or missing keys ------------------------------------------------------------------

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("authorization, message, error", [
    (None, "A Mind Key (Authorization: Bearer mk_…", ""),
    ("Bearer mk_notarealkey000000000000000000", "Malformed Mind Key.", ', error="invalid_token"'),
    # Not a Mind Key: an OAuth access token, then (MCP hosts that sign in with OAuth).
    ("Bearer not-a-mind-key", "Unknown OAuth access token.", ', error="invalid_token"'),
    # A human's JWT (it has dots): /mcp is for agents.
    ("Bearer a.b.c", "or an OAuth access token is required", ""),
])
def test_mcp_endpoint_refuses_a_missing_or_wrong_key_with_401(synapse_server, authorization,
                                                              message, error):
    headers = {**MCP_HEADERS, **({"Authorization": authorization} if authorization else {})}
    response = httpx.post(f"{synapse_server}/mcp", json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    # RFC 9728 §5.1: the 401 names the metadata an OAuth client starts from.
    assert response.headers["WWW-Authenticate"] == (
        f'Bearer realm="synapse", resource_metadata="{synapse_server}/.well-known/'
        f'oauth-protected-resource/mcp"{error}')
    error = response.json()["error"]
    assert error["status"] == 401 and message in error["message"]


@pytest.fixture
def unknown_key(alice_key) -> str:
    """Well-formed, but no mind has it: alice's key with its last character changed."""
    plaintext = alice_key[1]
    return plaintext[:-1] + ("a" if plaintext[-1] != "a" else "b")


def test_mcp_endpoint_refuses_an_unknown_key(synapse_server, unknown_key):
    response = httpx.post(f"{synapse_server}/mcp", json=INITIALIZE,
                          headers={**MCP_HEADERS, "Authorization": f"Bearer {unknown_key}"})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Unknown Mind Key."


def test_mcp_endpoint_refuses_a_revoked_key(synapse_server, alice_key):
    key, plaintext = alice_key
    from minds.services import key_revoke

    key_revoke(key=key)
    response = httpx.post(f"{synapse_server}/mcp", json=INITIALIZE,
                          headers={**MCP_HEADERS, "Authorization": f"Bearer {plaintext}"})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "This Mind Key has been revoked."


def test_mcp_endpoint_refuses_a_host_django_would_refuse(synapse_server, alice_key):
    response = httpx.post(f"{synapse_server}/mcp", json=INITIALIZE, headers={
        **MCP_HEADERS, "Authorization": f"Bearer {alice_key[1]}", "Host": "evil.example"})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Invalid Host header."


def test_mcp_client_with_a_wrong_key_cannot_connect(synapse_server, unknown_key):
    async def scenario():
        async with http_session(f"{synapse_server}/mcp", unknown_key):
            pass

    with pytest.raises(BaseException) as caught:
        run(scenario)
    assert any(isinstance(error, MCPError) for error in _leaves(caught.value))


def _leaves(error: BaseException):
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def test_stdio_server_with_a_wrong_key_answers_tool_calls_with_the_api_refusal(
        synapse_server, unknown_key):
    async def scenario():
        async with stdio_session(synapse_server, unknown_key) as session:
            return await session.call_tool("recall", {})

    result = run(scenario)
    assert result.is_error
    assert text_of(result).endswith("Unknown Mind Key. [HTTP 401 authentication_failed]")


def test_stdio_server_without_a_key_exits_with_a_message(synapse_server):
    import subprocess

    from tests.synapse_client.conftest import BIN

    completed = subprocess.run([str(BIN / "synapse-mcp")], env={"SYNAPSE_URL": synapse_server},
                               capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert completed.returncode == 1
    assert "set SYNAPSE_MIND_KEY" in completed.stderr


@pytest.mark.parametrize("mode", ["auto", "2026-07-28", "legacy"])
def test_clients_of_every_protocol_era_reach_the_same_tools(synapse_server, alice_key, remember,
                                                            mode):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    memory = remember(category="fact", key="city", content="Lives in Porto")

    async def scenario():
        # /mcp takes the key from Authorization only: the client's transport sends it.
        headers = {"Authorization": f"Bearer {alice_key[1]}"}
        async with (httpx2.AsyncClient(headers=headers, timeout=60) as http,
                    Client(streamable_http_client(f"{synapse_server}/mcp", http_client=http),
                           mode=mode) as client):
            return await client.call_tool("get_memory", {"memory_id": memory.id})

    result = run(scenario)
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith(f"[{memory.id}@v1] fact/city")


def test_mcp_endpoint_answers_deeply_nested_json_with_a_400_parse_error(synapse_server,
                                                                       alice_key):
    # /mcp speaks JSON-RPC: a body that does not parse is its "Parse error" (-32700), never
    # a 500 (the SDK parses with pydantic-core, which stops at a fixed nesting depth).
    response = httpx.post(f"{synapse_server}/mcp", content="[" * 100_000, timeout=60, headers={
        **MCP_HEADERS, "Content-Type": "application/json",
        "Authorization": f"Bearer {alice_key[1]}"})
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["code"] == -32700
