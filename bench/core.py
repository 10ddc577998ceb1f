"""Core API benchmark: store, upsert, get, list and recall over real HTTP, beside the raw
SQL each endpoint issues, in the same run.

    .venv/bin/python bench/core.py [--requests 500] [--keep-data] [--total 100000]
                                   [--mind 10000] [--writes-only]

A mind of 10,000 memories among 100,000 (90,000 in 99 other minds), a mind of 1,000 for
recall; gunicorn with the production configuration (synapse/gunicorn_conf.py, 2 workers).
Memories are spread over paths (``projects/p0`` … ``p8``, three sub-paths each, a tenth at
the root); the big mind also holds a timeline of 2,000 episodes (ten per moment). Writes
bench/results/core.md. A store embeds its memory with the query encoder (read your writes,
docs/search.md): a row stores long contents, and the encoder's own time is measured apart.
``--writes-only`` stops after the writes (a before/after comparison of a change to them).
"""

import argparse
import random
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    CHUNK,
    ROOT,
    HttpClient,
    Server,
    Stats,
    build_hnsw,
    capture_sql,
    check,
    database_time,
    machine_line,
    raw_connection,
    replay,
    setup_django,
    table,
    teardown,
    timed,
)

WORDS = ["project", "release", "deploy", "docker", "kubernetes", "server", "database",
         "backup", "prefers", "concise", "answers", "meeting", "friday", "berlin", "coffee",
         "python", "django", "postgres", "vector", "search", "memory", "agent", "user", "likes",
         "dislikes", "team", "review", "budget", "invoice", "travel", "flight", "hotel"]
CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "context",
              "note"]
PRIORITIES = ["low", "normal", "normal", "normal", "high", "critical"]


def sentence(rng: random.Random, words: int = 24) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


PROJECTS = 9
# Far past the 256 word pieces the encoder reads: the longest text a store embeds costs as
# much as this one (the tokenizer still reads it all before truncating).
LONG_WORDS = 2_000
TIMELINE_PATH = "talks/t0"


def place(rng: random.Random) -> str:
    """A path: a tenth of the memories at the root, the rest under projects/p0 … p8."""
    if rng.random() < 0.1:
        return ""
    return f"projects/p{rng.randrange(PROJECTS)}/{rng.choice(['decisions', 'notes', 'people'])}"


def vectors_like_a_mind(rng: random.Random):
    """``next()`` gives a unit vector near one of 48 real sentences' (the query encoder's,
    with a little noise): the memories' embeddings as the worker left them, so a store's
    vector goes into an HNSW graph of the table's size, not an empty one."""
    import numpy as np

    from memories.embeddings import embed_query

    base = np.array([embed_query(sentence(random.Random(i))) for i in range(48)],
                    dtype=np.float32)
    noise = np.random.default_rng(rng.randrange(2**32))
    while True:
        vector = base[rng.randrange(len(base))] + noise.normal(0, 0.02, base.shape[1])
        yield (vector / np.linalg.norm(vector)).astype(np.float32).tolist()


