"""Open-loop load benchmark: mixed agent traffic at fixed arrival rates against gunicorn.

    .venv/bin/python bench/load.py [--memories 100000] [--minds 100] [--rates 10,20,40,...]
                                   [--nodes 2] [--data-dir DIR]

A throwaway embedded cluster is filled with ``--memories`` synthetic memories spread over
``--minds`` minds (bulk_create, not the API: loading through the service would take hours
on a 2-core machine). Embeddings come from a few dozen real sentence vectors computed
with the bundled model, each stored with a little random noise so the HNSW graph holds
distinct points. Then gunicorn (synapse/gunicorn_conf.py, ``--workers`` workers) and the
embedding worker run, and requests are sent at a fixed arrival rate (open loop: a request
goes out at its scheduled time whether or not earlier ones have answered, and its latency
counts from that scheduled time, so a slow server cannot hide its queue):

- 40 % ``GET /memory/recall?budget=2000`` (session start with a token budget),
- 30 % ``GET /memory/search?q=…&mode=hybrid`` (keyword if hybrid is not available),
- 30 % ``POST /memory`` (a new memory, which the embedding worker then embeds).

With ``--nodes N``, N gunicorn instances (each ``--workers`` workers, on ports of their own)
and N embedding workers run on the one database, and the client sends the requests to the
nodes in turn (round robin), as a load balancer would (docs/scaling.md, "Many web nodes").

Each rate runs ``--seconds``; the report gives p50/p95/p99/max and the error rate per
rate, and the highest rate with p99 ≤ 100 ms and no errors. For each rate it also gives
where the machine's CPU went (from /proc: user + system time of each process tree over
the rate's window, as a share of all cores): the web workers, the embedding worker(s),
PostgreSQL, and the load generator itself. Rate limits stay at their
production defaults (100 minds, one key each, stay far below them). The load generator
runs on the same machine as the server and takes its share of the cores.

``--data-dir DIR`` keeps the cluster in DIR: the first run fills it, later runs (from this
tree or another checkout's copy of this script) reuse it as it is, so two trees can be
compared on one large load without filling it twice (bench/results/scale.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    ROOT,
    Server,
    build_hnsw,
    machine_line,
    setup_django,
    teardown,
)

RESULTS = ROOT / "bench" / "results" / "load.md"
PRODUCTION_RATES = {"SYNAPSE_RATE_WRITE": "600/min", "SYNAPSE_RATE_SEARCH": "600/min",
                    "SYNAPSE_RATE_SEMANTIC": "120/min", "SYNAPSE_RATE_EXPORT": "30/hour",
                    "SYNAPSE_RATE_LOGIN": "20/min", "SYNAPSE_RATE_LOGIN_USERNAME": "5/min"}
TOPICS = ["docker", "kubernetes", "postgres", "python", "django", "rust", "coffee", "hiking",
          "invoice", "deadline", "berlin", "frankfurt", "vacation", "budget", "backup",
          "release", "migration", "security", "keyboard", "garden", "piano", "recipe",
          "meeting", "customer", "latency", "monitoring", "travel", "birthday", "laptop",
          "printer"]
TEMPLATES = ["The user prefers {a} over {b} for daily work.",
             "Project {a} ships after the {b} review next week.",
             "Remember: never run {a} without checking {b} first.",
             "The {a} server in {b} needs a restart every month.",
             "User mentioned {a} and {b} during the last session.",
             "Mistake to avoid: confusing {a} with {b} in reports.",
             "The team uses {a} to track {b} decisions."]
CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "context",
              "note"]


def sentence(rng: random.Random) -> tuple[str, list[str]]:
    a, b = rng.sample(TOPICS, 2)
    return rng.choice(TEMPLATES).format(a=a, b=b), [a, b]


def fill(*, memories: int, minds: int, seed: int = 7) -> list[str]:
    """Create the minds, one write key each, and the memories; return the keys."""
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.db import connection

    from memories.embeddings import embed_texts, model_name
    from memories.models import Memory, MemoryVersion
    from memories.quotas import recount
    from minds.services import key_issue, mind_create

    rng = random.Random(seed)
    owner = get_user_model().objects.create_user("load_owner", password=secrets.token_urlsafe())
    mind_rows, keys = [], []
    for index in range(minds):
        mind = mind_create(owner=owner, name=f"Load mind {index}")
        mind_rows.append(mind)
        keys.append(key_issue(mind=mind, name="load agent", created_by=owner)[1])
    base_texts = [sentence(random.Random(i))[0] for i in range(48)]
    base = np.array(embed_texts(base_texts), dtype=np.float32)
    noise = np.random.default_rng(seed)
    name = model_name()
    started = time.monotonic()
    with connection.cursor() as cursor:
        # Loading and indexing are no request: the server's statement timeout does not apply.
        cursor.execute("SET statement_timeout = 0")
        # Building the HNSW index once after the load is far faster than 100k inserts into it.
        cursor.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
    batch, versions = [], []
    per_mind = memories // minds
    for mind_index, mind in enumerate(mind_rows):
        for number in range(per_mind):
            text, tags = sentence(rng)
            vector = base[rng.randrange(len(base))] + noise.normal(0, 0.02, base.shape[1])
            vector = (vector / np.linalg.norm(vector)).astype(np.float32)
            batch.append(Memory(
                mind=mind, category=CATEGORIES[number % len(CATEGORIES)],
                key=f"m{mind_index}_{number}", content=f"{text} (#{number})", tags=tags,
                priority=rng.choice(["low", "normal", "normal", "normal", "high"]),
                source="agent", verified=number % 3 == 0, confidence=0.7,
                embedding=vector.tolist(), embedding_model=name, embedding_pending=False))
        if len(batch) >= 5000 or mind_index == len(mind_rows) - 1:
            created = Memory.objects.bulk_create(batch, batch_size=2500)
            versions += [MemoryVersion(memory=m, version=1, category=m.category, key=m.key,
                                       content=m.content, tags=m.tags, priority=m.priority,
                                       source=m.source, confidence=m.confidence,
                                       recorded_by_type="system",
                                       recorded_by="load") for m in created]
            MemoryVersion.objects.bulk_create(versions, batch_size=2500)
            batch, versions = [], []
    recount()  # the minds' quota counters (semantic search reads its mind's size there)
    loaded = time.monotonic() - started
    with connection.cursor() as cursor:
        build_hnsw(cursor)
        indexed = time.monotonic() - started - loaded
        cursor.execute("VACUUM ANALYZE memories_memory")
    print(f"loaded {Memory.objects.count()} memories in {loaded:.0f}s, "
          f"indexed in {indexed:.0f}s", flush=True)
    return keys, (f"Loading took {loaded:.0f} s; the HNSW index (m=16, ef_construction=64) "
                  f"was built in {indexed:.0f} s; " + sizes_line())


def sizes_line() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size('memory_embedding_hnsw'), "
                       "pg_total_relation_size('memories_memory')")
        index_bytes, table_bytes = cursor.fetchone()
    return (f"the HNSW index is {index_bytes / 2**20:,.0f} MiB (the memories table with all "
            f"its indexes and TOAST: {table_bytes / 2**20:,.0f} MiB).")


def reuse(minds: int) -> tuple[list[str], str] | None:
    """The keys of a cluster an earlier ``--data-dir`` run filled (one new key per mind;
    its size is what that run loaded, whatever ``--memories`` says now), or None when the
    cluster holds no load minds yet."""
    from django.contrib.auth import get_user_model

    from memories.models import Memory
    from memories.quotas import recount
    from minds.models import Mind
    from minds.services import key_issue

    owner = get_user_model().objects.filter(username="load_owner").first()
    if owner is None:
        return None
    loaded = Mind.objects.filter(name__startswith="Load mind ").order_by("created_at")[:minds]
    recount()  # a tree before memories.quotas.recount may have filled it
    keys = [key_issue(mind=mind, name="load agent", created_by=owner)[1] for mind in loaded]
    return keys, (f"Reused a cluster an earlier run filled ({Memory.objects.count():,} "
                  f"memories); " + sizes_line())


async def run_rate(urls: list[str], keys: list[str], rate: float, seconds: float,
                   hybrid: bool, seed: int, words: tuple[int, ...] = (1, 2)) -> dict:
    """One rate; request ``i`` goes to ``urls[i % len(urls)]`` (round robin); each search
    asks ``words`` topics (one of them, drawn each time)."""
    import httpx

    rng = random.Random(seed)
    total = int(rate * seconds)
    samples: list[tuple[str, float, int | str]] = []
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    clients = [httpx.AsyncClient(base_url=url, timeout=30, limits=limits) for url in urls]
    try:

        async def one(index: int, scheduled: float) -> None:
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
            client = clients[index % len(clients)]
            key = rng.choice(keys)
            headers = {"Authorization": f"Bearer {key}"}
            roll = rng.random()
            try:
                if roll < 0.4:
                    kind = "recall"
                    response = await client.get("/memory/recall", params={"budget": 2000},
                                                headers=headers)
                elif roll < 0.7:
                    kind = "search"
                    params = {"q": " ".join(rng.sample(TOPICS, rng.choice(words)))}
                    if hybrid:
                        params["mode"] = "hybrid"
                    response = await client.get("/memory/search", params=params,
                                                headers=headers)
                else:
                    kind = "store"
                    text, tags = sentence(rng)
                    response = await client.post("/memory", headers=headers, json={
                        "category": "context", "content": f"{text} load {seed}/{index}",
                        "tags": tags})
                status: int | str = response.status_code
            except httpx.HTTPError as error:
                status = type(error).__name__
            samples.append((kind, (time.perf_counter() - scheduled) * 1000, status))

        start = time.perf_counter() + 0.5
        await asyncio.gather(*(one(i, start + i / rate) for i in range(total)))
    finally:
        for client in clients:
            await client.aclose()
    return summarise(rate, samples)


class CpuMeter:
    """CPU seconds (user + system, from /proc) of process groups, between two readings."""

    def __init__(self, groups: dict[str, list[int]]):
        self.groups = groups  # name → root pids; each root counts with its descendants
        self.ticks = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _processes() -> dict[int, tuple[int, int]]:
        """pid → (parent pid, user + system ticks) of every process, with those of its
        children that exited and were waited for (cutime, cstime): a PostgreSQL backend that
        ends between two readings stays counted, in its postmaster."""
        table = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            table[int(entry.name)] = (int(fields[1]), sum(int(tick) for tick in fields[11:15]))
        return table

    def read(self) -> dict[str, float]:
        table = self._processes()
        children: dict[int, list[int]] = {}
        for pid, (parent, _ticks) in table.items():
            children.setdefault(parent, []).append(pid)
        seconds = {}
        for name, roots in self.groups.items():
            total, stack = 0, [root for root in roots if root in table]
            while stack:
                pid = stack.pop()
                total += table[pid][1]
                stack += children.get(pid, [])
            seconds[name] = total / self.ticks
        times = os.times()
        seconds["load generator"] = times.user + times.system
        return seconds


def cpu_shares(before: dict, after: dict, wall: float) -> dict[str, float]:
    """Each group's share of the machine (all cores) between two readings."""
    capacity = wall * (os.cpu_count() or 1)
    return {name: (after[name] - before[name]) / capacity for name in after}


