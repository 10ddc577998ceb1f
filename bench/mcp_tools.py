"""MCP benchmark: the same work through /mcp (streamable HTTP), through synapse-mcp
(stdio → REST) and through the REST route itself, beside the raw SQL, in the same run.

    .venv/bin/python bench/mcp_tools.py [--requests 300] [--keep-data]

A mind of 1,000 memories; gunicorn with the production configuration
(synapse/gunicorn_conf.py, 2 uvicorn workers). Writes bench/results/mcp.md.
"""

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    ROOT,
    Server,
    Stats,
    capture_sql,
    machine_line,
    raw_connection,
    replay,
    setup_django,
    table,
    teardown,
    timed,
)
from bench.core import fill, sentence  # noqa: E402

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def without_server_cursors(statements: list[str]) -> list[str]:
    """Recall streams rows through a named server-side cursor (``.iterator()``); replayed,
    its SELECT runs as a plain query that fetches the same rows."""
    return [re.sub(r'^DECLARE "[^"]+" NO SCROLL CURSOR WITH(OUT)? HOLD FOR ', "", sql)
            for sql in statements]


def tool_call(name: str, arguments: dict, number: int) -> dict:
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def stdio_timings(url: str, key: str, calls: list[tuple[str, dict]], repeat: int
                  ) -> list[list[float]]:
    """Per tool, ``repeat`` call latencies through one ``synapse-mcp`` process."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "synapse-mcp"),
        # Its agent instance id goes to a folder of the benchmark's, not the user's.
        env={"SYNAPSE_URL": url, "SYNAPSE_MIND_KEY": key, "PATH": os.environ["PATH"],
             "SYNAPSE_CONFIG_DIR": tempfile.mkdtemp(prefix="synapse-bench-config-")})

    async def run() -> list[list[float]]:
        results = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for name, arguments in calls:
                for _warm in range(20):
                    await session.call_tool(name, arguments)
                samples = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    result = await session.call_tool(name, arguments)
                    samples.append((time.perf_counter() - started) * 1000)
                    assert not result.is_error, result
                results.append(samples)
        return results

    return anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench/results/mcp.md"))
    args = parser.parse_args()

    data_dir = setup_django()
    import httpx
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from minds.services import key_issue, mind_create

    rng = random.Random(11)
    owner = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    mind = mind_create(owner=owner, name="Bench MCP")
    fill(mind, 1_000, rng)
    _key, plain = key_issue(mind=mind, name="bench")
    memory_id = mind.memories.order_by("id").values_list("id", flat=True).first()

    server = Server(workers=2)
    headers = {"Authorization": f"Bearer {plain}"}
    server.wait("/memory/health", headers)
    http = httpx.Client(base_url=server.url, timeout=60, headers=headers)
    inproc = APIClient()
    inproc.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    raw = raw_connection()
    n = args.requests
    rows = []

    def measure(name, http_call, sql=None):
        for warm in range(20):
            http_call(-warm - 1)
        http_stats = Stats(name, timed(http_call, n))
        raw_stats = None if sql is None else Stats(name, timed(lambda i: replay(raw, sql), n))
        rows.append((http_stats, raw_stats))
        print(f"{name}: p50 {http_stats.p50:.2f} ms, p95 {http_stats.pct(95):.2f} ms",
              flush=True)

    def mcp(name, arguments):
        def call(i):
            response = http.post("/mcp", headers=MCP_HEADERS,
                                 json=tool_call(name, arguments, i))
            assert response.status_code == 200, response.text
            assert not response.json()["result"].get("isError"), response.text
        return call

    recall_sql = without_server_cursors(capture_sql(
        lambda: inproc.get("/memory/recall?format=json&budget=2000")))
    measure("REST GET /memory/recall?format=json&budget=2000",
            lambda i: http.get("/memory/recall", params={"format": "json", "budget": 2000}
                               ).raise_for_status(), recall_sql)
    measure("/mcp recall(budget=2000)", mcp("recall", {"budget": 2000}), recall_sql)

    get_sql = without_server_cursors(capture_sql(lambda: inproc.get(f"/memory/{memory_id}")))
    measure("REST GET /memory/{id}", lambda i: http.get(f"/memory/{memory_id}"
                                                        ).raise_for_status(), get_sql)
    measure("/mcp get_memory", mcp("get_memory", {"memory_id": memory_id}), get_sql)

    def store_rest(i):
        http.post("/memory", json={"category": "note", "key": f"rest_{uuid.uuid4().hex}",
                                   "content": sentence(rng)}).raise_for_status()

    def store_mcp(i):
        mcp("remember", {"category": "note", "key": f"mcp_{uuid.uuid4().hex}",
                         "content": sentence(rng)})(i)

    measure("REST POST /memory (store new)", store_rest)
    measure("/mcp remember (store new)", store_mcp)

    refused = {"Authorization": "Bearer mk_" + "0" * 52, **MCP_HEADERS}

    def refuse(i):
        response = http.post("/mcp", headers=refused,
                             content=json.dumps(tool_call("stats", {}, i)))
        assert response.status_code == 401

    measure("/mcp refused (malformed key)", refuse)

    stdio_names = [("synapse-mcp (stdio) recall(budget=2000)", "recall", {"budget": 2000}),
                   ("synapse-mcp (stdio) get_memory", "get_memory", {"memory_id": memory_id})]
    for (label, _name, _arguments), samples in zip(stdio_names, stdio_timings(
            server.url, plain, [(name, arguments) for _, name, arguments in stdio_names], n),
            strict=True):
        rows.append((Stats(label, samples), None))
        print(f"{label}: p50 {Stats(label, samples).p50:.2f} ms", flush=True)

    server.stop()
    raw.close()
    report = "\n".join([
        "# MCP benchmark", "",
        f"Machine: {machine_line()}. Server: gunicorn, synapse/gunicorn_conf.py, 2 uvicorn "
        "workers (synapse.asgi: /mcp beside Django on a 4-thread pool), embedded PostgreSQL "
        "over a Unix socket.",
        f"Data: a mind of 1,000 memories. {n} sequential requests per row after 20 warm-up "
        "requests, one keep-alive HTTP client; `req/s` is that sequential rate. /mcp rows "
        "are one stateless JSON-RPC `tools/call` POST each (the key is checked, then the "
        "tool calls the REST route in-process); stdio rows go through one `synapse-mcp` "
        "process and the official client SDK, which then calls the REST API over HTTP.",
        "Raw SQL: the statements the REST route issued (captured in-process, parameters "
        "inlined), replayed with psycopg on one connection in the same run. The /mcp rows "
        "are compared with the same SQL: the difference is the MCP layer, the extra key "
        "check and the text rendering.", "",
        table(rows), "",
        "Read the rows of one run against each other: on a 2-core machine shared with other "
        "work, absolute numbers move between runs; the MCP layer's own cost is the "
        "difference between a /mcp row and the REST row above it.", ""])
    Path(args.output).write_text(report, encoding="utf-8")
    print(report)
    teardown(data_dir, args.keep_data)


if __name__ == "__main__":
    main()
