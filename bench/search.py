"""Search latency over real HTTP beside the SQL it runs, and embedding worker throughput.

    .venv/bin/python bench/search.py [--total 100000] [--mind 10000] [--queries 200]

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
    from django.contrib.auth import get_user_model
    from django.db import connection

    from memories import embeddings
    from memories.models import Memory
    from memories.services import memory_store
    from minds.authentication import AgentPrincipal
    from minds.services import key_issue, mind_create

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
    while embeddings.embed_batch(limit=64):
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
    print(f"bulk-inserted {filler} rows in {time.monotonic() - started:.0f}s", flush=True)
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        cursor.execute("CREATE INDEX memory_embedding_hnsw ON memories_memory USING hnsw "
                       "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
        cursor.execute("ANALYZE memories_memory")
    print(f"HNSW index built in {time.monotonic() - started:.0f}s", flush=True)
    return target, plaintext, model_rate, worker_rate


def queries(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.choice([1, 2, 2, 3]))) for _ in range(count)]


def time_http(base_url: str, plaintext: str, texts: list[str]) -> dict:
    import httpx

    timings = {}
    with httpx.Client(base_url=base_url, timeout=60,
                      headers={"Authorization": f"Bearer {plaintext}"}) as client:
        for mode in ("keyword", "semantic", "hybrid"):
            for text in texts[:20]:  # warm both gunicorn workers (model load, connections)
                client.get("/memory/search", params={"q": text, "mode": mode}).raise_for_status()
            values = []
            for text in texts:
                started = time.perf_counter()
                response = client.get("/memory/search", params={"q": text, "mode": mode})
                values.append(time.perf_counter() - started)
                response.raise_for_status()
            timings[mode] = values
    return timings


def time_sql(mind, texts: list[str]) -> dict:
    from memories import search
    from memories.embeddings import embed_query
    from memories.models import Memory
    from memories.query import parse_query

    memories = Memory.objects.for_mind(mind).current().unexpired()
    vectors = [embed_query(text) for text in texts]
    timings = {"keyword": [], "semantic": [], "hybrid": [], "query embedding": []}
    for text, vector in zip(texts, vectors, strict=True):
        parsed = parse_query(text)
        started = time.perf_counter()
        search.keyword_search(memories, parsed, limit=20)
        timings["keyword"].append(time.perf_counter() - started)
        started = time.perf_counter()
        search.semantic_search(memories, vector, limit=20)
        timings["semantic"].append(time.perf_counter() - started)
        started = time.perf_counter()
        search.keyword_search(memories, parsed, limit=search.FUSION_CANDIDATES, partial=True)
        search.semantic_search(memories, vector, limit=search.FUSION_CANDIDATES)
        timings["hybrid"].append(time.perf_counter() - started)
        started = time.perf_counter()
        embed_query(text)
        timings["query embedding"].append(time.perf_counter() - started)
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
        texts = queries(rng, args.queries)
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
        report = render(args, http, sql, model_rate, worker_rate)
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


def render(args, http, sql, model_rate, worker_rate) -> str:
    def ms(values, fraction):
        return f"{percentile(values, fraction) * 1000:.1f}"

    lines = ["# Search benchmark", "",
             f"`bench/search.py`: a mind of {args.mind:,} memories among {args.total:,}; "
             f"{args.queries} queries of 1-3 words per mode, one at a time, limit 20. HTTP "
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
             "SQL p99 ms | HTTP p95 / (SQL p95 + embedding p95) |",
             "|---|---|---|---|---|---|---|---|"]
    embedding_p95 = percentile(sql["query embedding"], 0.95)
    for mode in ("keyword", "semantic", "hybrid"):
        extra = 0 if mode == "keyword" else embedding_p95
        ratio = percentile(http[mode], 0.95) / (percentile(sql[mode], 0.95) + extra)
        lines.append(f"| {mode} | {ms(http[mode], .5)} | {ms(http[mode], .95)} | "
                     f"{ms(http[mode], .99)} | {ms(sql[mode], .5)} | {ms(sql[mode], .95)} | "
                     f"{ms(sql[mode], .99)} | {ratio:.1f}× |")
    values = sql["query embedding"]
    lines += [f"| query embedding alone | | | | {ms(values, .5)} | {ms(values, .95)} | "
              f"{ms(values, .99)} | |", "",
              "## Embedding throughput", "",
              "| path | memories/s |", "|---|---|",
              f"| model alone (`encode`, batch 64) | {model_rate:.0f} |",
              f"| worker (`embed_batch`, claim + encode + write, batch 64) | {worker_rate:.0f} |",
              f"| worker / model | {worker_rate / model_rate:.0%} |", "",
              f"Machine: {os.cpu_count()} cores, shared with other jobs while this ran "
              f"(load average {os.getloadavg()[0]:.1f} at the end).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