def postmaster_pid(data_dir: str) -> int | None:
    """The embedded cluster's postmaster (its backends are its children)."""
    try:
        return int((Path(data_dir) / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def memory_mib(pid: int) -> tuple[float, float]:
    """(PSS, RSS) of one process in MiB: PSS shares each page among the processes that map
    it (the model's weights, loaded before gunicorn forks, count once across workers)."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Pss", "Rss"):
            values[name] = int(rest.split()[0]) / 1024
    return values.get("Pss", 0.0), values.get("Rss", 0.0)


def memory_line(servers, workers) -> str:
    """Memory of each web worker (after warm-up: model loaded, connections open) and of
    the embedding worker(s)."""
    web = [memory_mib(int(entry.name)) for server in servers
           for entry in Path("/proc").iterdir() if entry.name.isdigit()
           and _parent(int(entry.name)) == server.process.pid]
    embed = [memory_mib(worker.pid) for worker in workers]
    if not web:
        return ""

    def mean(values):
        return sum(values) / len(values)

    return (f"Memory after warm-up: each web worker PSS {mean([p for p, _ in web]):.0f} MiB "
            f"(RSS {mean([r for _, r in web]):.0f} MiB; {len(web)} workers, gunicorn master "
            "not counted); the embedding worker PSS "
            f"{mean([p for p, _ in embed]):.0f} MiB (RSS {mean([r for _, r in embed]):.0f} MiB).")


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


CPU_GROUPS = ("web", "embedding worker", "PostgreSQL", "load generator")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def summarise(rate: float, samples) -> dict:
    latencies = [ms for _, ms, _ in samples]
    errors = [status for _, _, status in samples
              if not (isinstance(status, int) and status < 400)]
    by_kind = {}
    for kind in ("recall", "search", "store"):
        kind_ms = [ms for k, ms, _ in samples if k == kind]
        if kind_ms:
            by_kind[kind] = percentile(kind_ms, 99)
    return {"rate": rate, "n": len(samples), "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95), "p99": percentile(latencies, 99),
            "max": max(latencies), "errors": len(errors),
            "error_kinds": sorted({str(e) for e in errors}), "p99_by_kind": by_kind}


def report(rows: list[dict], args, setup: str) -> str:
    good = [row["rate"] for row in rows if row["p99"] <= 100 and row["errors"] == 0]
    best = max(good) if good else None
    lines = ["# Load benchmark (bench/load.py)", "",
             f"{machine_line()} · {nodes_line(args)} · "
             f"{args.memories:,} memories in {args.minds} minds · {args.seconds:.0f} s per rate",
             "", setup, "",
             "Open loop: requests leave at a fixed arrival rate; latency counts from each "
             "request's scheduled time (queueing included). Mix: 40 % recall (budget=2000), "
             "30 % search (hybrid), 30 % store." + (
                 " Searches of three topics each (--distinct-questions): few repeat."
                 if args.distinct_questions else ""), "",
             "| rate req/s | requests | p50 ms | p95 ms | p99 ms | max ms | errors | "
             "p99 recall / search / store ms | CPU % web / embedding worker / PostgreSQL / "
             "load generator |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        kinds = " / ".join(f"{row['p99_by_kind'].get(k, 0):.0f}"
                           for k in ("recall", "search", "store"))
        errors = f"{row['errors']}" + (f" ({', '.join(row['error_kinds'])})"
                                       if row["errors"] else "")
        cpu = " / ".join(f"{row['cpu'][group]:.0%}" for group in CPU_GROUPS) \
            if row.get("cpu") else "–"
        lines.append(f"| {row['rate']:g} | {row['n']} | {row['p50']:.1f} | {row['p95']:.1f} | "
                     f"{row['p99']:.1f} | {row['max']:.0f} | {errors} | {kinds} | {cpu} |")
    lines += ["", "CPU %: user + system time of each process tree during the rate's window, "
              f"as a share of all {os.cpu_count()} cores (100 % = every core busy); the "
              "embedding worker runs at the niceness and thread bound of docs/scaling.md "
              "(\"The embedding worker\").", "",
              "**Highest rate with p99 ≤ 100 ms and zero errors: "
              + (f"{best:g} req/s**" if best else "none of the rates tried**"), ""]
    return "\n".join(lines)


def nodes_line(args) -> str:
    if args.nodes == 1:
        return f"gunicorn {args.workers} workers + embedding worker"
    return (f"{args.nodes} nodes (gunicorn {args.workers} workers each, round robin) + "
            f"{args.nodes} embedding workers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--minds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rates", default="5,10,20,30,40,60,80")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--nodes", type=int, default=1,
                        help="gunicorn instances (and embedding workers) on the one database")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    parser.add_argument("--data-dir", help="use (and keep) this cluster: filled on the first "
                                           "run, reused as it is on later ones")
    parser.add_argument("--distinct-questions", action="store_true",
                        help="three topics per search (24,360 orders): the servers' query "
                             "embedding cache (1,024 per process) rarely answers")
    parser.add_argument("--no-write", action="store_true", help="print, do not write results")
    parser.add_argument("--output", default=str(RESULTS), help="where the report goes")
    args = parser.parse_args()

    data_dir = setup_django(args.data_dir)
    os.environ.update(PRODUCTION_RATES)
    keys, setup = (args.data_dir and reuse(args.minds)) or fill(memories=args.memories,
                                                                minds=args.minds)
    workers = [subprocess.Popen([sys.executable, "manage.py", "embed_worker"], cwd=ROOT,
                                env=os.environ.copy(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for _ in range(args.nodes)]
    servers = [Server(workers=args.workers, extra_env=PRODUCTION_RATES)
               for _ in range(args.nodes)]
    rows = []
    try:
        headers = {"Authorization": f"Bearer {keys[0]}"}
        for server in servers:
            server.wait("/memory/health", headers)
        import httpx

        url = servers[0].url
        hybrid = httpx.get(url + "/memory/search", params={"q": "docker", "mode": "hybrid"},
                           headers=headers, timeout=60).status_code == 200
        if not hybrid:
            setup += " Hybrid search was not available: search ran in keyword mode."
        # Warm-up, not measured: every worker loads the embedding model on its first query.
        for index in range(12 * args.workers * args.nodes):
            url = servers[index % args.nodes].url
            httpx.get(url + "/memory/search", params={"q": TOPICS[index % 30],
                      "mode": "hybrid" if hybrid else "keyword"},
                      headers={"Authorization": f"Bearer {keys[index % len(keys)]}"},
                      timeout=120)
            httpx.get(url + "/memory/recall", params={"budget": 2000},
                      headers={"Authorization": f"Bearer {keys[index % len(keys)]}"},
                      timeout=120)
        setup += " " + memory_line(servers, workers)
        urls = [server.url for server in servers]
        meter = CpuMeter({"web": [server.process.pid for server in servers],
                          "embedding worker": [worker.pid for worker in workers],
                          "PostgreSQL": [pid for pid in [postmaster_pid(data_dir)] if pid]})
        for index, rate in enumerate(float(r) for r in args.rates.split(",")):
            before, started = meter.read(), time.monotonic()
            row = asyncio.run(run_rate(urls, keys, rate, args.seconds, hybrid, index,
                                       words=(3,) if args.distinct_questions else (1, 2)))
            row["cpu"] = cpu_shares(before, meter.read(), time.monotonic() - started)
            rows.append(row)
            print(row, flush=True)
            if row["p99"] > 2000 and index > 0:
                break  # far past saturation: higher rates only queue longer
    finally:
        for server in servers:
            server.stop()
        for worker in workers:
            worker.terminate()
            worker.wait(20)
        teardown(data_dir, args.keep or bool(args.data_dir))
    text = report(rows, args, setup)
    print(text)
    if not args.no_write:
        Path(args.output).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
