"""synapse.asgi as served: Django and /mcp side by side, and an access log without
query strings (a ``?key=mk_…`` or private search text never reaches a log line)."""

import logging
import time

import anyio
import httpx
import pytest

from tests.client.conftest import http_session, text_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def access_lines(caplog, expected: str) -> list[str]:
    """Log lines so far, once the server thread has written ``expected`` (it logs after
    the response has gone out)."""
    deadline = time.monotonic() + 10
    while True:
        lines = [record.getMessage() for record in caplog.records]
        if any(expected in line for line in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_rest_routes_are_served_beside_mcp(synapse_server, alice_key):
    response = httpx.get(f"{synapse_server}/memory",
                         headers={"Authorization": f"Bearer {alice_key[1]}"})
    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_access_log_has_the_path_but_no_query_string(synapse_server, alice_key, caplog):
    caplog.set_level(logging.INFO)
    response = httpx.get(f"{synapse_server}/memory/recall",
                         params={"key": alice_key[1], "q": "my private question"})
    assert response.status_code == 200
    lines = access_lines(caplog, '"GET /memory/recall" 200')
    assert '127.0.0.1 "GET /memory/recall" 200' in "\n".join(lines)
    assert not any("private question" in line or "mk_" in line for line in lines)


def test_mcp_accepts_the_key_as_a_query_parameter_too(synapse_server, alice_key, remember,
                                                      caplog):
    caplog.set_level(logging.INFO)
    memory = remember(category="fact", key="city", content="Lives in Porto")

    async def scenario():
        async with http_session(f"{synapse_server}/mcp?key={alice_key[1]}", None) as session:
            return await session.call_tool("recall", {"query": "where does she live"})

    assert f"[{memory.id}]" in text_of(anyio.run(scenario))
    lines = access_lines(caplog, '"POST /mcp" 200')
    assert any('"POST /mcp" 200' in line for line in lines)
    assert not any("where does she live" in line or "mk_" in line for line in lines)
