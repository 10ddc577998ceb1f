"""Search through the MCP `search` tool (both transports) and `synapse search`."""

import json

import anyio
import pytest

from tests.synapse_client.conftest import text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_keyword_search_finds_the_memory_with_its_id_and_score(connect, alice_key,
                                                               remember):
    docker = remember(category="skill", key="docker", content="Runs Docker swarm in prod")
    remember(category="skill", key="kubernetes", content="Learning Kubernetes")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("search", {"query": "docker swarm",
                                                      "mode": "keyword", "limit": 5})

    text = text_of(anyio.run(scenario))
    assert text.startswith("1 result(s) for 'docker swarm' (keyword):")
    assert f"[{docker.id}@v1] skill/docker (NORMAL) [unverified] score " in text
    assert "kubernetes" not in text


def test_malformed_search_is_a_tool_error_saying_what_is_wrong(connect, alice_key):
    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("search", {"query": '"unclosed', "mode": "keyword"})

    result = anyio.run(scenario)
    assert result.is_error
    assert "q: " in text_of(result) and "[HTTP 400 invalid]" in text_of(result)


def test_hybrid_search_is_the_default_and_finds_by_words_too(connect, alice_key, remember):
    memory = remember(category="project", key="deploy", content="Deploys run on Fridays")

    async def scenario():
        async with connect(alice_key[1]) as session:
            return await session.call_tool("search", {"query": "deploys fridays"})

    text = text_of(anyio.run(scenario))
    assert "(hybrid)" in text.splitlines()[0]
    assert f"[{memory.id}@v1] project/deploy" in text


def test_cli_search_prints_a_table_with_ids(synapse, remember):
    memory = remember(category="skill", key="docker", content="Runs Docker swarm in prod")
    result = synapse("search", "docker")
    assert result.returncode == 0
    header, _rule, row = result.stdout.splitlines()
    assert header.split() == ["ID", "CATEGORY/KEY", "SCORE", "TEXT"]
    assert row.startswith(f"{memory.id}  skill/docker")
    body = json.loads(synapse("search", "docker", "--json").stdout)
    assert [result["id"] for result in body["results"]] == [memory.id]
