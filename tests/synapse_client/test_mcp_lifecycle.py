"""MCP tools over the verification and lifecycle routes: restore, list_unverified and
stats, over both transports."""

import anyio
import pytest

from tests.synapse_client.conftest import text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_forgotten_memory_is_restored(connect, alice_key, remember):
    memory = remember(category="fact", key="pet", content="Has a cat named Turing")

    async def scenario():
        async with connect(alice_key[1]) as session:
            await session.call_tool("forget", {"memory_id": memory.id})
            restored = await session.call_tool("restore", {"memory_id": memory.id})
            return restored, await session.call_tool("recall", {})

    restored, recalled = anyio.run(scenario)
    assert text_of(restored).startswith(f"Restored {memory.id}@v1 from the trash:")
    assert f"[{memory.id}@v1] fact/pet" in text_of(recalled)
    memory.refresh_from_db()
    assert memory.deleted_at is None


def test_unverified_memories_are_listed_and_stats_count_them(connect, alice_key, remember,
                                                             human, alice_mind):
    unverified = remember(category="fact", key="guess", content="Probably likes tea")
    human.post(f"/memory?mind={alice_mind.id}", {"category": "identity", "key": "name",
                                                 "content": "Alice"}, format="json")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return (await session.call_tool("list_unverified", {"limit": 10}),
                    await session.call_tool("stats", {}))

    listed, stats = anyio.run(scenario)
    assert text_of(listed).startswith("1 of 1 unverified:")
    assert f"[{unverified.id}@v1] fact/guess" in text_of(listed)
    assert "identity/name" not in text_of(listed)
    assert text_of(stats).startswith("Memories: 2 total (1 verified, 1 unverified)")
    assert "By category: identity 1, preference 0, fact 1" in text_of(stats)
