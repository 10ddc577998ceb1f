"""/mcp and the provenance headers: the X-Synapse-* headers of the MCP HTTP request are
recorded on what its tool calls write, as a REST write with them would; a malformed one is
refused with a 400 naming it before any MCP message is read."""

import re
from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memories.models import AuditEvent, Memory, MemoryVersion

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MEMORY_ID = re.compile(r"mem_[A-Za-z0-9]+")
CLAIMS = {"X-Synapse-Agent": "claude-desktop", "X-Synapse-Agent-Instance": "04f9b8c2",
          "X-Synapse-Device": "Michaëls MacBook; Darwin 24.1.0"}


@asynccontextmanager
async def session_with(url: str, headers: dict):
    # UTF-8 bytes: httpx would refuse a non-ASCII str header value.
    async with (
        httpx2.AsyncClient(headers={name: value.encode() for name, value in headers.items()},
                           timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_a_tool_call_records_the_headers_of_the_mcp_request(synapse_server, alice_key,
                                                            alice_mind):
    async def scenario():
        headers = {"Authorization": f"Bearer {alice_key[1]}", **CLAIMS}
        async with session_with(f"{synapse_server}/mcp", headers) as session:
            stored = await session.call_tool("remember", {
                "category": "fact", "key": "office", "content": "Office in Bonn"})
            memory_id = MEMORY_ID.search(stored.content[0].text).group()
            await session.call_tool("update_memory", {"memory_id": memory_id,
                                                      "content": "Office in Paris"})
            return memory_id

    memory_id = anyio.run(scenario)
    versions = MemoryVersion.objects.filter(memory_id=memory_id).order_by("version")
    assert [(v.version, v.agent, v.agent_instance, v.device, v.parent) for v in versions] == [
        (1, "claude-desktop", "04f9b8c2", "Michaëls MacBook; Darwin 24.1.0", None),
        (2, "claude-desktop", "04f9b8c2", "Michaëls MacBook; Darwin 24.1.0", 1)]
    assert {(v.recorded_by_type, v.recorded_by_id) for v in versions} == {
        ("key", alice_key[0].id)}
    assert set(AuditEvent.objects.filter(memory_id=memory_id).values_list(
        "agent", flat=True)) == {"claude-desktop"}


def test_a_malformed_header_is_refused_at_mcp_with_a_400_naming_it(synapse_server,
                                                                   alice_key, alice_mind):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}
    response = httpx.post(f"{synapse_server}/mcp", json=initialize, headers={
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {alice_key[1]}", "X-Synapse-Agent": "claude desktop"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], list(error["fields"])) == ("invalid", ["X-Synapse-Agent"])
    assert not Memory.objects.filter(mind=alice_mind).exists()
