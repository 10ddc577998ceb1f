"""Embedding worker throughput against the model alone, in one run.

    nice -n 19 .venv/bin/python bench/embedding.py [--memories 1000] [--threads 1]
        [--claims 64,256] [--rounds 3] [--table 0]

Measured the way bench/search.py measures it ("Embedding throughput"): ``--memories``
memories stored through the services (synthetic conversation turns, bench/search.py's
``turn``), then the model alone encodes their texts (one ``encode`` call, batch 64, after a
warm-up) and the worker embeds them: ``manage.py embed_worker --once`` in process, its
whole loop (heartbeat, sweep, re-index and context checks, claim, model, write). Each round
measures the model, then the worker once per claim size, with every vector cleared and
marked pending again in between; the report takes each path's median over the rounds.

Both paths run the model on ``--threads`` torch threads (the worker's bound,
``SYNAPSE_EMBED_THREADS``), so the ratio compares like with like. ``--table N`` adds N
embedded memories in other minds first (bulk SQL, HNSW index built after), so the claim
query and the index inserts run against a table of that size.

The same file runs unchanged on an older tree (copy it into that tree's bench/): there the
worker command has no CPU limits and reads ``--batch-size`` as its claim size too.
"""

import argparse
import os
import random
import statistics
import sys
import time
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, build_hnsw, machine_line, setup_django, teardown  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--claims", default="64,256", help="claim sizes to measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--table", type=int, default=0,
                        help="embedded memories in other minds, loaded first")
    parser.add_argument("--label", default=str(ROOT))
    args = parser.parse_args()
    # The worker keeps the bench's niceness and thread count (the new tree reads these).
    os.environ["SYNAPSE_EMBED_THREADS"] = str(args.threads)
    os.environ["SYNAPSE_EMBED_NICE"] = "0"
    data_dir = setup_django()
    try:
        rates = run(args)
    finally:
        from django.db import connections

        connections.close_all()
        teardown(data_dir, False)
    model = statistics.median(rates["model"])
    print(f"\n{args.label} · {machine_line()} · load average {os.getloadavg()[0]:.1f}")
    print(f"{args.memories} memories, {args.threads} model thread(s), table of "
          f"{args.table + args.memories:,}, median of {args.rounds} rounds\n")
    print("| path | memories/s (median) | rounds | worker / model |")
    print("|---|---|---|---|")
    print(f"| model alone (`encode`, batch 64) | {model:.0f} | "
          f"{', '.join(f'{r:.0f}' for r in rates['model'])} | |")
    for claim in (int(c) for c in args.claims.split(",")):
        worker = statistics.median(rates[claim])
        print(f"| worker (`embed_worker --once`, claim {claim}) | {worker:.0f} | "
              f"{', '.join(f'{r:.0f}' for r in rates[claim])} | {worker / model:.0%} |")


def run(args) -> dict:
    import torch
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from bench.search import turn
    from memories import embeddings
    from memories.models import Memory
    from memories.services import memory_store
    from minds.authentication import AgentPrincipal
    from minds.services import key_issue, mind_create

    torch.set_num_threads(args.threads)
    rng = random.Random(42)
    user = get_user_model().objects.create_user("bench")
    mind = mind_create(owner=user, name="bench worker")
    key, _plaintext = key_issue(mind=mind, name="bench", created_by=user)
    if args.table:
        fill_table(args.table, user, rng)
    agent = AgentPrincipal(key=key)
    for number in range(args.memories):
        memory_store(mind=mind, actor=agent, category="context", key=f"t{number}",
                     content=turn(rng))
    mine = Memory.objects.filter(mind=mind)
    model = embeddings.get_model()
    texts = [embeddings.embedding_text(memory) for memory in mine]
    model.encode(texts[:64], batch_size=64, normalize_embeddings=True)  # warm up
    claims = [int(c) for c in args.claims.split(",")]
    rates: dict = {"model": [], **{claim: [] for claim in claims}}
    for _round in range(args.rounds):
        started = time.monotonic()
        model.encode(texts, batch_size=64, normalize_embeddings=True)
        rates["model"].append(len(texts) / (time.monotonic() - started))
        for claim in claims:
            mine.update(embedding=None, embedding_model="", embedding_pending=True)
            started = time.monotonic()
            call_command("embed_worker", "--once", "--batch-size", str(claim),
                         stdout=StringIO())
            rates[claim].append(len(texts) / (time.monotonic() - started))
            assert not mine.filter(embedding_pending=True).exists()
        print({key: f"{values[-1]:.0f}" for key, values in rates.items()}, flush=True)
    return rates


def fill_table(count: int, user, rng: random.Random) -> None:
    """``count`` embedded memories in nine other minds: perturbed copies of a few real
    vectors, inserted in bulk, the HNSW index built after."""
    import numpy as np
    from django.db import connection

    from bench.search import turn
    from memories.embeddings import embed_texts, model_name
    from memories.models import Memory
    from minds.services import mind_create

    others = [mind_create(owner=user, name=f"other {n}") for n in range(9)]
    base = np.array(embed_texts([turn(rng) for _ in range(64)]), dtype=np.float32)
    noise = np.random.default_rng(7)
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        cursor.execute("DROP INDEX memory_embedding_hnsw")
    started = time.monotonic()
    batch = []
    for number in range(count):
        vector = base[number % len(base)] + noise.normal(0, 0.05, base.shape[1])
        vector = (vector / np.linalg.norm(vector)).astype(np.float32)
        batch.append(Memory(mind=others[number % len(others)], category="context",
                            key=f"f{number}", content=turn(rng), source="agent",
                            confidence=0.7, embedding=vector.tolist(),
                            embedding_model=model_name(), embedding_pending=False))
        if len(batch) == 2000:
            Memory.objects.bulk_create(batch)
            batch = []
    Memory.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        build_hnsw(cursor)
        cursor.execute("VACUUM ANALYZE memories_memory")
    print(f"table of {count:,} loaded and indexed in {time.monotonic() - started:.0f}s",
          flush=True)


if __name__ == "__main__":
    main()
