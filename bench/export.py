"""Export benchmark: a mind of 100,000 memories exported over real HTTP (JSON and CSV),
with the time, the peak memory of the server process, and the raw SQL of the export
replayed in the same run; then the JSON restored into an empty mind.

    .venv/bin/python bench/export.py [--memories 100000] [--runs 5] [--keep-data]

gunicorn with the production configuration and one worker, so the worker's peak resident
memory (VmHWM from /proc) is the export's. In-process, tracemalloc measures the Python
memory the JSON generator holds at its peak. Writes bench/results/export.md.
"""

import argparse
import random
import sys
import time
import tracemalloc
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
    teardown,
)

WORDS = ["project", "release", "deploy", "docker", "kubernetes", "server", "database",
         "backup", "prefers", "concise", "answers", "meeting", "friday", "berlin", "coffee",
         "python", "django", "postgres", "vector", "search", "memory", "agent", "user",
         "likes", "team", "review", "budget", "invoice", "travel", "flight", "hotel"]
CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "context",
              "note"]


def fill(mind, count: int, rng: random.Random) -> None:
    """``count`` memories, each with two versions; one in twenty in the trash."""
    from django.utils import timezone

    from memories.models import Memory, MemoryVersion

    now = timezone.now()
    for start in range(0, count, 5000):
        memories, versions = [], []
        for number in range(start, min(count, start + 5000)):
            when = now - timezone.timedelta(seconds=count - number)
            content = " ".join(rng.choice(WORDS) for _ in range(30)).capitalize() + "."
            memory = Memory(mind=mind, category=rng.choice(CATEGORIES), key=f"key_{number}",
                            content=content, tags=rng.sample(WORDS, 3), source="agent",
                            confidence=0.7, version=2, created_at=when, updated_at=when,
                            deleted_at=when if number % 20 == 0 else None)
            memories.append(memory)
            for version, text in ((1, content[:80]), (2, content)):
                versions.append(MemoryVersion(
                    memory=memory, version=version, category=memory.category, key=memory.key,
                    content=text, tags=memory.tags, priority="normal", source="agent",
                    confidence=0.7, recorded_by_type="key", recorded_by="bench",
                    created_at=when))
        Memory.objects.bulk_create(memories)
        MemoryVersion.objects.bulk_create(versions)


