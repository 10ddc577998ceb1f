"""Retrieval quality on LoCoMo: recall@5/10/20 and MRR of keyword, semantic and hybrid search.

    .venv/bin/python bench/retrieval.py ../shared/data/locomo/locomo_dev.json

One mind per conversation; every turn is stored as one memory through the services
(key = the turn's dialogue id, content = "Speaker: text", plus the caption of a shared
photo), embedded with memories.embeddings.embed_batch, then every question of categories
1-4 is asked in each mode. A question's recall@k is the share of its evidence turns found
in the top k; MRR uses the first evidence turn found. "hybrid (shipped)" is what
memories.search.hybrid_search returns; the other fusions are computed on the same cached
candidates (each side DEPTH deep, with the similarity of every keyword candidate). Runs
on a throwaway embedded PostgreSQL unless --data-dir (kept, and reused when it already
holds the data) is given.
The data set is read in place, never copied.
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
DEPTH = 100  # candidates kept a side (memories.search.HYBRID_CANDIDATES)


def setup_django(data_dir: str | None) -> str | None:
    """Point Django at a (throwaway) embedded cluster; return the folder to destroy."""
    throwaway = None
    if not os.environ.get("DATABASE_URL"):
        if data_dir is None:
            throwaway = data_dir = tempfile.mkdtemp(prefix="synapse-bench-")
        os.environ["SYNAPSE_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapse.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return throwaway


def turn_key(dia_id: str) -> str:
    # "D1:3" → "d1t3": one token, so the key adds no stray numbers to the search document.
    return dia_id.strip().lower().replace(":", "t")


def turn_content(turn: dict) -> str:
    content = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        content += f" [shares a photo: {turn['blip_caption']}]"
    return content


def load_conversations(conversations: list[dict]):
    """One mind per conversation (reused when present); returns {sample_id: mind}."""
    from django.contrib.auth import get_user_model

    from memories.embeddings import embed_batch
    from memories.services import memory_store
    from minds.models import Mind
    from minds.services import mind_create

    user, _ = get_user_model().objects.get_or_create(username="locomo-bench")
    minds = {}
    started = time.monotonic()
    stored = 0
    for conversation in conversations:
        name = f"LoCoMo {conversation['sample_id']}"
        mind = Mind.objects.filter(owner=user, name=name).first()
        if mind is None:
            mind = mind_create(owner=user, name=name)
            sessions = conversation["conversation"]
            for name_, turns in sessions.items():
                if not re.fullmatch(r"session_\d+", name_):
                    continue
                for turn in turns:
                    memory_store(mind=mind, actor=user, category="context",
                                 key=turn_key(turn["dia_id"]), content=turn_content(turn))
                    stored += 1
        minds[conversation["sample_id"]] = mind
    if stored:
        print(f"stored {stored} turns in {time.monotonic() - started:.1f}s", flush=True)
    started = time.monotonic()
    embedded = 0
    while done := embed_batch(limit=256):
        embedded += done
    if embedded:
        print(f"embedded {embedded} memories in {time.monotonic() - started:.1f}s", flush=True)
    return minds


def evidence_keys(question: dict) -> set[str]:
    keys = set()
    for item in question.get("evidence", []):
        for dia_id in re.findall(r"D\d+:\d+", item):
            keys.add(turn_key(dia_id))
    return keys


def collect(minds, conversations):
    """For every question: its evidence keys and each side's top-DEPTH ranking, with
    latencies of the three modes as the API runs them."""
    from memories.embeddings import embed_query
    from memories.models import Memory
    from memories.query import words_query
    from memories.search import hybrid_search, keyword_search, semantic_search, similarities

    rows = []
    latency = defaultdict(list)
    for conversation in conversations:
        mind = minds[conversation["sample_id"]]
        memories = Memory.objects.for_mind(mind).current().unexpired()
        key_of = dict(memories.values_list("id", "key"))
        for question in conversation["qa"]:
            if question.get("category") not in CATEGORIES:
                continue
            wanted = evidence_keys(question)
            if not wanted:
                continue
            text = str(question["question"])
            parsed = words_query(text)
            started = time.perf_counter()
            keyword = keyword_search(memories, parsed, limit=DEPTH).hits if parsed else []
            latency["keyword"].append(time.perf_counter() - started)
            started = time.perf_counter()
            vector = embed_query(text)
            semantic = semantic_search(memories, vector, limit=DEPTH)
            latency["semantic"].append(time.perf_counter() - started)
            started = time.perf_counter()
            hybrid = hybrid_search(memories, text, limit=20).hits
            latency["hybrid"].append(time.perf_counter() - started)
            partial = (keyword_search(memories, parsed, limit=DEPTH, partial=True).hits
                       if parsed else [])
            cosine = similarities(memories, [i for i, _ in partial], vector)
            rows.append({"category": question["category"], "wanted": wanted,
                         "keyword": [(key_of[i], s) for i, s in keyword],
                         "partial": [(key_of[i], s) for i, s in partial],
                         "semantic": [(key_of[i], s) for i, s in semantic],
                         "cosine": {key_of[i]: s for i, s in cosine.items()},
                         "hybrid": [(key_of[i], s) for i, s in hybrid]})
    return rows, latency


def rrf(keyword, semantic, *, k=60, keyword_weight=0.5):
    scores = defaultdict(float)
    for rank, (key, _score) in enumerate(keyword, 1):
        scores[key] += keyword_weight / (k + rank)
    for rank, (key, _score) in enumerate(semantic, 1):
        scores[key] += (1 - keyword_weight) / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def union_fusion(row, depth, keyword_weight):
    """search.fuse as hybrid_search calls it, on the cached candidates cut to ``depth``:
    the keyword-only candidates get their cosine similarity."""
    from memories import search

    keyword, semantic = row["partial"][:depth], row["semantic"][:depth]
    found = {key for key, _ in semantic}
    similarity = {key: row["cosine"][key] for key, _ in keyword
                  if key not in found and key in row["cosine"]}
    return search.fuse(keyword, semantic, keyword_weight=keyword_weight, similarity=similarity)


def metrics(rows, rank):
    """{category|"all": {"r@5",…,"mrr"}} for a ranking function row → [keys]."""
    per = defaultdict(lambda: defaultdict(list))
    for row in rows:
        ranked = [key for key, _ in rank(row)][:max(KS)]
        wanted = row["wanted"]
        values = {f"r@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in KS}
        first = next((position for position, key in enumerate(ranked, 1) if key in wanted), None)
        values["mrr"] = 1 / first if first else 0.0
        for group in (row["category"], "all"):
            for name, value in values.items():
                per[group][name].append(value)
    return {group: {name: statistics.fmean(v) for name, v in values.items()}
            for group, values in per.items()}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="LoCoMo JSON (e.g. ../shared/data/locomo/locomo_dev.json)")
    parser.add_argument("--data-dir", help="keep the cluster here (reused when it exists)")
    parser.add_argument("--out", default=str(ROOT / "bench/results/retrieval.md"))
    args = parser.parse_args()
    conversations = json.loads(Path(args.path).read_text())
    throwaway = setup_django(args.data_dir)
    try:
        from memories import search
        from memories.embeddings import get_model

        get_model()
        minds = load_conversations(conversations)
        rows, latency = collect(minds, conversations)
        variants = {
            "keyword": lambda r: r["keyword"],
            "semantic": lambda r: r["semantic"],
            "hybrid (shipped)": lambda r: r["hybrid"],
            "keyword, partial matches also ranked": lambda r: r["partial"],
            "plain RRF (k=60), 50 a side": lambda r: rrf(r["keyword"][:50], r["semantic"][:50]),
        }
        for weight in (0.5, 0.6, 0.7):
            variants[f"weighted RRF (k=60), 50 a side, keyword weight {weight}"] = (
                lambda r, w=weight: rrf(r["keyword"][:50], r["semantic"][:50], keyword_weight=w))
        for depth in (50, 100):
            for weight in (0.4, 0.5, 0.6, 0.7):
                variants[f"previous fusion (semantic side only its own list), {depth} a side, "
                         f"keyword weight {weight}"] = (
                    lambda r, d=depth, w=weight: search.fuse(r["partial"][:d], r["semantic"][:d],
                                                             keyword_weight=w))
        for depth in (50, 100):
            for weight in (0.5, 0.55, 0.6, 0.65, 0.7):
                variants[f"union re-scored by both sides, {depth} a side, keyword weight "
                         f"{weight}"] = (
                    lambda r, d=depth, w=weight: union_fusion(r, d, w))
        results = {name: metrics(rows, rank) for name, rank in variants.items()}
        report = render(args.path, conversations, rows, results, latency)
        Path(args.out).write_text(report)
        print(report)
    finally:
        if throwaway:
            from django.db import connections

            connections.close_all()
            from synapse import embedded_db

            embedded_db.destroy(throwaway)


def render(path, conversations, rows, results, latency) -> str:
    from memories import search

    lines = ["# Retrieval benchmark (LoCoMo)", "",
             f"`bench/retrieval.py {Path(path).name}`: {len(conversations)} conversations, "
             f"{len(rows)} questions of categories 1-4, one mind per conversation, one memory "
             "per turn. recall@k = share of a question's evidence turns in the top k; MRR "
             "by the first evidence turn. Hybrid = normalised-score fusion of the keyword "
             "side with partial matches and the semantic side, keyword weight "
             f"{search.HYBRID_KEYWORD_WEIGHT}, {search.HYBRID_CANDIDATES} candidates a side, "
             "the union scored by both sides (cosine similarity of the keyword-only ones).",
             "", "## By mode", "",
             "| mode | recall@5 | recall@10 | recall@20 | MRR |", "|---|---|---|---|---|"]
    for mode in ("keyword", "semantic", "hybrid (shipped)"):
        m = results[mode]["all"]
        lines.append(f"| {mode} | {m['r@5']:.3f} | {m['r@10']:.3f} | {m['r@20']:.3f} | "
                     f"{m['mrr']:.3f} |")
    lines += ["", "## recall@10 (MRR) by category", "",
              "| mode | " + " | ".join(f"{c} {n}" for c, n in CATEGORIES.items()) + " |",
              "|---" * (len(CATEGORIES) + 1) + "|"]
    for mode in ("keyword", "semantic", "hybrid (shipped)"):
        cells = [f"{results[mode][c]['r@10']:.3f} ({results[mode][c]['mrr']:.3f})"
                 if c in results[mode] else "-" for c in CATEGORIES]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    counts = defaultdict(int)
    for row in rows:
        counts[row["category"]] += 1
    lines += ["", "Questions per category: " + ", ".join(
        f"{c} {n}: {counts[c]}" for c, n in CATEGORIES.items()), "",
        "## Fusion variants (same candidates)", "",
        "| fusion | recall@5 | recall@10 | recall@20 | MRR |", "|---|---|---|---|---|"]
    for name, result in results.items():
        m = result["all"]
        lines.append(f"| {name} | {m['r@5']:.3f} | {m['r@10']:.3f} | {m['r@20']:.3f} | "
                     f"{m['mrr']:.3f} |")
    lines += ["", "## Latency per query (search functions, in process)", "",
              "| mode | p50 ms | p95 ms |", "|---|---|---|"]
    for mode, values in latency.items():
        lines.append(f"| {mode} | {percentile(values, 0.5) * 1000:.1f} | "
                     f"{percentile(values, 0.95) * 1000:.1f} |")
    lines += ["", "Semantic and hybrid include embedding the question.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
