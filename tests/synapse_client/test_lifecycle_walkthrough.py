"""The second memory model's lifecycle walkthrough (issue 14), against a live server, the
agents through the MCP endpoint and the owner through the human API, every receipt exact:
agent A remembers a preference under a path (@v1); agent B, another instance, recalls it
and cites @v1; the owner corrects it (@v2, parent v1, a diff Orion → Polaris); the next
recall selects v2 only; `forget` moves it to the trash and search finds nothing; a scope
reset of the path leaves no row holding its words or key in any table, and a peer's sync
push of the old memory does not bring it back."""

from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rest_framework_simplejwt.tokens import RefreshToken

from memories.models import Memory, MemoryTombstone, MemoryVersion
from minds.services import key_issue
from tests.memories.test_reset import residual_hits

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PATH = "projects/memory-os"
AGENT_A = {"X-Synapse-Agent": "claude-desktop", "X-Synapse-Agent-Instance": "04f9b8c2",
           "X-Synapse-Device": "MacBook"}
AGENT_B = {"X-Synapse-Agent": "codex", "X-Synapse-Agent-Instance": "7d1e9a30",
           "X-Synapse-Device": "build-box"}


@asynccontextmanager
async def agent_session(url: str, key: str, claims: dict):
    headers = {"Authorization": f"Bearer {key}", **claims}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(url: str, key: str, claims: dict, tool: str, arguments: dict) -> str:
    async with agent_session(url, key, claims) as session:
        result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.content[0].text


