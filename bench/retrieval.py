"""Retrieval quality on LoCoMo: recall@k and MRR of keyword, semantic and hybrid search, per
category and per conversation, with leave-one-conversation-out cross-validation of the
hybrid ranking's tuning and an ablation of each of its parts.

    .venv/bin/python bench/retrieval.py ../shared/data/locomo/locomo_dev.json

Two storage protocols, each one mind per conversation, every turn stored through the API
(``POST /memory`` with a Mind Key, in process):

- **episodes** (what agents are asked to do): each turn an episodic memory under the path
  ``sessions/<n>`` of its session, with the session's date as ``occurred_at``; the
  embedding worker's two jobs run to the end (vectors, and episode contexts);
- **turns** (the protocol before types and paths): each turn a plain ``context`` memory at
  the root.

Key = the turn's dialogue id, content = "Speaker: text" (plus the caption of a shared
photo). Every question of categories 1-4 is asked; a question's recall@k is the share of
its evidence turns in the top k; MRR uses the first one found. The hybrid candidates of
each question are read once (memories.search.hybrid_candidates) and ranked again under
each tuning (memories.ranking.rank): the same code search runs. Tuning is chosen on four
conversations and measured on the fifth, for each fold; the report gives the mean of the
held-out folds. Latency is measured through ``GET /memory/search`` in process. Runs on a
throwaway embedded PostgreSQL unless --data-dir (kept, and reused) is given; there the
candidates are kept too (candidates.pickle): delete that file after changing how they are
read. The data set is read in place, never copied.
"""

import argparse
import itertools
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
GRID = {"keyword_weight": (0.4, 0.5, 0.6, 0.7),
        "neighbour_share": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
        "rerank_weight": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)}
LATENCY_QUESTIONS = 200


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
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    for scope in ("WRITE", "SEARCH", "SEMANTIC", "RECALL"):
        os.environ.setdefault(f"SYNAPSE_RATE_{scope}", "100000000/min")
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


