"""Variants of the retrieval pipeline, replayed on the minds bench/retrieval.py stored (run
it first with --data-dir): the keyword side read again from the database by the tree's
code, with module constants changed, and the semantic side computed here from variants of
what the model reads (the worker's vectors are not used). Each variant is cross-validated
as bench/retrieval.py does (five folds over both datasets, unweighted mean); the lines it
prints are the ablation of docs/search.md and bench/results/retrieval.md.

    .venv/bin/python bench/retrieval_variants.py DATA_DIR VARIANT [VARIANT…] [NAME=VALUE …]

NAME=VALUE sets a constant of memories.ranking or memories.search (TERM_SATURATION=0.8,
LENGTH_NORMALIZATION=0.0, CONTEXT_MAX_LEXEMES=1000000 …). SMALLGRID=1 in the environment
ranks under a smaller grid (faster); LONGW=1 adds the long-memory keyword weight to it.

VARIANT: form[:long], form one of full (before issue 37: date, key words, content), content,
date (date + content), datekw (date + key only when it reads as words + content: the shipped form);
long one of first (the model's first 256 word pieces: shipped), mean (mean of the windows'
vectors), max (best window), fmax<λ> (first + λ × best other, over 1 + λ).
"""
import os
import pickle
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import retrieval as r  # noqa: E402

WINDOW_WORDS = 180


def key_words(key: str) -> str:
    parts = key.split("_")
    return " ".join(parts) if all(p.isalpha() for p in parts) else ""


def text_of(row, form: str) -> str:
    when = ""
    if row["occurred_at"] is not None and form in ("full", "date", "datekw"):
        moment = row["occurred_at"].astimezone(UTC)
        when = f"On {moment.day} {moment:%B %Y}, "
    if form == "full":
        return f"{when}{row['key'].replace('_', ' ')}: {row['content']}"
    if form == "content":
        return row["content"]
    if form == "date":
        return f"{when}{row['content']}"
    if form == "datekw":
        words = key_words(row["key"])
        return f"{when}{words + ': ' if words else ''}{row['content']}"
    raise ValueError(form)


def windows(text: str) -> list[str]:
    words = text.split()
    if len(words) <= WINDOW_WORDS:
        return [text]
    return [" ".join(words[start:start + WINDOW_WORDS])
            for start in range(0, len(words), WINDOW_WORDS)]


def encode(texts: list[str]) -> np.ndarray:
    from memories.embeddings import get_model

    return get_model().encode(texts, batch_size=32, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False)


def vectors(dataset: str, rows: list[dict], form: str, long: str) -> dict:
    """{memory id: list of window vectors} (first window only unless long != first)."""
    cache = Path(os.environ["SYNAPSE_DATA_DIR"]) / "variants"
    cache.mkdir(exist_ok=True)
    name = cache / f"{dataset}-{form}-{'first' if long == 'first' else 'windows'}.pickle"
    if name.exists():
        return pickle.loads(name.read_bytes())  # noqa: S301 - written by this script
    started = time.monotonic()
    texts, owners = [], []
    for row in rows:
        text = text_of(row, form)
        pieces = [text] if long == "first" else windows(text)
        if long != "first" and len(pieces) > 1:
            # The first window keeps the prefix (date, key); later ones are content.
            pieces = [text_of({**row, "content": " ".join(row["content"].split()[
                :WINDOW_WORDS])}, form)] + windows(row["content"])[1:]
        texts += pieces
        owners += [row["id"]] * len(pieces)
    matrix = encode(texts)
    found = defaultdict(list)
    for owner, vector in zip(owners, matrix, strict=True):
        found[owner].append(vector)
    found = {key: np.stack(value) for key, value in found.items()}
    name.write_bytes(pickle.dumps(found))
    print(f"  embedded {len(texts)} texts ({dataset} {form} {long}) in "
          f"{time.monotonic() - started:.0f}s", flush=True)
    return found


def score_all(query: np.ndarray, ids: list[str], vecs: dict, long: str) -> dict:
    scores = {}
    for memory_id in ids:
        windows_ = vecs[memory_id]
        sims = windows_ @ query
        if long == "first" or len(sims) == 1:
            scores[memory_id] = float(sims[0])
        elif long == "mean":
            mean = windows_.mean(axis=0)
            scores[memory_id] = float(mean @ query / np.linalg.norm(mean))
        elif long == "max":
            scores[memory_id] = float(sims.max())
        elif long.startswith("fmax"):
            weight = float(long[4:])
            scores[memory_id] = float((sims[0] + weight * sims[1:].max()) / (1 + weight))
        else:
            raise ValueError(long)
    return scores


