"""Insight benchmark: contradictions, a compaction plan, and credentials encryption over
real HTTP, beside the raw SQL each endpoint issues, in the same run.

    .venv/bin/python bench/insight.py [--requests 100] [--keep-data]

A mind of 2,000 memories with real embeddings (the bundled model) among 20,000 (18,000
with random unit vectors in 9 other minds, so the HNSW index is shared). Writes
bench/results/insight.md.
"""

import argparse
import random
import sys
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

SERVICES = ["billing", "search", "auth", "mail", "reports", "gateway", "cache", "queue",
            "storage", "metrics", "backup", "scheduler", "webhooks", "exports", "imports"]
PEOPLE = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy"]
CITIES = ["Berlin", "Munich", "Hamburg", "Cologne", "Paris", "Lyon", "Madrid", "Rome"]
TOOLS = ["Python 3.11", "Python 3.12", "Django 5.2", "Node v20", "PostgreSQL 16",
         "Redis 7.2", "Kubernetes 1.31"]


def fact(rng: random.Random, number: int) -> tuple[str, str, str]:
    """(category, key, content): varied facts, some restating or contradicting others."""
    service, person = rng.choice(SERVICES), rng.choice(PEOPLE)
    shapes = [
        ("fact", f"{service}_port_{number}", f"The {service} service listens on port "
                                             f"{rng.choice([8000, 8001, 8080, 9000])}."),
        ("identity", f"{person.lower()}_city_{number}", f"{person} lives in "
                                                         f"{rng.choice(CITIES)}."),
        ("project", f"{service}_stack_{number}", f"The {service} service runs on "
                                                 f"{rng.choice(TOOLS)}."),
        ("preference", f"{person.lower()}_pref_{number}",
         f"{person} {rng.choice(['likes', 'dislikes'])} "
         f"{rng.choice(['long meetings', 'dark mode', 'spicy food', 'early standups'])}."),
        ("note", f"{service}_owner_{number}", f"The {service} service is owned by "
                                              f"{person}'s team."),
    ]
    return rng.choice(shapes)


