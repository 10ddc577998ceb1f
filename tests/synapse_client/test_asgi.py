"""synapse.asgi as served: Django and /mcp side by side, and an access log without
query strings (a ``?key=mk_…`` or private search text never reaches a log line)."""

import logging
import os
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from memories.models import Memory
from tests.synapse_client.conftest import BIN, free_port

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


def test_mcp_refuses_the_key_as_a_query_parameter(synapse_server, alice_key, remember,
                                                  caplog):
    """Every MCP message is a POST that may write: a key in its URL would reach proxy logs
    and history, so /mcp takes it from Authorization only."""
    caplog.set_level(logging.INFO)
    remember(category="fact", key="city", content="Lives in Porto")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in (accept, {**accept, "Authorization": f"Bearer {alice_key[1]}"}):
        response = httpx.post(f"{synapse_server}/mcp", params={"key": alice_key[1]},
                              json=initialize, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["message"].startswith(
            "/mcp does not accept a Mind Key in the query string (?key=)")
        assert response.headers["WWW-Authenticate"] == (
            f'Bearer realm="synapse", resource_metadata="{synapse_server}/.well-known/'
            'oauth-protected-resource/mcp", error="invalid_token"')
    lines = access_lines(caplog, '"POST /mcp" 401')
    assert not any("mk_" in line for line in lines)
    # The header alone is served.
    response = httpx.post(f"{synapse_server}/mcp", json=initialize,
                          headers={**accept, "Authorization": f"Bearer {alice_key[1]}"})
    assert response.status_code == 200


def test_gunicorn_with_the_production_config_serves_mcp(alice_key, tmp_path):
    """synapse/gunicorn_conf.py as `make run` and the image start it: uvicorn workers,
    lifespan on, /mcp beside Django, on the test database."""
    from django.db import connection

    db = connection.settings_dict
    database_url = (f"postgresql://{quote(db['USER'])}:{quote(db['PASSWORD'] or '')}@"
                    f"{quote(db['HOST'], safe='')}:{db['PORT']}/{db['NAME']}")
    port = free_port()
    log = tmp_path / "gunicorn.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(BIN / "gunicorn"), "-c", "synapse/gunicorn_conf.py"],
            cwd=Path(__file__).resolve().parents[2], stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "DATABASE_URL": database_url, "WEB_CONCURRENCY": "1",
                 "SYNAPSE_BIND": f"127.0.0.1:{port}"})
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()
            try:
                httpx.get(f"{url}/memory/health", timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
        response = httpx.post(f"{url}/mcp", timeout=60, headers={
            "Authorization": f"Bearer {alice_key[1]}",
            "Accept": "application/json, text/event-stream"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "remember", "arguments": {"category": "fact", "content": "Via gunicorn"}}})
        assert response.status_code == 200, log.read_text()
        text = response.json()["result"]["content"][0]["text"]
        assert text.startswith("Stored mem_")
        assert Memory.objects.get(pk=text.split()[1].removesuffix("@v1")).content == "Via gunicorn"
    finally:
        process.terminate()
        process.wait(timeout=30)
    lines = log.read_text()
    assert '"POST /mcp" 200' in lines
    assert alice_key[1] not in lines
