"""Search latency over real HTTP beside the SQL it runs, and embedding worker throughput.

    .venv/bin/python bench/search.py [--total 100000] [--mind 10000] [--queries 200]
                                     [--data-dir DIR  (kept; its data reused next time)]

A mind of 10,000 memories among 100,000 on a throwaway embedded PostgreSQL. What is real
and what is reused (see the report): the embedded texts are embedded by the real model,
once by the model alone and once by the worker (embed_batch), which gives the two
throughputs; the other rows get perturbed copies of those vectors (unit noise added and
renormalised, so no two vectors are equal), and are inserted with bulk SQL, not through
the services, with the HNSW index built after loading. Then keyword, semantic and
hybrid search run through gunicorn (synapse/gunicorn_conf.py) and, in the same run, the
search functions' SQL in process, without HTTP.
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

VOCABULARY = ("project deploy cluster docker coffee garden family holiday painting guitar "
         "concert running marathon recipe dinner birthday school teacher adoption support "
         "group museum camping mountain lake beach sunrise photo book novel library "
         "kitchen dog cat puppy career interview meeting budget invoice travel flight hotel "
         "weekend morning evening friend sister brother mother father music dance yoga "
         "painting workshop pottery hiking bicycle garden vegetables tomato pizza pasta "
         "market festival parade volunteer charity shelter lecture course exam science "
         "history art gallery sculpture poem letter diary journal camera film movie")
WORDS = VOCABULARY.split()


def turn(rng: random.Random) -> str:
    """A synthetic conversation turn of 12-30 words."""
    speaker = rng.choice(["Alex", "Sam", "Robin", "Kim"])
    words = [rng.choice(WORDS) for _ in range(rng.randint(12, 30))]
    return f"{speaker}: I was thinking about the {' '.join(words)}."


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load(args, rng):
    """Create the minds and memories; return (target mind, key plaintext, throughputs)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from bench.common import build_hnsw
    from memories import embeddings
    from memories.models import Memory
    from memories.quotas import recount
    from memories.services import memory_store
    from minds.authentication import AgentPrincipal
    from minds.services import key_issue, mind_create

    user = get_user_model().objects.filter(username="bench").first()
    if user is not None:  # --data-dir holding an earlier run's data: reuse it
        target = Memory.objects.filter(key="t0").select_related("mind").get().mind
        _key, plaintext = key_issue(mind=target, name="bench", created_by=user)
        print("reusing the data of an earlier run", flush=True)
        return target, plaintext, None, None
    user = get_user_model().objects.create_user("bench")
    target = mind_create(owner=user, name="bench target")
    key, plaintext = key_issue(mind=target, name="bench", created_by=user)
    others = [mind_create(owner=user, name=f"other {n}") for n in range(9)]

    # The embedded set goes through the services (versions, audit, embedding mark).
    started = time.monotonic()
    agent = AgentPrincipal(key=key)
    texts = []
    for number in range(args.embedded):
        content = turn(rng)
        memory_store(mind=target, actor=agent, category="context", key=f"t{number}",
                     content=content)
        texts.append(content)
    print(f"stored {args.embedded} through the services in {time.monotonic() - started:.0f}s",
          flush=True)

    model = embeddings.get_model()
    model.encode(texts[:64], batch_size=64, normalize_embeddings=True)  # warm up
    started = time.monotonic()
    model.encode([embeddings.embedding_text(m) for m in Memory.objects.filter(mind=target)],
                 batch_size=64, normalize_embeddings=True)
    model_rate = args.embedded / (time.monotonic() - started)
    started = time.monotonic()
    # Claims of the worker's size (SYNAPSE_EMBED_CLAIM_SIZE), as manage.py embed_worker.
    while embeddings.embed_batch(limit=settings.SYNAPSE["EMBED_CLAIM_SIZE"]):
        pass
    worker_rate = args.embedded / (time.monotonic() - started)
    print(f"model {model_rate:.0f}/s, worker {worker_rate:.0f}/s", flush=True)
    real = np.array([m.embedding for m in Memory.objects.filter(mind=target).order_by("key")],
                    dtype=np.float32)

    # The rest: bulk rows with perturbed copies of the real vectors, index built after.
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX memory_embedding_hnsw")
    started = time.monotonic()
    name = embeddings.model_name()
    batch = []
    noise = np.random.default_rng(7)
    filler = args.total - args.embedded
    target_rest = args.mind - args.embedded
    for number in range(filler):
        mind = target if number < target_rest else others[number % len(others)]
        base = real[number % len(real)]
        vector = base + noise.normal(0, 0.05, base.shape).astype(np.float32)
        vector /= np.linalg.norm(vector)
        batch.append(Memory(mind=mind, category="context", key=f"f{number}", content=turn(rng),
                            source="agent", confidence=0.7, embedding=vector.tolist(),
                            embedding_model=name, embedding_pending=False))
        if len(batch) == 2000:
            Memory.objects.bulk_create(batch)
            batch = []
    Memory.objects.bulk_create(batch)
    recount()  # the minds' quota counters (semantic search reads its mind's size there)
    print(f"bulk-inserted {filler} rows in {time.monotonic() - started:.0f}s", flush=True)
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        build_hnsw(cursor)
        cursor.execute("ANALYZE memories_memory")
    print(f"HNSW index built in {time.monotonic() - started:.0f}s", flush=True)
    return target, plaintext, model_rate, worker_rate


