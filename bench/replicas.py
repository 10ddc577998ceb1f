"""Read-replica benchmark: how far a local streaming standby lags, and what routing costs.

    .venv/bin/python bench/replicas.py [--writes 200] [--requests 300]

A primary and a ``pg_basebackup -R`` standby from the embedded PostgreSQL binaries
(tests/synapse/replicated.py), on this machine. Measures:

- replication lag: a row committed on the primary, polled for on the standby (psycopg,
  autocommit) until it is visible, ``--writes`` times, one write at a time;
- the same read routes over HTTP (gunicorn, 1 worker, 2 threads) on a server without
  replicas and on one whose list/search/recall read from the standby, by a principal that
  does not write (the standby) and one that writes before each read (the primary).

Writes bench/results/replicas.md.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench.common import Stats, machine_line, timed  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "replicas.md"


def measure_lag(world, writes: int) -> Stats:
    from tests.synapse.replicated import connect

    samples = []
    with connect(world.primary) as primary, connect(world.standby) as standby:
        primary.execute("CREATE TABLE IF NOT EXISTS bench_lag (n int PRIMARY KEY)")
        world.wait_replayed()
        for n in range(writes):
            primary.execute("INSERT INTO bench_lag VALUES (%s)", [n])
            committed = time.perf_counter()
            while standby.execute("SELECT 1 FROM bench_lag WHERE n = %s", [n]).fetchone() \
                    is None:
                pass
            samples.append((time.perf_counter() - committed) * 1000)
        primary.execute("DROP TABLE bench_lag")
    return Stats("replication lag (commit → visible on the standby)", samples)


ROUTES = {"list": "/memory?limit=20", "search": "/memory/search?q=fact",
          "recall (budget 2000)": "/memory/recall?budget=2000"}
WRITER_ROUTE = "list, right after the caller's own write"


def scenarios(world, server, requests: int) -> dict[str, Stats]:
    """Each read route as a principal that never writes, then a list right after a store
    by the same principal (the store is not timed)."""
    writer = {"Authorization": f"Bearer {world.live.key}"}
    reader = {"Authorization": f"Bearer {world.reader_key}"}
    results = {}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for _ in range(20):
            client.get(ROUTES["list"], headers=reader)
        for name, path in ROUTES.items():
            results[name] = Stats(name, timed(
                lambda _i, path=path: client.get(path, headers=reader), requests))
        samples = []
        for index in range(requests):
            client.post("/memory", headers=writer, json={
                "category": "note", "key": "bench_writer", "content": f"Write {index}."})
            started = time.perf_counter()
            client.get(ROUTES["list"], headers=writer)
            samples.append((time.perf_counter() - started) * 1000)
        results[WRITER_ROUTE] = Stats(WRITER_ROUTE, samples)
    return results


def measure_routes(world, requests: int) -> list[tuple[str, Stats, Stats]]:
    from tests.security.live import Server

    plain = Server(world.live, workers=1, threads=2, env={"LOG_LEVEL": "WARNING"})
    try:
        writer = {"Authorization": f"Bearer {world.live.key}"}
        for index in range(200):
            httpx.post(f"{plain.url}/memory", headers=writer, json={
                "category": "fact", "key": f"bench_{index}",
                "content": f"Benchmark fact number {index} about replicas."})
        baseline = scenarios(world, plain, requests)
    finally:
        plain.stop()
    world.wait_replayed()
    routed = world.server(DATABASE_REPLICA_MAX_LAG_MS="2000", DATABASE_REPLICA_CHECK_MS="1000")
    try:
        measured = scenarios(world, routed, requests)
        log = routed.output()
    finally:
        routed.stop()
    assert "read replica replica1 is in use" in log, log[-2000:]
    return [(name, baseline[name], measured[name]) for name in baseline]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    from tests.synapse.replicated import Replicated

    world = Replicated()
    try:
        lag = measure_lag(world, args.writes)
        rows = measure_routes(world, args.requests)
    finally:
        world.destroy()
    lines = [
        "# Read replicas: lag of a local standby, and the cost of routing",
        "",
        f"{machine_line()} · `bench/replicas.py --writes {args.writes} "
        f"--requests {args.requests}`",
        "",
        "A primary and a streaming standby (`pg_basebackup -R`, asynchronous) of the embedded "
        "PostgreSQL on one machine, over Unix sockets.",
        "",
        "| | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
        f"| {lag.name} | {lag.p50:.2f} | {lag.pct(95):.2f} | {max(lag.samples_ms):.2f} |",
        "",
        "Read routes over HTTP (gunicorn, 1 worker, 2 threads; a mind of 200 memories), "
        "p50 / p95 ms: without replicas, and with the standby configured "
        "(`DATABASE_REPLICA_CHECK_MS=1000`, `DATABASE_REPLICA_MAX_LAG_MS=2000`).",
        "",
        "| route | no replica p50 | p95 | routed p50 | p95 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, before, after in rows:
        lines.append(f"| {name} | {before.p50:.2f} | {before.pct(95):.2f} | "
                     f"{after.p50:.2f} | {after.pct(95):.2f} |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