def fill(mind, count: int, rng: random.Random, *, real: bool) -> None:
    from django.utils import timezone

    from memories.embeddings import embed_texts, embedding_text, model_name
    from memories.models import Memory

    now = timezone.now()
    rows = []
    for number in range(count):
        category, key, content = fact(rng, number)
        rows.append(Memory(mind=mind, category=category, key=key, content=content,
                           tags=[key.split("_")[0]], source="agent", verified=False,
                           confidence=0.7, embedding_pending=False,
                           embedding_model=model_name(),
                           created_at=now - timezone.timedelta(minutes=count - number),
                           updated_at=now - timezone.timedelta(minutes=count - number)))
    if real:
        vectors = embed_texts([embedding_text(memory) for memory in rows])
    else:
        vectors = []
        for _ in rows:
            vector = [rng.gauss(0, 1) for _ in range(384)]
            norm = sum(x * x for x in vector) ** 0.5
            vectors.append([x / norm for x in vector])
    for memory, vector in zip(rows, vectors, strict=True):
        memory.embedding = vector
    Memory.objects.bulk_create(rows, batch_size=1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench/results/insight.md"))
    args = parser.parse_args()

    data_dir = setup_django()
    import httpx
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.test import APIClient

    from minds.services import key_issue, mind_create

    rng = random.Random(11)
    owner = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    mind = mind_create(owner=owner, name="Bench insight")
    print("filling 2,000 embedded memories (+18,000 in other minds) …", flush=True)
    fill(mind, 2_000, rng, real=True)
    for number in range(9):
        fill(mind_create(owner=owner, name=f"Other {number}"), 2_000, rng, real=False)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")
    _key, plaintext = key_issue(mind=mind, name="bench")
    headers = {"Authorization": f"Bearer {plaintext}"}

    server = Server(workers=2)
    server.wait("/memory/health", headers)
    http = httpx.Client(base_url=server.url, timeout=120, headers=headers)
    inproc = APIClient()
    inproc.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    raw = raw_connection()
    n = args.requests
    rows = []
    notes = []

    def measure(name, http_call, statements, repeat=n):
        for warm in range(5):
            http_call(-warm - 1)
        http_stats = Stats(name, timed(http_call, repeat))
        raw_stats = Stats(name, timed(lambda i: replay(raw, statements(i)), repeat))
        rows.append((http_stats, raw_stats))
        print(f"{name}: p95 {http_stats.pct(95):.2f} ms (raw {raw_stats.pct(95):.2f} ms)",
              flush=True)

    for query, label in (("within=3h", "recent 180"), ("", "all, 1,000 per side")):
        path = f"/memory/contradictions?{query}"

        def call(i, path=path):
            assert http.get(path).status_code == 200

        sql = capture_sql(lambda path=path: inproc.get(path))
        found = inproc.get(path).json()["count"]
        notes.append(f"`GET {path}` ({label}) found {found} pairs (limit 50).")
        measure(f"GET /memory/contradictions ({label})", call, lambda i, sql=sql: sql)

    def compact_call(i):
        assert http.post("/memory/compact", json={"dry_run": True,
                                                  "category": "fact"}).status_code == 200

    compact_sql = capture_sql(lambda: inproc.post("/memory/compact", {
        "dry_run": True, "category": "fact"}, format="json"))
    plan = inproc.post("/memory/compact", {"dry_run": True, "category": "fact"},
                       format="json").json()
    notes.append(f"`POST /memory/compact` dry run over the {plan['candidates']} `fact` "
                 f"candidates planned {len(plan['clusters'])} clusters.")
    measure("POST /memory/compact (dry run, category fact)", compact_call,
            lambda i: compact_sql, repeat=max(10, n // 5))

    for category in ("note", "credentials"):
        template_key = f"enc_capture_{category}"

        def store(i, category=category):
            response = http.post("/memory", json={
                "category": category, "key": f"enc_{category}_{i}_{uuid.uuid4().hex[:6]}",
                "content": f"token-{uuid.uuid4().hex}"})
            assert response.status_code == 201, response.text

        store_sql = capture_sql(lambda category=category, key=template_key: inproc.post(
            "/memory", {"category": category, "key": key, "content": "captured"},
            format="json"))
        captured_id = mind.memories.get(key=template_key).id

        def store_raw(i, sql=store_sql, captured_id=captured_id, key=template_key):
            fresh_id, fresh_key = "mem_" + uuid.uuid4().hex[:20], f"raw_{uuid.uuid4().hex}"
            return [s.replace(captured_id, fresh_id).replace(key, fresh_key) for s in sql]

        measure(f"POST /memory (store {category})", store, store_raw)

        def read(i, memory_id=captured_id):
            assert http.get(f"/memory/{memory_id}").status_code == 200

        read_sql = capture_sql(lambda memory_id=captured_id: inproc.get(f"/memory/{memory_id}"))
        measure(f"GET /memory/{{id}} ({category})", read, lambda i, sql=read_sql: sql)

    server.stop()
    raw.close()
    report = "\n".join([
        "# Insight benchmark", "",
        f"Machine: {machine_line()}. Server: gunicorn, synapse/gunicorn_conf.py, 2 workers, "
        "embedded PostgreSQL 18 over a Unix socket.",
        "Data: a mind of 2,000 agent memories embedded with the bundled model, among 20,000 "
        f"(random unit vectors elsewhere, one shared HNSW index). {n} sequential requests "
        "per endpoint (compaction: fewer) after 5 warm-up requests.",
        "Raw SQL: the statements the endpoint issued, captured in-process with parameters "
        "inlined and replayed with psycopg in the same run. Contradictions and compaction "
        "spend most of their time outside the database (the rules, the clustering, and for "
        "compaction the model embedding summary sentences), so their ratio is large by "
        "nature; the credentials rows show what encryption adds to a store and a read.", "",
        table(rows), "", *[f"- {note}" for note in notes], ""])
    Path(args.output).write_text(report, encoding="utf-8")
    print(report)
    teardown(data_dir, args.keep_data)


if __name__ == "__main__":
    main()
