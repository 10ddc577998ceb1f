"""A real Synapse server for the client tests: synapse.asgi (Django and /mcp) under
uvicorn in a thread of the test process, so it sees the test database; plus MCP client
sessions over both transports."""

import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

BIN = Path(sys.executable).parent
# The commands under test import the package from where this test run does (a checkout
# other than the installed one, say), not from the installation alone.
PASSED_ON = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _close_connections_in_every_thread(executor, workers: int) -> None:
    """Each of Django's threads keeps a database connection; close them all, or the test
    database could not be dropped at the end of the session."""
    from django.db import connections

    barrier = threading.Barrier(workers, timeout=10)

    def close() -> None:
        barrier.wait()  # one task per thread: none returns until all are running
        connections.close_all()

    for future in [executor.submit(close) for _ in range(workers)]:
        future.result()


@pytest.fixture(scope="session")
def synapse_server(django_db_setup, django_db_blocker) -> str:
    """The base URL of a running synapse.asgi application (uvicorn, lifespan on)."""
    import uvicorn

    with django_db_blocker.unblock():
        from synapse import asgi

        port = free_port()
        config = uvicorn.Config(asgi.application, host="127.0.0.1", port=port,
                                lifespan="on", access_log=False, log_config=None)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="synapse-uvicorn", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=30)
            _close_connections_in_every_thread(asgi.django_app.executor,
                                               asgi.django_app.executor._max_workers)


@pytest.fixture
def synapse(synapse_server, alice_key):
    """``synapse(*args, key=…, stdin=…)`` runs the installed CLI as alice's agent by
    default."""

    def _run(*args: str, key: str | None = alice_key[1], stdin: str | None = None,
             url: str = synapse_server) -> subprocess.CompletedProcess:
        env = {"SYNAPSE_URL": url, "COLUMNS": "200", **PASSED_ON}
        if key is not None:
            env["SYNAPSE_MIND_KEY"] = key
        return subprocess.run([str(BIN / "synapse"), *args], env=env, input=stdin,
                              capture_output=True, text=True, timeout=60)

    return _run


@pytest.fixture
def bob_key(bob_mind, bob):
    from minds.services import key_issue

    return key_issue(mind=bob_mind, name="bob agent", created_by=bob)[1]


@pytest.fixture(params=["stdio", "http"])
def connect(request, synapse_server):
    """``connect(key)`` opens an MCP session over the transport under test."""
    if request.param == "stdio":
        return lambda key: stdio_session(synapse_server, key)
    return lambda key: http_session(f"{synapse_server}/mcp", key)


@asynccontextmanager
async def http_session(url: str, key: str | None):
    """An initialized MCP ClientSession over streamable HTTP, sending ``key`` as Bearer."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def stdio_session(url: str, key: str | None):
    """An initialized MCP ClientSession with the installed ``synapse-mcp`` over stdio."""
    env = {"SYNAPSE_URL": url, "PATH": os.environ.get("PATH", ""), **PASSED_ON}
    if key:
        env["SYNAPSE_MIND_KEY"] = key
    params = StdioServerParameters(command=str(BIN / "synapse-mcp"), env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result) -> str:
    """The text of a CallToolResult."""
    return "\n".join(block.text for block in result.content if block.type == "text")