def session_date(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a UTC moment."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions(conversation: dict):
    """(number, date, turns) of each session, in order."""
    found = []
    for name, turns in conversation["conversation"].items():
        match = re.fullmatch(r"session_(\d+)", name)
        if match:
            number = int(match.group(1))
            date = session_date(conversation["conversation"][f"{name}_date_time"])
            found.append((number, date, turns))
    return sorted(found, key=lambda item: item[0])


def load(conversations: list[dict], protocol: str):
    """One mind per conversation for ``protocol`` (reused when present): {sample_id: mind}."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from minds.models import Mind
    from minds.services import key_issue, mind_create

    user, _ = get_user_model().objects.get_or_create(username="locomo-bench")
    minds, stored, started = {}, 0, time.monotonic()
    for conversation in conversations:
        name = f"LoCoMo {conversation['sample_id']} {protocol}"
        mind = Mind.objects.filter(memberships__user=user, name=name).first()
        if mind is None:
            mind = mind_create(owner=user, name=name)
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key_issue(mind=mind, name='bench')[1]}")
            for number, date, turns in sessions(conversation):
                for turn in turns:
                    body = {"category": "context", "key": turn_key(turn["dia_id"]),
                            "content": turn_content(turn)}
                    if protocol == "episodes":
                        body.update(memory_type="episodic", path=f"sessions/{number}",
                                    occurred_at=date.isoformat())
                    response = client.post("/memory", body, format="json")
                    assert response.status_code == 201, response.content
                    stored += 1
        minds[conversation["sample_id"]] = mind
    if stored:
        print(f"{protocol}: stored {stored} turns through the API in "
              f"{time.monotonic() - started:.1f}s", flush=True)
    return minds


def run_worker():
    """What the embedding worker does, to the end: vectors, then episode contexts."""
    from memories.context import rebuild_all_contexts
    from memories.embeddings import embed_batch

    started = time.monotonic()
    embedded = 0
    while done := embed_batch(limit=256):
        embedded += done
    contexts = rebuild_all_contexts()
    if embedded or contexts:
        print(f"worker: {embedded} embedded, {contexts} contexts in "
              f"{time.monotonic() - started:.1f}s", flush=True)


def evidence_keys(question: dict) -> set[str]:
    keys = set()
    for item in question.get("evidence", []):
        for dia_id in re.findall(r"D\d+:\d+", item):
            keys.add(turn_key(dia_id))
    return keys


def questions(conversations):
    for conversation in conversations:
        for question in conversation["qa"]:
            if question.get("category") in CATEGORIES and evidence_keys(question):
                yield conversation["sample_id"], question


def collect(minds, conversations, *, contexts: bool):
    """Every question's evidence keys, its keyword and semantic rankings, and its hybrid
    candidates (with and without episode contexts when ``contexts``), keyed by memory key."""
    from memories.embeddings import embed_query
    from memories.models import Memory
    from memories.query import words_query
    from memories.ranking import Question
    from memories.search import hybrid_candidates, keyword_search, semantic_search

    rows = []
    for sample_id, question in questions(conversations):
        mind = minds[sample_id]
        memories = Memory.objects.for_mind(mind).current()
        text = str(question["question"])
        parsed = words_query(text)
        row = {"sample": sample_id, "category": question["category"],
               "wanted": evidence_keys(question), "question": Question.of(text),
               "keyword": keyword_search(memories, parsed, limit=20).hits if parsed else [],
               "semantic": semantic_search(memories, embed_query(text), limit=20)}
        row["candidates"] = {}
        for with_context in ((True, False) if contexts else (False,)):
            candidates, _result = hybrid_candidates(memories, text, context=with_context)
            row["candidates"][with_context] = candidates
        row["key_of"] = dict(memories.values_list("id", "key"))
        rows.append(row)
    return rows


def collected(data_dir, episode_minds, turn_minds, conversations):
    """The candidates of every question of both protocols; kept in ``data_dir`` (with
    --data-dir) so a rerun that only changes the ranking skips the queries."""
    import pickle

    cache = Path(data_dir) / "candidates.pickle" if data_dir else None
    if cache is not None and cache.exists():
        return pickle.loads(cache.read_bytes())  # noqa: S301 - written by this script
    started = time.monotonic()
    rows = (collect(episode_minds, conversations, contexts=True),
            collect(turn_minds, conversations, contexts=False))
    print(f"collected the candidates in {time.monotonic() - started:.1f}s", flush=True)
    if cache is not None:
        cache.write_bytes(pickle.dumps(rows))
    return rows


def latency(minds, conversations) -> dict[str, list[float]]:
    """Seconds per ``GET /memory/search`` of each mode, through the API in process."""
    from rest_framework.test import APIClient

    from minds.services import key_issue

    clients = {}
    for sample_id, mind in minds.items():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key_issue(mind=mind, name='lat')[1]}")
        clients[sample_id] = client
    times = defaultdict(list)
    asked = list(itertools.islice(questions(conversations), LATENCY_QUESTIONS))
    for mode in ("keyword", "semantic", "hybrid"):
        for sample_id, question in asked:
            started = time.perf_counter()
            response = clients[sample_id].get("/memory/search", {
                "q": question["question"], "mode": mode, "limit": 10})
            times[mode].append(time.perf_counter() - started)
            assert response.status_code == 200, response.content
    return times


def measure(rows, rank) -> dict:
    """{category | "all" | sample: {"r@5", …, "mrr"}} for ``rank``: row → ranked keys."""
    per = defaultdict(lambda: defaultdict(list))
    for row in rows:
        ranked = rank(row)[:max(KS)]
        wanted = row["wanted"]
        values = {f"r@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in KS}
        first = next((position for position, key in enumerate(ranked, 1) if key in wanted), None)
        values["mrr"] = 1 / first if first else 0.0
        for group in (row["category"], "all", row["sample"]):
            for name, value in values.items():
                per[group][name].append(value)
    return {group: {name: statistics.fmean(v) for name, v in values.items()}
            for group, values in per.items()}


def ranker(tuning, *, context: bool = True):
    from memories.ranking import rank

    def ranked(row):
        candidates = row["candidates"][context]
        return [row["key_of"][hit.id] for hit in rank(candidates, row["question"], tuning)]
    return ranked


def side(name):
    return lambda row: [row["key_of"][memory_id] for memory_id, _score in row[name]]


def cross_validate(rows, samples):
    """Leave one conversation out: the tuning with the best recall@10 on the other four,
    measured on the one left out. Returns [(sample, tuning, held-out metrics)]."""
    from memories.ranking import Tuning

    tunings = [Tuning(**dict(zip(GRID, values, strict=True)))
               for values in itertools.product(*GRID.values())]
    scores = {tuning: measure(rows, ranker(tuning)) for tuning in tunings}
    folds = []
    for held_out in samples:
        others = [sample for sample in samples if sample != held_out]

        def training(tuning, others=others):
            return statistics.fmean(scores[tuning][sample]["r@10"] for sample in others)

        best = max(tunings, key=lambda tuning: (training(tuning), -tunings.index(tuning)))
        folds.append((held_out, best, scores[best][held_out]))
    return folds, scores


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
        from memories.embeddings import get_model
        from memories.ranking import Tuning

        get_model()
        episode_minds = load(conversations, "episodes")
        turn_minds = load(conversations, "turns")
        run_worker()
        episodes, turns = collected(args.data_dir, episode_minds, turn_minds, conversations)
        samples = [conversation["sample_id"] for conversation in conversations]
        folds, scores = cross_validate(episodes, samples)
        shipped = Tuning()
        no_parts = Tuning(keyword_weight=shipped.keyword_weight, neighbour_share=0.0,
                          rerank_weight=0.0)
        results = {
            "keyword": measure(episodes, side("keyword")),
            "semantic": measure(episodes, side("semantic")),
            "hybrid (shipped)": measure(episodes, ranker(shipped)),
        }
        ablation = {
            "hybrid (shipped): contexts, neighbour share, rerank": results["hybrid (shipped)"],
            "without episode contexts": measure(episodes, ranker(shipped, context=False)),
            "without the neighbour share": measure(episodes, ranker(Tuning(
                keyword_weight=shipped.keyword_weight, neighbour_share=0.0,
                rerank_weight=shipped.rerank_weight))),
            "without the rerank": measure(episodes, ranker(Tuning(
                keyword_weight=shipped.keyword_weight,
                neighbour_share=shipped.neighbour_share, rerank_weight=0.0))),
            "contexts only (no neighbour share, no rerank)": measure(episodes, ranker(no_parts)),
            "fusion alone (no contexts, no neighbour share, no rerank)": measure(
                episodes, ranker(no_parts, context=False)),
        }
        turn_results = {
            "keyword": measure(turns, side("keyword")),
            "semantic": measure(turns, side("semantic")),
            "hybrid (shipped)": measure(turns, ranker(shipped, context=False)),
        }
        times = latency(episode_minds, conversations)
        report = render(args.path, conversations, episodes, results, ablation, turn_results,
                        folds, scores, times, shipped)
        Path(args.out).write_text(report)
        print(report)
    finally:
        if throwaway:
            from django.db import connections

            connections.close_all()
            from synapse import embedded_db

            embedded_db.destroy(throwaway)


def _row(name, metrics) -> str:
    m = metrics["all"]
    return f"| {name} | {m['r@5']:.3f} | {m['r@10']:.3f} | {m['r@20']:.3f} | {m['mrr']:.3f} |"


def render(path, conversations, rows, results, ablation, turn_results, folds, scores, times,
           shipped) -> str:
    counts = defaultdict(int)
    for row in rows:
        counts[row["category"]] += 1
    held_out = statistics.fmean(metrics["r@10"] for _sample, _tuning, metrics in folds)
    lines = [
        "# Retrieval benchmark (LoCoMo)", "",
        f"`bench/retrieval.py {Path(path).name}`: {len(conversations)} conversations, "
        f"{len(rows)} questions of categories 1-4 (" + ", ".join(
            f"{n} {counts[c]}" for c, n in CATEGORIES.items()) + "). Protocol *episodes*: "
        "every turn stored through the API as an episodic memory under `sessions/<n>`, "
        "with its session's date as `occurred_at`; protocol *turns*: every turn a plain "
        "memory at the root. recall@k = share of a question's evidence turns in the top k; "
        "MRR by the first evidence turn.", "",
        "## Cross-validated hybrid (leave one conversation out)", "",
        f"Mean recall@10 of the held-out folds: **{held_out:.3f}** (grid: " + "; ".join(
            f"{name} {', '.join(map(str, values))}" for name, values in GRID.items()) + ").",
        "", "| held out | chosen on the other four | recall@10 | MRR |", "|---|---|---|---|"]
    for sample, tuning, metrics in folds:
        lines.append(f"| {sample} | keyword {tuning.keyword_weight}, neighbour "
                     f"{tuning.neighbour_share}, rerank {tuning.rerank_weight} | "
                     f"{metrics['r@10']:.3f} | {metrics['mrr']:.3f} |")
    lines += ["", f"Shipped tuning (memories.ranking.Tuning): keyword {shipped.keyword_weight}, "
              f"neighbour {shipped.neighbour_share}, rerank {shipped.rerank_weight}; "
              f"in-sample best of the grid: " + _best(scores) + ".", "",
              "## By mode (episodes)", "",
              "| mode | recall@5 | recall@10 | recall@20 | MRR |", "|---|---|---|---|---|"]
    lines += [_row(name, metrics) for name, metrics in results.items()]
    lines += ["", "## recall@10 (MRR) by category", "",
              "| protocol, mode | " + " | ".join(f"{c} {n}" for c, n in CATEGORIES.items())
              + " |", "|---" * (len(CATEGORIES) + 1) + "|"]
    for protocol, group in (("episodes", results), ("turns", turn_results)):
        for mode, metrics in group.items():
            cells = [f"{metrics[c]['r@10']:.3f} ({metrics[c]['mrr']:.3f})"
                     if c in metrics else "-" for c in CATEGORIES]
            lines.append(f"| {protocol}, {mode} | " + " | ".join(cells) + " |")
    lines += ["", "## Ablation (episodes, shipped tuning)", "",
              "| ranking | recall@5 | recall@10 | recall@20 | MRR |", "|---|---|---|---|---|"]
    lines += [_row(name, metrics) for name, metrics in ablation.items()]
    lines += ["", "## The turn-alone protocol (no paths, no occurred_at)", "",
              "| mode | recall@5 | recall@10 | recall@20 | MRR |", "|---|---|---|---|---|"]
    lines += [_row(name, metrics) for name, metrics in turn_results.items()]
    lines += ["", f"## Latency per query (`GET /memory/search`, in process, "
              f"{LATENCY_QUESTIONS} questions, limit 10)", "",
              "| mode | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|"]
    for mode, values in times.items():
        lines.append(f"| {mode} | {percentile(values, 0.5) * 1000:.1f} | "
                     f"{percentile(values, 0.95) * 1000:.1f} | "
                     f"{percentile(values, 0.99) * 1000:.1f} |")
    lines += ["", "Semantic and hybrid include embedding the question.", ""]
    return "\n".join(lines)


def _best(scores) -> str:
    tuning, metrics = max(scores.items(), key=lambda item: item[1]["all"]["r@10"])
    return (f"keyword {tuning.keyword_weight}, neighbour {tuning.neighbour_share}, rerank "
            f"{tuning.rerank_weight} → {metrics['all']['r@10']:.3f}")


if __name__ == "__main__":
    main()
