"""A real Synapse server for the client tests: synapse.asgi (Django and /mcp) under
uvicorn in a thread of the test process, so it sees the test database, behind a recorder
of the request headers it receives; plus MCP client sessions over both transports."""

import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
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


class HeaderRecorder:
    """ASGI middleware (tests only): keeps the method, path and headers of the last HTTP
    requests the server received, names lower-cased."""

    def __init__(self, app):
        self.app = app
        self.requests: deque[tuple[str, str, dict[str, str]]] = deque(maxlen=500)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.requests.append((scope["method"], scope["path"], {
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in scope["headers"]}))
        await self.app(scope, receive, send)

    def headers_of(self, method: str, path: str) -> list[dict[str, str]]:
        return [headers for seen_method, seen_path, headers in self.requests
                if (seen_method, seen_path) == (method, path)]


RECORDER: HeaderRecorder | None = None


@pytest.fixture
def received(synapse_server) -> HeaderRecorder:
    """What the live server received from now on."""
    RECORDER.requests.clear()
    return RECORDER


@pytest.fixture(scope="session")
def client_config_dir(tmp_path_factory) -> Path:
    """SYNAPSE_CONFIG_DIR for the clients the tests start: never the user's own."""
    return tmp_path_factory.mktemp("synapse-config")


@pytest.fixture(autouse=True)
def _client_config_in_a_test_folder(monkeypatch, client_config_dir):
    monkeypatch.setenv("SYNAPSE_CONFIG_DIR", str(client_config_dir))


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

    global RECORDER
    with django_db_blocker.unblock():
        from synapse import asgi

        port = free_port()
        RECORDER = HeaderRecorder(asgi.application)
        config = uvicorn.Config(RECORDER, host="127.0.0.1", port=port,
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
def synapse(synapse_server, alice_key, client_config_dir):
    """``synapse(*args, key=…, stdin=…, env=…)`` runs the installed CLI as alice's agent by
    default; ``env`` adds environment variables."""

    def _run(*args: str, key: str | None = alice_key[1], stdin: str | None = None,
             url: str = synapse_server, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess:
        env = {"SYNAPSE_URL": url, "COLUMNS": "200",
               "SYNAPSE_CONFIG_DIR": str(client_config_dir), **PASSED_ON, **(env or {})}
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
def connect(request, synapse_server, client_config_dir):
    """``connect(key)`` opens an MCP session over the transport under test."""
    if request.param == "stdio":
        return lambda key: stdio_session(synapse_server, key,
                                         env={"SYNAPSE_CONFIG_DIR": str(client_config_dir)})
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
async def stdio_session(url: str, key: str | None, *, env: dict[str, str] | None = None,
                        client_info=None):
    """An initialized MCP ClientSession with the installed ``synapse-mcp`` over stdio;
    ``env`` adds environment variables, ``client_info`` names the MCP client."""
    env = {"SYNAPSE_URL": url, "PATH": os.environ.get("PATH", ""),
           "SYNAPSE_CONFIG_DIR": os.environ.get("SYNAPSE_CONFIG_DIR", ""), **PASSED_ON,
           **(env or {})}
    if key:
        env["SYNAPSE_MIND_KEY"] = key
    params = StdioServerParameters(command=str(BIN / "synapse-mcp"), env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, client_info=client_info) as session,
    ):
        await session.initialize()
        yield session


def text_of(result) -> str:
    """The text of a CallToolResult."""
    return "\n".join(block.text for block in result.content if block.type == "text")
