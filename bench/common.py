"""Shared benchmark plumbing: a throwaway data folder, Django set-up, a real server
process, latency statistics, and replay of the SQL an endpoint issued.

Benchmarks are scripts, never timed tests. Each one measures the endpoint over real HTTP
and, in the same run, the raw SQL that endpoint issues, so the report shows the ratio.
"""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from http.client import HTTPConnection, RemoteDisconnected
from json import dumps as to_json
from json import loads as from_json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup_django(data_dir: str | None = None) -> str:
    """Point Synapse at ``data_dir`` (a new temporary one by default), set Django up,
    migrate, and return the folder."""
    if not os.environ.get("DATABASE_URL"):
        data_dir = data_dir or tempfile.mkdtemp(prefix="synapse-bench-")
        os.environ["SYNAPSE_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapse.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # A benchmark measures latency, not the rate limiter: lift every limit.
    for scope in ("WRITE", "SEARCH", "SEMANTIC", "RECALL", "EXPORT", "SYNC", "IMPORT", "LOGIN",
                  "LOGIN_USERNAME"):
        os.environ.setdefault(f"SYNAPSE_RATE_{scope}", "100000000/min")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return data_dir or ""


def teardown(data_dir: str, keep: bool) -> None:
    if data_dir and not keep:
        from synapse import embedded_db

        embedded_db.destroy(data_dir)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """gunicorn with Synapse's production configuration, on a free local port."""

    def __init__(self, *, workers: int = 2, extra_env: dict | None = None,
                 tree: Path = ROOT):
        """``extra_env`` configures it (bench/floor.py runs gunicorn's gthread worker with
        ``SYNAPSE_WORKER_CLASS``); ``tree``: the checkout whose code it serves (bench/ab.py
        serves an older one beside this one)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "SYNAPSE_BIND": f"127.0.0.1:{self.port}",
               "WEB_CONCURRENCY": str(workers), "LOG_LEVEL": "WARNING", **(extra_env or {})}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "synapse/gunicorn_conf.py"],
            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait(self, path: str, headers: dict, timeout: float = 120) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("server exited: " + self.process.stderr.read().decode())
            try:
                if httpx.get(self.url + path, headers=headers, timeout=5).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("server did not come up")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class HttpResponse:
    status_code: int
    headers: dict
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return from_json(self.content)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"HTTP {self.status_code}: {self.text[:500]}")


class HttpClient:
    """A keep-alive HTTP/1.1 client on the standard library's http.client: what the benches
    time requests with. httpx spends about 1 ms of its own Python on each request on these
    machines (its request and response models, h11's state machine), which a timing counts
    as the endpoint's; bench/floor.py measures both clients on the same route in one run.
    Requests send ``headers`` (the defaults) and any given per request; one connection,
    opened again when the server has closed it between requests."""

    def __init__(self, base_url: str, *, headers: dict | None = None, timeout: float = 30):
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.headers = dict(headers or {})
        self._connection: HTTPConnection | None = None

    def get(self, path: str, *, params: dict | None = None,
            headers: dict | None = None) -> HttpResponse:
        return self.request("GET", path, params=params, headers=headers)

    def post(self, path: str, *, json: object = None, headers: dict | None = None
             ) -> HttpResponse:
        return self.request("POST", path, json=json, headers=headers)

    def request(self, method: str, path: str, *, params: dict | None = None,
                json: object = None, headers: dict | None = None) -> HttpResponse:
        if params:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(params)
        sent = {**self.headers, **(headers or {})}
        body = None
        if json is not None:
            body = to_json(json).encode()
            sent["Content-Type"] = "application/json"
        for attempt in (1, 2):
            if self._connection is None:
                self._connection = HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._connection.request(method, path, body=body, headers=sent)
                response = self._connection.getresponse()
                content = response.read()
            except (RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The server closed the idle connection before this request reached it.
                self.close()
                if attempt == 2:
                    raise
                continue
            if response.will_close:
                self.close()
            return HttpResponse(response.status, dict(response.getheaders()), content)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@dataclass
class Stats:
    name: str
    samples_ms: list[float]

    def pct(self, q: float) -> float:
        ordered = sorted(self.samples_ms)
        index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
        return ordered[index]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def throughput(self) -> float:
        """Requests per second of this sequential run."""
        return 1000 * len(self.samples_ms) / sum(self.samples_ms)


def timed(call, repeat: int) -> list[float]:
    samples = []
    for index in range(repeat):
        started = time.perf_counter()
        call(index)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


# pgvector builds the HNSW graph in maintenance_work_mem; once the graph no longer fits it
# goes on far more slowly (at 1,000,000 vectors of 384 dimensions with the embedded
# cluster's 256 MB: ~190 rows/s after the first ~300,000; bench/results/scale.md). The
# benches build their index after loading with room for a million vectors' graph.
HNSW_BUILD_MEMORY = os.environ.get("BENCH_HNSW_MEMORY", "3GB")


def build_hnsw(cursor) -> None:
    """Create the memories' HNSW index (as the migrations define it) on a loaded table."""
    cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [HNSW_BUILD_MEMORY])
    cursor.execute("CREATE INDEX memory_embedding_hnsw ON memories_memory USING hnsw "
                   "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
    cursor.execute("RESET maintenance_work_mem")


def capture_sql(call) -> list[str]:
    """The SQL statements (parameters inlined) Django issues while ``call()`` runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        call()
    return [query["sql"] for query in captured.captured_queries]


class DatabaseClock:
    """Time this process spends waiting on PostgreSQL over Django's default connection:
    every round trip (statements, a server-side cursor's fetches, BEGIN and COMMIT),
    timed around psycopg's wait. ``seconds`` accumulates; use it as a context manager.

    A statement inside a request is not the statement replayed back to back: while the
    request runs Python, PostgreSQL's process idles, and on these machines a statement
    after a pause of a few milliseconds takes 2-2.5× its back-to-back time
    (bench/results/core.md, "The same statement after a pause"). This clock measures the
    SQL's time where it runs, in the request."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        from django.db import connection

        connection.ensure_connection()
        self._conn = connection.connection
        original = self._conn.wait

        def wait(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        self._conn.wait = wait  # shadows psycopg's method on this connection only
        return self

    def __exit__(self, *exc):
        del self._conn.wait


def database_time(call, repeat: int) -> list[float]:
    """Milliseconds each of ``repeat`` calls of ``call(i)`` waited on PostgreSQL."""
    samples = []
    for index in range(repeat):
        with DatabaseClock() as clock:
            call(index)
        samples.append(clock.seconds * 1000)
    return samples


def check(response, status: int = 200):
    """An in-process answer (Django's test client) with the status a bench expects."""
    assert response.status_code == status, response.content[:300]
    return response


def raw_connection():
    """A plain psycopg connection to the same database, outside Django."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.connect(**params, autocommit=True)


DECLARE = re.compile(r'^DECLARE "([^"]+)"', re.S)
CHUNK = 500  # Django's .iterator(chunk_size=500) in recall


def replay(conn, statements: list[str], cursor_rows: int | None = None) -> None:
    """Run statements as Django did: transaction statements as given, results fetched.
    A server-side cursor (``.iterator()``) is replayed as Django reads it: DECLARE, then
    FETCH in chunks of CHUNK until ``cursor_rows`` rows (all when None), then CLOSE; the
    capture holds its DECLARE but not the FETCHes."""
    with conn.cursor() as cursor:
        for sql in statements:
            declared = DECLARE.match(sql)
            if declared:
                cursor.execute(sql.encode())
                name, read = declared.group(1), 0
                while cursor_rows is None or read < cursor_rows:
                    cursor.execute(f'FETCH FORWARD {CHUNK} FROM "{name}"'.encode())
                    rows = cursor.fetchall()
                    read += len(rows)
                    if len(rows) < CHUNK:
                        break
                cursor.execute(f'CLOSE "{name}"'.encode())
                continue
            cursor.execute(sql.encode())
            if cursor.description is not None:
                cursor.fetchall()


def table(rows: list[tuple]) -> str:
    """Rows of (HTTP stats, raw SQL replay stats or None[, SQL in the request stats])."""
    in_request = any(len(row) > 2 for row in rows)
    lines = ["| endpoint | n | p50 ms | p95 ms | p99 ms | req/s | raw SQL p50 | raw SQL p95 "
             "| ratio p95 |" + (" SQL in the request p50 | p95 | ratio p95 |" if in_request
                                else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if in_request else "")]
    for http, raw, *inside in rows:
        raw_cells = ("–", "–", "–") if raw is None else (
            f"{raw.p50:.2f}", f"{raw.pct(95):.2f}", f"{http.pct(95) / raw.pct(95):.1f}×")
        line = (f"| {http.name} | {len(http.samples_ms)} | {http.p50:.2f} | "
                f"{http.pct(95):.2f} | {http.pct(99):.2f} | {http.throughput:.0f} | "
                f"{raw_cells[0]} | {raw_cells[1]} | {raw_cells[2]} |")
        if in_request:
            line += (" – | – | – |" if not inside or inside[0] is None else
                     f" {inside[0].p50:.2f} | {inside[0].pct(95):.2f} | "
                     f"{http.pct(95) / inside[0].pct(95):.1f}× |")
        lines.append(line)
    return "\n".join(lines)


def machine_line() -> str:
    import platform

    return (f"{platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"
            f" · {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