def test_the_lifecycle_walkthrough(synapse_server, alice, alice_mind, alice_key):
    url, key_a = synapse_server, alice_key[1]
    key_b = key_issue(mind=alice_mind, name="second agent", created_by=alice)[1]
    owner = httpx.Client(base_url=url, timeout=60, headers={
        "Authorization": f"Bearer {RefreshToken.for_user(alice).access_token}"})

    def mcp(mind_key, claims, tool, **arguments) -> str:
        return anyio.run(call, url, mind_key, claims, tool, arguments)

    # Agent A remembers a preference under the project's path.
    stored = mcp(key_a, AGENT_A, "remember", category="preference", key="meeting_room",
                 content="Team meetings are in Room Orion", path=PATH)
    memory = Memory.objects.get(mind=alice_mind, key="meeting_room")
    assert stored == f"Stored {memory.id}@v1 (preference)."
    first = MemoryVersion.objects.get(memory=memory, version=1)
    assert (first.agent, first.agent_instance, first.device, first.parent) == (
        "claude-desktop", "04f9b8c2", "MacBook", None)

    # Agent B, another instance, recalls the project at once and cites v1.
    recalled = mcp(key_b, AGENT_B, "recall", path=PATH)
    assert recalled == (
        "Mind: Alice's Mind\nMemories: 1 shown (0 verified, 1 unverified)\n\n"
        f"[{memory.id}@v1] preference/meeting_room (NORMAL) [unverified] path={PATH}\n"
        "  Team meetings are in Room Orion\n")

    # The owner corrects it: v2, derived from v1, and the diff says what changed.
    corrected = owner.put(f"/memory/{memory.id}", params={"mind": alice_mind.id},
                          json={"content": "Team meetings are in Room Polaris"})
    assert corrected.status_code == 200, corrected.text
    assert (corrected.json()["citation"], corrected.json()["version"]) == (
        f"{memory.id}@v2", 2)
    second = owner.get(f"/memory/{memory.id}@v2", params={"mind": alice_mind.id}).json()
    assert (second["version"], second["parent"], second["content"], second["agent"]) == (
        2, 1, "Team meetings are in Room Polaris", "")
    diff = owner.get(f"/memory/{memory.id}/diff",
                     params={"mind": alice_mind.id, "from": 1, "to": 2}).json()
    assert diff["changes"] == [{"field": "source", "from": "agent", "to": "user"}, {
        "field": "content", "too_large": False, "hunks": [{
        "old_start": 1, "new_start": 1, "lines": [
            {"op": "-", "text": "Team meetings are in Room Orion"},
            {"op": "+", "text": "Team meetings are in Room Polaris"}]}]}]
    # What agent B cited is still exactly what it read.
    cited = owner.get(f"/memory/{memory.id}@v1", params={"mind": alice_mind.id}).json()
    assert (cited["content"], cited["agent_instance"]) == (
        "Team meetings are in Room Orion", "04f9b8c2")

    # The next recall selects v2 only (verified: the owner wrote it).
    recalled = mcp(key_b, AGENT_B, "recall", path=PATH)
    assert recalled == (
        "Mind: Alice's Mind\nMemories: 1 shown (1 verified, 0 unverified)\n\n"
        f"[{memory.id}@v2] preference/meeting_room (NORMAL) [verified] path={PATH}\n"
        "  Team meetings are in Room Polaris\n")

    # A peer (another instance syncing this mind) holds the current copy.
    agent_b = httpx.Client(base_url=url, timeout=60,
                           headers={"Authorization": f"Bearer {key_b}", **AGENT_B})
    peer_copy = next(item for item in agent_b.get("/memory/diff", params={"path": PATH}).json()[
        "added"] if item["id"] == memory.id)
    assert (peer_copy["version"], peer_copy["content"]) == (2, "Team meetings are in Room Polaris")

    # Forget moves it to the trash; search then finds nothing, in any mode.
    forgotten = mcp(key_a, AGENT_A, "forget", memory_id=memory.id)
    assert forgotten == (f"Moved {memory.id}@v2 (preference/meeting_room) to the trash. It "
                         "leaves recall and search; `restore` brings it back.")
    for mode in ("keyword", "semantic", "hybrid"):
        found = mcp(key_b, AGENT_B, "search", query="Room Polaris", mode=mode)
        assert found == f"No memories match 'Room Polaris' ({mode} search)."
    assert owner.get("/memory/search", params={
        "mind": alice_mind.id, "q": "Polaris", "mode": "hybrid"}).json()["results"] == []

    # The owner resets the project's scope: a hard purge, nothing left holding its words.
    reset = owner.post("/memory/reset", params={"mind": alice_mind.id},
                       json={"path": PATH, "confirm": PATH})
    assert reset.status_code == 200, reset.text
    # Its two versions go with it; its three audit events (store, update, trash) lose their
    # details; its tombstone becomes a reset one.
    assert reset.json() == {"path": PATH, "memory_type": "", "category": "", "counts": {
        "memories": 1, "versions": 2, "tombstones": 1, "tombstones_scrubbed": 0,
        "originals_restored": 0, "idempotency_records": 0, "admin_log_entries": 0,
        "context_queue_rows": 0, "contexts_rebuilt": 0, "audit_events_scrubbed": 3}}
    assert not Memory.objects.filter(pk=memory.id).exists()
    assert residual_hits(["Room Orion", "Room Polaris", "meeting_room", "Team meetings"]) == []
    tombstone = MemoryTombstone.objects.get(pk=memory.id)
    assert (tombstone.reset, tombstone.category, tombstone.key) == (True, "", "")

    # A peer's sync push of the old memory does not bring it back, by id or by key.
    later = "2099-01-01T00:00:00Z"
    pushed = agent_b.post("/memory/sync", json={"memories": [
        {**peer_copy, "updated_at": later},
        {**peer_copy, "id": "mem_peerscopy0000000001", "updated_at": later}]})
    assert pushed.status_code == 200, pushed.text
    result = pushed.json()
    assert (result["added"], result["updated"]) == (0, 0)
    assert [conflict["reason"] for conflict in result["conflicts"]] == ["reset", "reset"]
    assert not Memory.objects.filter(mind=alice_mind, key="meeting_room").exists()
    found = mcp(key_b, AGENT_B, "search", query="Room Polaris", mode="hybrid")
    assert found == "No memories match 'Room Polaris' (hybrid search)."