def fill(mind, count: int, rng: random.Random, episodes: int = 0, vectors=None) -> None:
    """Insert ``count`` memories in bulk (the benchmark measures reads and single writes),
    then ``episodes`` episodic memories on one timeline, ten per moment; each embedded
    (``vectors``) by the model's name, none pending."""
    from django.utils import timezone

    from memories.embeddings import model_name
    from memories.models import Memory, MemoryType, default_memory_type

    now = timezone.now()
    batch = []
    embedded = {} if vectors is None else {"embedding_model": model_name(),
                                           "embedding_pending": False}

    def vector():
        return {} if vectors is None else {"embedding": next(vectors), **embedded}

    def flush(force=False):
        if batch and (force or len(batch) == 5000):
            Memory.objects.bulk_create(batch)
            batch.clear()

    for number in range(count):
        category = rng.choice(CATEGORIES)
        batch.append(Memory(mind=mind, category=category, key=f"key_{number}",
                            content=sentence(rng), tags=rng.sample(WORDS, 2),
                            priority=rng.choice(PRIORITIES), source="agent",
                            verified=rng.random() < 0.5, confidence=0.7,
                            memory_type=default_memory_type(category), path=place(rng),
                            created_at=now - timezone.timedelta(seconds=count - number),
                            updated_at=now - timezone.timedelta(seconds=count - number),
                            **vector()))
        flush()
    for number in range(episodes):
        moment = now - timezone.timedelta(minutes=episodes - number // 10)
        batch.append(Memory(mind=mind, category="context", key=f"turn_{number}",
                            content=sentence(rng), priority="normal", source="agent",
                            confidence=0.7, memory_type=MemoryType.EPISODIC,
                            path=TIMELINE_PATH, occurred_at=moment, created_at=moment,
                            updated_at=moment, **vector()))
        flush()
    flush(force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--total", type=int, default=100_000,
                        help="memories in all (the big mind, the 1,000 one, 89 others)")
    parser.add_argument("--mind", type=int, default=10_000, help="memories of the big mind")
    parser.add_argument("--output", default=str(ROOT / "bench/results/core.md"))
    parser.add_argument("--writes-only", action="store_true",
                        help="measure the stores, the upserts and the write-time embedding "
                        "only")
    args = parser.parse_args()

    data_dir = setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.test import APIClient

    from memories.recall import MAX_CONSECUTIVE_MISSES
    from minds.services import key_issue, mind_create

    rng = random.Random(7)
    owner = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    big = mind_create(owner=owner, name="Bench 10k")
    small = mind_create(owner=owner, name="Bench 1k")
    print(f"filling {args.total:,} memories …", flush=True)
    vectors = vectors_like_a_mind(rng)
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # loading is no request
        # Built once after the load: far faster than as many inserts into it.
        cursor.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
    fill(big, args.mind, rng, episodes=2_000, vectors=vectors)
    fill(small, 1_000, rng, vectors=vectors)
    for number in range(89):
        fill(mind_create(owner=owner, name=f"Other {number}"),
             max(0, args.total - args.mind - 1_000) // 89, rng, vectors=vectors)
    with connection.cursor() as cursor:
        build_hnsw(cursor)
        cursor.execute("VACUUM ANALYZE memories_memory")
    _big_key, big_plain = key_issue(mind=big, name="bench")
    _small_key, small_plain = key_issue(mind=small, name="bench")
    memory_ids = list(big.memories.values_list("id", flat=True)[:1000])

    server = Server(workers=2)
    big_headers = {"Authorization": f"Bearer {big_plain}"}
    small_headers = {"Authorization": f"Bearer {small_plain}"}
    server.wait("/memory/health", big_headers)
    http = HttpClient(server.url)
    inproc = APIClient()
    inproc.credentials(HTTP_AUTHORIZATION=f"Bearer {big_plain}")
    inproc_small = APIClient()
    inproc_small.credentials(HTTP_AUTHORIZATION=f"Bearer {small_plain}")
    raw = raw_connection()
    n = args.requests
    rows = []

    def measure(name, http_call, sql_for, inproc_call, cursor_rows=None):
        """sql_for(i) → statements to replay for sample i (captured from the endpoint);
        inproc_call(i): the same request in process, whose time waiting on PostgreSQL is
        the SQL's time in the request."""
        for warm in range(20):
            http_call(-warm - 1)
            inproc_call(-warm - 1)
        http_stats = Stats(name, timed(http_call, n))
        raw_stats = Stats(name, timed(lambda i: replay(raw, sql_for(i), cursor_rows), n))
        inside_stats = Stats(name, database_time(inproc_call, n))
        rows.append((http_stats, raw_stats, inside_stats))
        print(f"{name}: p95 {http_stats.pct(95):.2f} ms (raw {raw_stats.pct(95):.2f} ms, "
              f"in the request {inside_stats.pct(95):.2f} ms)", flush=True)

    # store (new): every request a new key.
    def store_http(i):
        response = http.post("/memory", headers=big_headers, json={
            "category": "note", "key": f"new_http_{i}_{uuid.uuid4().hex[:8]}",
            "content": sentence(rng), "tags": ["bench"]})
        assert response.status_code == 201, response.text

    def captured_store(content):
        """The statements of one store of ``content``, and a replay of them with fresh ids."""
        template_key = "new_capture_" + uuid.uuid4().hex[:8]
        store_sql = capture_sql(lambda: inproc.post("/memory", {
            "category": "note", "key": template_key, "content": content,
            "tags": ["bench"]}, format="json"))
        captured_id = big.memories.get(key=template_key).id

        def store_raw(i):
            fresh_id = "mem_" + uuid.uuid4().hex[:20]
            fresh_key = f"new_raw_{uuid.uuid4().hex[:10]}"
            return [sql.replace(captured_id, fresh_id).replace(template_key, fresh_key)
                    for sql in store_sql]
        return store_raw

    measure("POST /memory (store new)", store_http, captured_store("captured content"),
            lambda i: check(inproc.post(
                "/memory", {"category": "note", "key": f"new_inproc_{i}_{uuid.uuid4().hex[:8]}",
                            "content": sentence(rng), "tags": ["bench"]}, format="json"), 201))

    # store (new), long: LONG_WORDS words, about 14 kB (the encoder reads its first 256
    # word pieces).
    long_contents = [sentence(rng, LONG_WORDS) for _ in range(20)]

    def store_long_http(i):
        response = http.post("/memory", headers=big_headers, json={
            "category": "note", "key": f"long_http_{i}_{uuid.uuid4().hex[:8]}",
            "content": long_contents[i % 20], "tags": ["bench"]})
        assert response.status_code == 201, response.text

    measure(f"POST /memory (store new, {LONG_WORDS:,} words)", store_long_http,
            captured_store(long_contents[0]), lambda i: check(inproc.post(
                "/memory", {"category": "note", "key": f"long_inproc_{i}_{uuid.uuid4().hex[:8]}",
                            "content": long_contents[i % 20], "tags": ["bench"]},
                format="json"), 201))

    # upsert (changed): the same keys, new content every time.
    def upsert_http(i):
        response = http.post("/memory", headers=big_headers, json={
            "category": "note", "key": f"upsert_{i % 50}", "content": f"{sentence(rng)} {i}"})
        assert response.status_code in (200, 201), response.text

    inproc.post("/memory", {"category": "note", "key": "upsert_capture", "content": "v1"},
                format="json")
    upsert_sql = capture_sql(lambda: inproc.post("/memory", {
        "category": "note", "key": "upsert_capture", "content": "CAPTURED_V2"}, format="json"))
    upsert_id = big.memories.get(key="upsert_capture").id
    version_counter = iter(range(3, 10_000_000))

    def upsert_raw(i):
        # Each replay writes the next version number, as the endpoint would.
        version = next(version_counter)
        return [sql.replace("CAPTURED_V2", f"raw {i}").replace(
            f"'{upsert_id}', 2,", f"'{upsert_id}', {version},").replace(
            '"version" = 2', f'"version" = {version}') for sql in upsert_sql]

    measure("POST /memory (upsert changed)", upsert_http, upsert_raw, lambda i: check(inproc.post(
        "/memory", {"category": "note", "key": f"upsert_{i % 50}",
                    "content": f"{sentence(rng)} in process {i}"}, format="json")))

    # The write-time embedding alone (read your writes: memories.embeddings.
    # write_time_vector), in this process as in a web worker: the query encoder on one
    # thread over the text the worker embeds.
    from memories.embeddings import write_time_vector
    from memories.models import Memory

    encoder_rows = []
    for label, words in (("24 words (the stores above)", 24),
                         (f"{LONG_WORDS:,} words (96 read)", LONG_WORDS)):
        written = [Memory(category="note", key=f"new_http_{i}", tags=["bench"],
                          content=sentence(rng, words)) for i in range(50)]
        for warm in range(20):
            write_time_vector(written[warm % 50])
        encoder_rows.append(Stats(label, timed(
            lambda i, w=written: write_time_vector(w[i % 50]), n)))
        print(f"write-time embedding, {label}: p50 {encoder_rows[-1].p50:.2f} ms, "
              f"p95 {encoder_rows[-1].pct(95):.2f} ms", flush=True)

    # The store with and without the write-time embedding, interleaved in process
    # (Django's test client: the whole request but HTTP): the two take turns, so both see
    # the same moments of a shared machine. "without" is the store as it was before read
    # your writes (the memory marked for the worker only).
    from memories.services import memory as memory_service

    with_vector = memory_service.write_time_vector
    interleaved = []
    for label, contents in (("store new, 24 words", None), (f"store new, {LONG_WORDS:,} words",
                                                           long_contents)):
        samples = {"with": [], "without": []}
        for i in range(-20, n):
            for name in ("with", "without"):
                memory_service.write_time_vector = (
                    with_vector if name == "with" else lambda memory: None)
                body = {"category": "note", "key": f"pair_{name}_{i}_{uuid.uuid4().hex[:8]}",
                        "content": sentence(rng) if contents is None else contents[i % 20],
                        "tags": ["bench"]}
                started = time.perf_counter()
                check(inproc.post("/memory", body, format="json"), 201)
                if i >= 0:
                    samples[name].append((time.perf_counter() - started) * 1000)
        memory_service.write_time_vector = with_vector
        interleaved.append((label, Stats("with", samples["with"]),
                            Stats("without", samples["without"])))
        print(f"{label}, in process: p95 {interleaved[-1][1].pct(95):.2f} ms with the "
              f"write-time embedding, {interleaved[-1][2].pct(95):.2f} ms without", flush=True)

    pairs, pauses = [], []
    if not args.writes_only:
        def get_http(i):
            assert http.get(f"/memory/{memory_ids[i % len(memory_ids)]}",
                            headers=big_headers).status_code == 200

        get_sql = capture_sql(lambda: inproc.get(f"/memory/{memory_ids[0]}"))
        measure("GET /memory/{id}", get_http,
                lambda i: [s.replace(memory_ids[0], memory_ids[i % len(memory_ids)])
                           for s in get_sql],
                lambda i: check(inproc.get(f"/memory/{memory_ids[i % len(memory_ids)]}")))

        def list_http(i):
            assert http.get("/memory?limit=50", headers=big_headers).status_code == 200

        list_sql = capture_sql(lambda: inproc.get("/memory?limit=50"))
        measure("GET /memory?limit=50", list_http, lambda i: list_sql,
                lambda i: check(inproc.get("/memory?limit=50")))

        # The same list narrowed to one project (about a tenth of the mind, sub-paths included).
        def list_path_http(i):
            assert http.get("/memory?limit=50&path=projects/p3",
                            headers=big_headers).status_code == 200

        list_path_sql = capture_sql(lambda: inproc.get("/memory?limit=50&path=projects/p3"))
        measure("GET /memory?limit=50&path=projects/p3", list_path_http, lambda i: list_path_sql,
                lambda i: check(inproc.get("/memory?limit=50&path=projects/p3")))

        def recall_http(i):
            assert http.get("/memory/recall", headers=small_headers).status_code == 200

        recall_sql = capture_sql(lambda: inproc_small.get("/memory/recall"))
        measure("GET /memory/recall (1,000 memories)", recall_http, lambda i: recall_sql,
                lambda i: check(inproc_small.get("/memory/recall")))

        def budget_http(i):
            assert http.get("/memory/recall?budget=2000", headers=big_headers).status_code == 200

        budget_sql = capture_sql(lambda: inproc.get("/memory/recall?budget=2000"))
        # The endpoint stops reading its cursor once the budget is full and MAX_CONSECUTIVE_
        # MISSES smaller memories did not fit: within the first chunk here, so the replay
        # reads one chunk too (reading all 10,000 rows would not be the endpoint's SQL).
        shown = len(inproc.get("/memory/recall?budget=2000&format=json").json()["memories"])
        assert shown + MAX_CONSECUTIVE_MISSES <= CHUNK, shown
        measure("GET /memory/recall?budget=2000 (10,000 memories)", budget_http,
                lambda i: budget_sql, lambda i: check(inproc.get("/memory/recall?budget=2000")),
                cursor_rows=CHUNK)

        # Recall of one project: about 1,000 memories of the 10,000 (compare with the recall of
        # the 1,000-memory mind above), and budgeted like the unfiltered budgeted recall.
        def recall_path_http(i):
            assert http.get("/memory/recall?path=projects/p3",
                            headers=big_headers).status_code == 200

        recall_path_sql = capture_sql(lambda: inproc.get("/memory/recall?path=projects/p3"))
        measure("GET /memory/recall?path=projects/p3 (~1,000 of 10,000)", recall_path_http,
                lambda i: recall_path_sql,
                lambda i: check(inproc.get("/memory/recall?path=projects/p3")))

        def budget_path_http(i):
            assert http.get("/memory/recall?budget=2000&path=projects/p3",
                            headers=big_headers).status_code == 200

        budget_path_sql = capture_sql(
            lambda: inproc.get("/memory/recall?budget=2000&path=projects/p3"))
        measure("GET /memory/recall?budget=2000&path=projects/p3", budget_path_http,
                lambda i: budget_path_sql,
                lambda i: check(inproc.get("/memory/recall?budget=2000&path=projects/p3")),
                cursor_rows=CHUNK)

        # A page of the timeline from the middle of its 2,000 episodes.
        anchors = list(big.memories.filter(path=TIMELINE_PATH).order_by("occurred_at", "seq")
                       .values_list("id", flat=True)[900:1100])

        def timeline_http(i):
            assert http.get(f"/memory/timeline?path={TIMELINE_PATH}&limit=50&after="
                            f"{anchors[i % len(anchors)]}", headers=big_headers).status_code == 200

        timeline_sql = capture_sql(lambda: inproc.get(
            f"/memory/timeline?path={TIMELINE_PATH}&limit=50&after={anchors[0]}"))
        measure("GET /memory/timeline?path=…&after=…&limit=50 (2,000 episodes)", timeline_http,
                lambda i: [s.replace(anchors[0], anchors[i % len(anchors)]) for s in timeline_sql],
                lambda i: check(inproc.get(f"/memory/timeline?path={TIMELINE_PATH}&limit=50&after="
                                        f"{anchors[i % len(anchors)]}")))

        # Issue 12's comparisons, interleaved: the filtered and the unfiltered request take
        # turns, so both see the same moments of a shared machine (the sequential runs above
        # are minutes apart, and their p95 moves by more than the 10% compared).

        def measure_pair(label, base, narrowed):
            for warm in range(20):
                base(-warm - 1)
                narrowed(-warm - 1)
            samples = {"base": [], "narrowed": []}
            for i in range(n):
                for name, call in (("base", base), ("narrowed", narrowed)):
                    started = time.perf_counter()
                    call(i)
                    samples[name].append((time.perf_counter() - started) * 1000)
            stats = (Stats("base", samples["base"]), Stats("narrowed", samples["narrowed"]))
            pairs.append((label, *stats))
            print(f"{label}: p95 {stats[1].pct(95):.2f} vs {stats[0].pct(95):.2f} ms", flush=True)

        measure_pair("list: `path=projects/p3` vs the whole mind", list_http, list_path_http)
        measure_pair("recall: ~1,000 memories of `projects/p3` vs the 1,000-memory mind",
                     recall_http, recall_path_http)
        measure_pair("budgeted recall (2,000 tokens): `projects/p3` vs the whole mind",
                     budget_http, budget_path_http)

        # One statement replayed back to back, then each time after a pause such as a
        # request's Python leaves PostgreSQL's process idle.
        counts_sql = next(sql for sql in budget_sql if "COUNT(" in sql)
        for label, statements in (("`SELECT 1`", ["SELECT 1"]),
                                  ("`GET /memory/{id}`'s two statements", get_sql),
                                  ("the budgeted recall's counts (10,000 memories)",
                                   [counts_sql])):
            back_to_back = Stats(label, timed(lambda i, s=statements: replay(raw, s), n))
            after = {}
            for pause in (0.002, 0.010):
                def paused(i, s=statements, pause=pause):
                    time.sleep(pause)
                    started = time.perf_counter()
                    replay(raw, s)
                    return (time.perf_counter() - started) * 1000
                after[pause] = Stats(label, [paused(i) for i in range(n)])
            pauses.append((label, back_to_back, after[0.002], after[0.010]))
            print(f"{label}: {back_to_back.p50:.3f} → {after[0.010].p50:.3f} ms", flush=True)

    server.stop()
    raw.close()
    report = "\n".join([
        "# Core API benchmark", "",
        f"Machine: {machine_line()}. Server: gunicorn, synapse/gunicorn_conf.py, 2 workers, "
        "embedded PostgreSQL 18 over a Unix socket.",
        f"Data: a mind of {args.mind:,} memories among {args.total:,} "
        f"({args.total - args.mind:,} in other minds), spread over "
        "paths (projects/p0 … p8 with three sub-paths each, a tenth at the root), plus a "
        "timeline of 2,000 episodes (ten per moment); recall of a 1,000-memory mind. "
        "`path=projects/p3` selects about a tenth of the big mind. "
        f"{n} sequential requests per endpoint after 20 warm-up requests, "
        "one keep-alive HTTP client; `req/s` is that sequential rate.",
        "Raw SQL: the statements the endpoint issued (captured in-process, parameters "
        "inlined), replayed with psycopg on one connection in the same run — key lookup, "
        "locks, inserts, version and audit rows included; for writes, with fresh ids.",
        "SQL in the request: the time the same request, made in process (Django's test "
        "client, no HTTP), waited on PostgreSQL — every round trip, timed around psycopg's "
        "wait (bench.common.DatabaseClock); the SQL's time where it runs.", "",
        table(rows), "",
        "### Read your writes: the write-time embedding", "",
        "A store (or a change of what is embedded) embeds its memory in the request with "
        "the query encoder, before its INSERT or UPDATE (memories.embeddings."
        "write_time_vector; docs/search.md, \"Read your writes\"). That step alone, in "
        f"process on one thread, {n} texts after 20 warm-up:", "",
        "| text | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|",
        *(f"| {row.name} | {row.p50:.2f} | {row.pct(95):.2f} | {row.pct(99):.2f} |"
          for row in encoder_rows), "",
        "The whole store in process (Django's test client, no HTTP) with the write-time "
        "embedding and without it (the memory only marked for the worker, as before read "
        f"your writes), interleaved: {n} of each after 20 warm-up pairs.", "",
        "| store | p50 ms | p95 ms | p99 ms | p50 without | p95 without | p99 without | "
        "added p50 | added p95 |", "|---|---|---|---|---|---|---|---|---|",
        *(f"| {label} | {on.p50:.2f} | {on.pct(95):.2f} | {on.pct(99):.2f} | {off.p50:.2f} | "
          f"{off.pct(95):.2f} | {off.pct(99):.2f} | {on.p50 - off.p50:+.2f} | "
          f"{on.pct(95) - off.pct(95):+.2f} |" for label, on, off in interleaved), "",
        *([] if args.writes_only else [
            "### The same statement after a pause", "",
            "Replayed back to back, then each time after a pause (the bench process sleeps; "
            f"PostgreSQL's process idles, as it does while a request runs Python); p50 of {n}.",
            "", "| statements | back to back p50 ms | after 2 ms p50 | after 10 ms p50 | "
            "after 10 ms / back to back |", "|---|---|---|---|---|",
            *(f"| {label} | {hot.p50:.3f} | {two.p50:.3f} | {ten.p50:.3f} | "
              f"{ten.p50 / hot.p50:.1f}× |" for label, hot, two, ten in pauses), "",
            "Issue 12, measured interleaved (the two requests alternate, "
            f"{n} each after 20 warm-up pairs):", "",
            "| comparison | p50 ms | p95 ms | p50 unfiltered | p95 unfiltered | ratio p50 | "
            "ratio p95 |", "|---|---|---|---|---|---|---|",
            *(f"| {label} | {narrowed.p50:.2f} | {narrowed.pct(95):.2f} | {base.p50:.2f} | "
              f"{base.pct(95):.2f} | {narrowed.p50 / base.p50:.2f} | "
              f"{narrowed.pct(95) / base.pct(95):.2f} |" for label, base, narrowed in pairs),
            ""]),
        "Aims (issue 2): store p95 ≤ 15 ms, recall (1,000 memories) p95 ≤ 40 ms, every "
        "endpoint within 5× its raw SQL. Issue 12: list and recall with a path filter within "
        "10% of the unfiltered figures of the same run (the path-filtered recall of ~1,000 "
        "memories against the 1,000-memory recall; budgeted against budgeted).", ""])
    Path(args.output).write_text(report, encoding="utf-8")
    print(report)
    teardown(data_dir, args.keep_data)


if __name__ == "__main__":
    main()