def worker_pid(master_pid: int) -> int:
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return int(children[0])


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM) so far, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def current_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench/results/export.md"))
    args = parser.parse_args()

    data_dir = setup_django()
    import httpx
    from django.contrib.auth import get_user_model
    from django.db import connection

    from memories.export import export_json
    from minds.services import key_issue, mind_create

    rng = random.Random(11)
    owner = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    mind = mind_create(owner=owner, name="Bench export")
    print(f"filling {args.memories:,} memories …", flush=True)
    fill(mind, args.memories, rng)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")
        cursor.execute("VACUUM ANALYZE memories_memoryversion")
    _key, plaintext = key_issue(mind=mind, name="bench")
    headers = {"Authorization": f"Bearer {plaintext}"}

    # In-process: the Python heap the generator holds at its peak, and the SQL it runs.
    tracemalloc.start()
    size = sum(len(piece) for piece in export_json(mind=mind, reveal=False))
    _current, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    statements = capture_sql(lambda: sum(1 for _ in export_json(mind=mind, reveal=False)))

    server = Server(workers=1)
    server.wait("/memory/health", headers)
    worker = worker_pid(server.process.pid)
    http = httpx.Client(base_url=server.url, timeout=600)
    http.get("/memory/stats", headers=headers)
    rss_before = current_rss_mib(worker)
    peak_before = peak_rss_mib(worker)

    def stream(path: str) -> tuple[float, float, int]:
        """(seconds to the first byte, seconds to the last, bytes)."""
        started = time.perf_counter()
        first, total = None, 0
        with http.stream("GET", path, headers=headers) as response:
            assert response.status_code == 200, response.read()
            for chunk in response.iter_raw():
                if first is None:
                    first = time.perf_counter() - started
                total += len(chunk)
        return first or 0.0, time.perf_counter() - started, total

    results = {}
    for label, path in (("JSON (everything)", "/memory/mind-export?format=json"),
                        ("CSV (current)", "/memory/mind-export?format=csv")):
        runs = [stream(path) for _ in range(args.runs)]
        results[label] = runs
        print(f"{label}: {[f'{run[1]:.1f}s' for run in runs]}", flush=True)
    peak_after = peak_rss_mib(worker)

    # The export reads through server-side cursors: replay their SELECTs as plain queries.
    statements = [sql.split(" CURSOR WITH HOLD FOR ", 1)[-1] for sql in statements
                  if not sql.startswith(("FETCH", "CLOSE"))]
    raw = raw_connection()
    raw_samples = []
    for _ in range(args.runs):
        started = time.perf_counter()
        replay(raw, statements)
        raw_samples.append((time.perf_counter() - started) * 1000)
    raw.close()

    document = http.get("/memory/mind-export?format=json", headers=headers).content
    target = mind_create(owner=owner, name="Bench import")
    _key, target_plain = key_issue(mind=target, name="bench")
    started = time.perf_counter()
    imported = http.post("/memory/mind-import", content=document, headers={
        "Authorization": f"Bearer {target_plain}", "Content-Type": "application/json"})
    import_seconds = time.perf_counter() - started
    assert imported.status_code == 200, imported.text[:500]
    server.stop()

    lines = ["| export | runs | first byte p50 s | total p50 s | p95 s | p99 s | MB | "
             "memories/s | raw SQL p50 s | ratio |", "|---|---|---|---|---|---|---|---|---|---|"]
    raw_stats = Stats("raw", raw_samples)
    for label, runs in results.items():
        totals = Stats(label, [run[1] * 1000 for run in runs])
        firsts = Stats(label, [run[0] * 1000 for run in runs])
        raw_cell = f"{raw_stats.p50 / 1000:.2f}" if label.startswith("JSON") else "–"
        ratio = f"{totals.p50 / raw_stats.p50:.1f}×" if label.startswith("JSON") else "–"
        lines.append(f"| {label} | {len(runs)} | {firsts.p50 / 1000:.2f} | "
                     f"{totals.p50 / 1000:.2f} | {totals.pct(95) / 1000:.2f} | "
                     f"{totals.pct(99) / 1000:.2f} | {runs[0][2] / 1e6:.1f} | "
                     f"{args.memories / (totals.p50 / 1000):,.0f} | {raw_cell} | {ratio} |")
    import_counts = imported.json()
    report = "\n".join([
        "# Export benchmark", "",
        f"Machine: {machine_line()}. Server: gunicorn, synapse/gunicorn_conf.py, one worker, "
        "embedded PostgreSQL over a Unix socket.",
        f"Data: one mind of {args.memories:,} memories (two versions each, one in twenty in "
        f"the trash), ~{size / 1e6:.0f} MB of JSON. {args.runs} sequential downloads per "
        "format, streamed to the client and discarded.", "",
        "\n".join(lines), "",
        "Memory:", "",
        f"- server worker resident memory before the exports: {rss_before:.0f} MiB "
        f"(peak so far {peak_before:.0f} MiB); peak after {args.runs * 2} exports: "
        f"{peak_after:.0f} MiB — the exports added {peak_after - peak_before:.0f} MiB "
        f"to the peak for a {size / 1e6:.0f} MB document.",
        f"- in-process, the JSON generator's Python heap at its peak (tracemalloc): "
        f"{traced_peak / 2**20:.1f} MiB.", "",
        "Raw SQL: the statements the JSON export issues (the memories through a server-side "
        "cursor, the versions one query per 1,000 memories), replayed with psycopg on one "
        "connection, rows fetched; the ratio is the whole HTTP export over that.", "",
        f"Import of that JSON into an empty mind (POST /memory/mind-import, one transaction): "
        f"{import_seconds:.1f} s for {import_counts.get('memories', 0):,} memories and "
        f"{import_counts.get('versions', 0):,} versions.", ""])
    Path(args.output).write_text(report, encoding="utf-8")
    print(report)
    teardown(data_dir, args.keep_data)


if __name__ == "__main__":
    main()