def queries(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct queries of 1-3 words."""
    found: dict[str, None] = {}
    while len(found) < count:
        found[" ".join(rng.sample(WORDS, rng.choice([1, 2, 2, 3])))] = None
    return list(found)


MODES = ("keyword", "semantic", "hybrid")


def query_sets(rng: random.Random, count: int) -> dict:
    """Distinct queries for each mode and for the warm-up, so no mode reuses a question
    another asked before (the servers keep a cache of query embeddings)."""
    texts = queries(rng, 20 + 3 * count)
    sets = {"warm-up": texts[:20]}
    for number, mode in enumerate(MODES):
        sets[mode] = texts[20 + number * count:20 + (number + 1) * count]
    return sets


def time_http(base_url: str, plaintext: str, texts: list[str]) -> dict:
    from bench.common import HttpClient

    timings = {}
    client = HttpClient(base_url, timeout=60, headers={"Authorization": f"Bearer {plaintext}"})
    try:
        for mode in MODES:
            for text in texts["warm-up"]:  # warm both workers (model load, connections)
                client.get("/memory/search", params={"q": text, "mode": mode}).raise_for_status()
            values = []
            for text in texts[mode]:
                started = time.perf_counter()
                response = client.get("/memory/search", params={"q": text, "mode": mode})
                values.append(time.perf_counter() - started)
                response.raise_for_status()
            timings[mode] = values
    finally:
        client.close()
    return timings


def time_statements(plaintext: str, texts: dict) -> dict:
    """Each mode's requests as the issue measures an endpoint (bench/core.py's raw SQL):
    every statement one request issues (the Mind Key lookup, the rate limit, the search,
    the hits' rows and snippets; parameters inlined), captured from the request made in
    process, then replayed with psycopg on one connection, per question."""
    from django.db import transaction
    from rest_framework.test import APIClient

    from bench.common import DatabaseClock, capture_sql, check, raw_connection, replay

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    conn = raw_connection()
    timings = {}
    try:
        for mode in MODES:
            replayed, inside = [], []
            for text in texts[mode]:
                def request(text=text, mode=mode):
                    # In one transaction, so hybrid search's two sides share this
                    # connection and both are captured and timed (served over HTTP, its
                    # semantic side runs beside the keyword side: synapse.db.beside).
                    with transaction.atomic():
                        check(client.get("/memory/search", {"q": text, "mode": mode}))

                replayed.append(timed_once(replay, conn, capture_sql(request)))
                with DatabaseClock() as clock:  # the request again, its SQL timed in it
                    request()
                inside.append(clock.seconds)
            timings[mode], timings[f"{mode} in the request"] = replayed, inside
    finally:
        conn.close()
    return timings


def plain_top_k(memories, parsed, operator: str, limit: int) -> list:
    """The reference: a plain mind-scoped ``ts_rank`` top-k over the same GIN index, the
    query's words joined by ``operator`` (``&&`` or ``||``)."""
    from django.db import connections

    from memories.search import RANK_NORMALIZATION, RANK_WEIGHTS, _where

    where, params = _where(memories)
    pieces, term_params = [], []
    for term in parsed.terms:
        sql, extra = term.tsquery_sql()
        pieces.append(sql)
        term_params += extra
    sql = f"""
        WITH q AS (SELECT ({f' {operator} '.join(pieces)}) AS t)
        SELECT memories_memory.id, ts_rank('{RANK_WEIGHTS}', search_vector, q.t,
                                           {RANK_NORMALIZATION}) AS rank
        FROM memories_memory CROSS JOIN q
        WHERE {where} AND search_vector @@ q.t
        ORDER BY rank DESC, memories_memory.id LIMIT %s
    """  # noqa: S608
    with connections[memories.db].cursor() as cursor:
        cursor.execute(sql, term_params + params + [limit])
        return cursor.fetchall()


def idf_counts(memories, parsed) -> list:
    """What an exact BM25 idf has to read before it can rank anything: among the memories
    searched, how many hold each of the question's words (one scan of the GIN index per
    word, reading the rows' visibility and filters but no search document) and how many
    there are (the idf's N)."""
    from django.db import connections

    from memories.search import _where

    where, params = _where(memories)
    counts, count_params = [], []
    for term in parsed.terms:
        sql, extra = term.tsquery_sql()
        counts.append(f"(SELECT count(*) FROM memories_memory WHERE {where} "
                      f"AND search_vector @@ {sql})")
        count_params += params + extra
    sql = f"SELECT {', '.join(counts)}, (SELECT count(*) FROM memories_memory WHERE {where})"
    with connections[memories.db].cursor() as cursor:
        cursor.execute(sql, count_params + params)
        return cursor.fetchall()


def timed_once(call, *args, **kwargs) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return time.perf_counter() - started


def time_sql(mind, texts: dict) -> dict:
    """Each mode's search functions in process, on that mode's questions (their SQL, no
    HTTP, no query embedding), and the plain top-k references on the keyword questions."""
    from memories import search
    from memories.embeddings import embed_query
    from memories.models import Memory
    from memories.query import parse_query

    memories = Memory.objects.for_mind(mind).current().unexpired()
    timings = {name: [] for name in ("keyword", "semantic", "hybrid", "query embedding",
                                     "plain top-k, AND", "plain top-k, OR",
                                     "the words' counts", "exact-idf floor")}

    def timed(name, call, *args, **kwargs):
        timings[name].append(timed_once(call, *args, **kwargs))

    for text in texts["keyword"]:
        parsed = parse_query(text)
        timed("keyword", search.keyword_search, memories, parsed, limit=20)
        timed("plain top-k, AND", plain_top_k, memories, parsed, "&&", 20)
        timed("plain top-k, OR", plain_top_k, memories, parsed, "||", 20)
        timed("the words' counts", idf_counts, memories, parsed)
        # The least an exact idf costs: the AND top-k and the counts it is weighted by.
        timings["exact-idf floor"].append(timings["plain top-k, AND"][-1]
                                          + timings["the words' counts"][-1])
    for text in texts["semantic"]:
        vector = embed_query(text)
        timed("semantic", search.semantic_search, memories, vector, limit=20)
        timed("query embedding", embed_query, text)
    depth = search.HYBRID_CANDIDATES
    for text in texts["hybrid"]:
        parsed, vector = parse_query(text), embed_query(text)
        # The two sides hybrid search runs (its union query and ranking are not counted).
        timed("hybrid", search.keyword_search, memories, parsed, limit=depth, partial=True,
              context=True)
        timings["hybrid"][-1] += timed_once(search.semantic_search, memories, vector,
                                            limit=depth)
    return timings


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--mind", type=int, default=10_000)
    parser.add_argument("--embedded", type=int, default=1000,
                        help="memories embedded for real (the rest reuse their vectors)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data-dir", help="keep the cluster here instead of a temp folder")
    parser.add_argument("--out", default=str(ROOT / "bench/results/search.md"))
    args = parser.parse_args()
    from retrieval import setup_django

    throwaway = setup_django(args.data_dir)
    rng = random.Random(42)
    server = None
    try:
        target, plaintext, model_rate, worker_rate = load(args, rng)
        texts = query_sets(rng, args.queries)
        port = free_port()
        # The benchmark measures latency, not the per-key rate limits.
        env = {**os.environ, "SYNAPSE_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "2",
               "SYNAPSE_RATE_SEARCH": "100000/min", "SYNAPSE_RATE_SEMANTIC": "100000/min"}
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c",
                                   "synapse/gunicorn_conf.py"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base_url = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        http = time_http(base_url, plaintext, texts)
        sql = time_sql(target, texts)
        statements = time_statements(plaintext, texts)
        report = render(args, http, sql, statements, model_rate, worker_rate)
        Path(args.out).write_text(report)
        print(report)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if throwaway:
            from django.db import connections

            from synapse import embedded_db

            connections.close_all()
            embedded_db.destroy(throwaway)


def render(args, http, sql, statements, model_rate, worker_rate) -> str:
    def ms(values, fraction):
        return f"{percentile(values, fraction) * 1000:.1f}"

    lines = ["# Search benchmark", "",
             f"`bench/search.py`: a mind of {args.mind:,} memories among {args.total:,}; "
             f"{args.queries} distinct queries of 1-3 words per mode (no mode repeats "
             "another's), one at a time, limit 20. HTTP "
             "through gunicorn (2 workers, synapse/gunicorn_conf.py) with a Mind Key; SQL = "
             "the same search functions in process (their queries, no HTTP, no query "
             "embedding).", "",
             f"Data: {args.embedded:,} memories of the mind stored through the services and "
             "embedded by the real model; the other rows (the rest of the mind and the other "
             "nine minds) inserted with bulk SQL, each with a perturbed copy of a real vector "
             "(Gaussian noise σ=0.05 per dimension, renormalised), and the HNSW index "
             "(m=16, ef_construction=64) built after loading. Texts are synthetic turns of "
             "12-30 words.", "",
             "| mode | HTTP p50 ms | HTTP p95 ms | HTTP p99 ms | SQL p50 ms | SQL p95 ms | "
             "SQL p99 ms | HTTP p95 / (SQL p95 + embedding p95) | raw SQL p50 ms | "
             "raw SQL p95 ms | HTTP p95 / (raw SQL p95 + embedding p95) | SQL in the "
             "request p50 ms | p95 ms | HTTP p95 / (SQL in the request p95 + embedding p95) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    embedding_p95 = percentile(sql["query embedding"], 0.95)
    for mode in ("keyword", "semantic", "hybrid"):
        extra = 0 if mode == "keyword" else embedding_p95
        ratio = percentile(http[mode], 0.95) / (percentile(sql[mode], 0.95) + extra)
        raw_ratio = percentile(http[mode], 0.95) / (percentile(statements[mode], 0.95)
                                                    + extra)
        inside = statements[f"{mode} in the request"]
        inside_ratio = percentile(http[mode], 0.95) / (percentile(inside, 0.95) + extra)
        lines.append(f"| {mode} | {ms(http[mode], .5)} | {ms(http[mode], .95)} | "
                     f"{ms(http[mode], .99)} | {ms(sql[mode], .5)} | {ms(sql[mode], .95)} | "
                     f"{ms(sql[mode], .99)} | {ratio:.1f}× | {ms(statements[mode], .5)} | "
                     f"{ms(statements[mode], .95)} | {raw_ratio:.1f}× | {ms(inside, .5)} | "
                     f"{ms(inside, .95)} | {inside_ratio:.1f}× |")
    keyword_p95 = percentile(sql["keyword"], 0.95)
    for name in ("query embedding", "plain top-k, AND", "plain top-k, OR",
                 "the words' counts", "exact-idf floor"):
        values = sql[name]
        versus = ("" if name == "query embedding" else
                  f"keyword SQL p95 / this: {keyword_p95 / percentile(values, 0.95):.1f}×")
        label = name if name == "exact-idf floor" else f"{name} alone"
        lines.append(f"| {label} | | | | {ms(values, .5)} | {ms(values, .95)} | "
                     f"{ms(values, .99)} | {versus} |")
    lines += ["", "Plain top-k: one mind-scoped query over the same GIN index, the keyword "
              "questions' words joined by AND (`&&`) or OR (`||`), ordered by `ts_rank` "
              "(same weights), limit 20. The words' counts: one statement counting the "
              "memories searched that hold each word (a scan of the same index per word) "
              "and the memories searched: what a BM25 idf over the memories searched must "
              "read, exactly, before it ranks anything. "
              "Exact-idf floor: the plain AND top-k and the words' counts, per question, "
              "added. The hybrid SQL row is its two sides at "
              "HYBRID_CANDIDATES each (the keyword side with partial matches and episode "
              "contexts), not its union query or ranking.", "",
              "Raw SQL: every statement one request issued (the Mind Key lookup, the rate "
              "limit, the search, the hits' rows and snippets), captured from the same "
              "request made in process and replayed with psycopg on one connection, per "
              "question: the SQL the endpoint issues, as bench/core.py measures it. SQL in "
              "the request: the same request made again in process, the time it waited on "
              "PostgreSQL (bench.common.DatabaseClock; statements run slower after the "
              "pauses a request's Python leaves, bench/results/core.md).", ""]
    if model_rate is not None:
        lines += ["## Embedding throughput", "",
                  "| path | memories/s |", "|---|---|",
                  f"| model alone (`encode`, batch 64) | {model_rate:.0f} |",
                  f"| worker (`embed_batch`, claim + encode + write, batch 64) | "
                  f"{worker_rate:.0f} |",
                  f"| worker / model | {worker_rate / model_rate:.0%} |", ""]
    lines += [f"Machine: {os.cpu_count()} cores, shared with other jobs while this ran "
              f"(load average {os.getloadavg()[0]:.1f} at the end).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