def main():
    data_dir = sys.argv[1]
    args = sys.argv[2:]
    variants = [a for a in args if not a.startswith("--") and "=" not in a]
    assignments = [a for a in args if "=" in a]
    names = ["locomo", "beam"]
    r.setup_django(data_dir)
    if os.environ.get("SMALLGRID"):
        r.GRID = {"keyword_weight": (0.3, 0.4, 0.5, 0.6), "neighbour_share": (0.0, 0.2, 0.4),
                  "rerank_weight": (0.0, 0.2, 0.4)}
    if os.environ.get("LONGW"):
        r.GRID = {"keyword_weight": (0.4, 0.5, 0.6), "long_keyword_weight": (0.2, 0.3, 0.4),
                  "neighbour_share": (0.2, 0.4), "rerank_weight": (0.2, 0.4)}
    import memories.ranking as R
    import memories.search as S
    from memories.context import rebuild_all_contexts
    from memories.embeddings import embed_query
    from memories.models import Memory
    from memories.query import words_query

    for assignment in assignments:
        name, value = assignment.split("=")
        module = R if hasattr(R, name) else S
        setattr(module, name, float(value) if "." in value else int(value))
    rebuild_all_contexts()
    base = {}
    for dataset in names:
        groups = r.LOADERS[dataset](Path(r.DATASETS[dataset]))
        minds = r.store(groups, "episodes", "identifier")
        per_group = []
        for group in groups:
            mind, key_of = minds[group.name]
            memories = Memory.objects.for_mind(mind).current()
            rows = [{"id": m.id, "key": m.key, "content": m.content,
                     "occurred_at": m.occurred_at, "context_ids": m.context_ids}
                    for m in memories.only("id", "key", "content", "occurred_at",
                                           "context_ids")]
            asks = []
            for ask in group.asks:
                parsed = words_query(ask.text)
                keyword = (S.keyword_search(memories, parsed, limit=100, partial=True,
                                            context=True).hits if parsed else [])
                asks.append((ask, keyword, np.asarray(query_vector(ask.text, embed_query))))
            per_group.append((group, key_of, rows, asks))
        base[dataset] = per_group

    for variant in variants:
        form, _, long = variant.partition(":")
        long = long or "first"
        rows_by_dataset = {}
        started = time.monotonic()
        for dataset, per_group in base.items():
            all_rows = [row for _g, _k, rows, _a in per_group for row in rows]
            vecs = vectors(dataset, all_rows, form, long)
            out = []
            for group, key_of, rows, asks in per_group:
                by_id = {row["id"]: row for row in rows}
                ids = list(by_id)
                for ask, keyword, query in asks:
                    cosine_all = score_all(query, ids, vecs, long)
                    semantic = sorted(cosine_all.items(), key=lambda kv: (-kv[1], kv[0]))[:100]
                    union = {i for i, _ in semantic} | {i for i, _ in keyword}
                    candidates = R.Candidates(
                        keyword=keyword, semantic=semantic,
                        cosine={i: cosine_all[i] for i in union},
                        windows={i: by_id[i]["context_ids"] for i in union
                                 if by_id[i]["context_ids"]},
                        texts={i: by_id[i]["content"] for i in union},
                        moments={i: by_id[i]["occurred_at"] for i in union
                                 if by_id[i]["occurred_at"]})
                    out.append({"dataset": dataset, "group": group.name, "fold": group.fold,
                                "category": ask.category, "wanted": ask.wanted,
                                "question": R.Question.of(ask.text), "key_of": key_of,
                                "keyword": [key_of[i] for i, _ in keyword[:20]],
                                "semantic": [key_of[i] for i, _ in semantic[:20]],
                                "candidates": {True: candidates, False: candidates}})
            rows_by_dataset[dataset] = out
        folds, in_sample, scores = r.cross_validate(rows_by_dataset)
        line = [f"{variant:14} {' '.join(assignments)}"]
        for dataset, rows in rows_by_dataset.items():
            held = statistics.fmean(m["r@10"] for _f, _t, m in folds[dataset])
            kw = r.measure(rows, r.side("keyword"))["all"]["r@10"]
            sem = r.measure(rows, r.side("semantic"))["all"]["r@10"]
            best = scores[dataset][in_sample[dataset]]["all"]["r@10"]
            line.append(f"{dataset}: kw {kw:.3f} sem {sem:.3f} hybrid-cv {held:.3f} "
                        f"(in-sample {best:.3f})")
        chosen = sorted({tuple(getattr(t, name) for name in r.GRID)
                         for results in folds.values() for _f, t, _m in results})
        print(" | ".join(line), "| chosen", chosen, f"({time.monotonic() - started:.0f}s)",
              flush=True)


_QUERIES = {}


def query_vector(text, embed):
    if text not in _QUERIES:
        _QUERIES[text] = embed(text)
    return _QUERIES[text]


if __name__ == "__main__":
    main()
