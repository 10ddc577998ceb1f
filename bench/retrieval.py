"""Retrieval quality on two long-term memory benchmarks, LoCoMo (short conversational
turns) and BEAM (long user-assistant project chats): recall@k and MRR of keyword, semantic
and hybrid search against a textbook BM25, per dataset, per question type and per fold,
with the hybrid ranking's tuning chosen by cross-validation over both datasets at once.

    .venv/bin/python bench/retrieval.py            # both datasets, from ../shared/data
    .venv/bin/python bench/retrieval.py --datasets beam --data-dir /tmp/retrieval

Protocols, one mind per conversation (LoCoMo) or chat (BEAM), every item stored through
the API (``POST /memory`` with a Mind Key, in process), as a client of the memory model
would:

- **episodes**: each turn or message an episodic memory; LoCoMo under ``sessions/<n>``
  with its session's date as ``occurred_at``, BEAM under ``batches/<n>`` with the last
  time anchor seen plus one minute per message since it (only 90 of 5,732 messages carry
  an anchor). The embedding worker's two jobs run to the end (vectors, episode contexts);
- **turns** (``--turns``): each item a plain ``context`` memory at the root, no date.

Keys (``--keys``): ``identifier`` (LoCoMo ``d1t3``, BEAM ``m12``: names that carry no
words) or ``derived`` (none sent: Synapse derives one from the first words of the content).
Content: LoCoMo "Speaker: text" (plus a shared photo's caption), BEAM the message's text,
cut to the 50,000-character limit.

Every question with evidence is asked (LoCoMo categories 1-4; BEAM's probing questions);
a question's recall@k is the share of its evidence items in the top k, MRR uses the first
one found. The hybrid candidates of each question are read once
(memories.search.hybrid_candidates) and ranked again under each tuning
(memories.ranking.rank): the code search runs. Cross-validation: five folds, each holding
out one LoCoMo conversation and four BEAM chats; the tuning is the one with the best
*unweighted mean* of the two datasets' recall@10 on the other folds, and each dataset's
held-out mean is reported (never the in-sample best as the result). The BM25 row is plain
Okapi BM25 (k1 1.2, b 0.75, lower-cased word tokens, no stemming, no stop words) over the
same content, computed here. Latency is measured through ``GET /memory/search`` in
process. Runs on a throwaway embedded PostgreSQL unless --data-dir (kept, and reused) is
given; there the candidates are kept too (``candidates-*.pickle``): delete them after
changing how they are read. The data sets are read in place, never copied.
"""

import argparse
import itertools
import json
import math
import os
import pickle
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
DATASETS = {"locomo": DATA / "locomo" / "locomo_dev.json",
            "beam": DATA / "beam" / "beam_100k.json"}
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
FOLDS = 5
GRID = {"keyword_weight": (0.4, 0.5, 0.6),
        "long_keyword_weight": (0.1, 0.2, 0.3),
        "neighbour_share": (0.2, 0.3, 0.4),
        "rerank_weight": (0.2, 0.3, 0.4)}
LATENCY_QUESTIONS = 150
CONTENT_LIMIT = 50_000


# -- The datasets, as items to store and questions to ask ------------------------------------

@dataclass
class Item:
    key: str
    content: str
    path: str
    occurred_at: datetime


@dataclass
class Ask:
    text: str
    wanted: set[str]
    category: str


@dataclass
class Group:
    """One conversation or chat: one mind."""

    dataset: str
    name: str
    items: list[Item]
    asks: list[Ask]
    fold: int = 0


def _turn_key(dia_id: str) -> str:
    # "D1:3" → "d1t3": one token, so the key adds no stray numbers to the search document.
    return dia_id.strip().lower().replace(":", "t")


def locomo_groups(path: Path) -> list[Group]:
    groups = []
    for number, sample in enumerate(json.loads(path.read_text())):
        conversation, items = sample["conversation"], []
        sessions = sorted((int(m.group(1)), name) for name in conversation
                          if (m := re.fullmatch(r"session_(\d+)", name)))
        for session, name in sessions:
            date = datetime.strptime(conversation[f"{name}_date_time"].strip(),
                                     "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            for turn in conversation[name]:
                content = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    content += f" [shares a photo: {turn['blip_caption']}]"
                items.append(Item(_turn_key(turn["dia_id"]), content, f"sessions/{session}",
                                  date))
        asks = []
        for question in sample["qa"]:
            wanted = {_turn_key(dia_id) for evidence in question.get("evidence", [])
                      for dia_id in re.findall(r"D\d+:\d+", evidence)}
            if question.get("category") in LOCOMO_CATEGORIES and wanted:
                asks.append(Ask(str(question["question"]), wanted,
                                LOCOMO_CATEGORIES[question["category"]]))
        groups.append(Group("locomo", sample["sample_id"], items, asks, fold=number % FOLDS))
    return groups


def beam_groups(path: Path) -> list[Group]:
    groups = []
    for number, chat in enumerate(json.loads(path.read_text())):
        items, anchor, anchor_id = [], None, 0
        for message in sorted(chat["messages"], key=lambda message: message["id"]):
            if message["time_anchor"]:
                anchor = datetime.strptime(message["time_anchor"], "%B-%d-%Y").replace(
                    tzinfo=UTC)
                anchor_id = message["id"]
            moment = (anchor or datetime(2024, 1, 1, tzinfo=UTC)) + timedelta(
                minutes=message["id"] - anchor_id)
            items.append(Item(f"m{message['id']}", message["content"][:CONTENT_LIMIT],
                              f"batches/{message['batch']}", moment))
        keys = {item.key for item in items}
        asks = [Ask(question["question"], {f"m{gold}" for gold in question["gold"]},
                    question["type"]) for question in chat["questions"]
                if {f"m{gold}" for gold in question["gold"]} <= keys]
        # Four chats a fold, one after the other (chats 1-4 in the first).
        groups.append(Group("beam", f"chat {chat['chat']}", items, asks,
                            fold=number // 4 % FOLDS))
    return groups


LOADERS = {"locomo": locomo_groups, "beam": beam_groups}


# -- Django, storing, the worker --------------------------------------------------------

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


def store(groups: list[Group], protocol: str, keys: str) -> dict[str, tuple]:
    """One mind per group for (``protocol``, ``keys``), reused when present:
    {group name: (mind, {memory id: item key})}."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from minds.models import Mind
    from minds.services import key_issue, mind_create

    user, _ = get_user_model().objects.get_or_create(username="retrieval-bench")
    minds, stored, started = {}, 0, time.monotonic()
    for group in groups:
        name = f"{group.dataset} {group.name} {protocol} {keys}"
        mind = Mind.objects.filter(memberships__user=user, name=name).first()
        key_of = {}
        if mind is None:
            mind = mind_create(owner=user, name=name)
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key_issue(mind=mind, name='b')[1]}")
            for item in group.items:
                body = {"category": "context", "content": item.content}
                if keys == "identifier":
                    body["key"] = item.key
                if protocol == "episodes":
                    body.update(memory_type="episodic", path=item.path,
                                occurred_at=item.occurred_at.isoformat())
                response = client.post("/memory", body, format="json")
                assert response.status_code in (200, 201), response.content
                key_of[response.json()["id"]] = item.key
                stored += 1
            mind.refresh_from_db()
            # Kept beside the mind so a reused cluster maps ids back without the items.
            _key_map_path(mind).write_text(json.dumps(key_of))
        else:
            key_of = json.loads(_key_map_path(mind).read_text())
        minds[group.name] = (mind, key_of)
    if stored:
        print(f"{protocol}/{keys}: stored {stored} items through the API in "
              f"{time.monotonic() - started:.1f}s", flush=True)
    return minds


def _key_map_path(mind) -> Path:
    return Path(os.environ["SYNAPSE_DATA_DIR"]) / f"keys-{mind.id}.json"


def run_worker() -> None:
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


# -- Reading each question's rankings once ------------------------------------------------

def collect(groups: list[Group], minds: dict, *, contexts: bool) -> list[dict]:
    """Every question's wanted keys, its keyword and semantic rankings, its BM25 ranking,
    and its hybrid candidates (with and without episode contexts when ``contexts``)."""
    from memories.models import Memory
    from memories.query import QuerySyntaxError, words_query
    from memories.ranking import Question
    from memories.search import (
        hybrid_candidates,
        keyword_search,
        query_vector,
        semantic_search,
    )

    rows = []
    for group in groups:
        mind, key_of = minds[group.name]
        memories = Memory.objects.for_mind(mind).current()
        bm25 = BM25([(item.key, item.content) for item in group.items])
        for ask in group.asks:
            parsed = words_query(ask.text)
            try:
                keyword = keyword_search(memories, parsed, limit=20).hits if parsed else []
            except QuerySyntaxError:
                keyword = []
            row = {"dataset": group.dataset, "group": group.name, "fold": group.fold,
                   "category": ask.category, "wanted": ask.wanted,
                   "question": Question.of(ask.text), "key_of": key_of,
                   "keyword": [key_of[memory_id] for memory_id, _ in keyword],
                   "semantic": [key_of[memory_id] for memory_id, _ in
                                semantic_search(memories, query_vector(ask.text), limit=20)],
                   "bm25": bm25.rank(ask.text, 20), "candidates": {}}
            for with_context in ((True, False) if contexts else (False,)):
                row["candidates"][with_context] = hybrid_candidates(
                    memories, ask.text, context=with_context)[0]
            rows.append(row)
    return rows


def collected(data_dir, name: str, read):
    """``read()``, kept in ``data_dir`` (with --data-dir) under ``name``, so a rerun that
    only changes the ranking skips the queries."""
    cache = Path(data_dir) / f"candidates-{name}.pickle" if data_dir else None
    if cache is not None and cache.exists():
        return pickle.loads(cache.read_bytes())  # noqa: S301 - written by this script
    started = time.monotonic()
    rows = read()
    print(f"{name}: collected the candidates in {time.monotonic() - started:.1f}s",
          flush=True)
    if cache is not None:
        cache.write_bytes(pickle.dumps(rows))
    return rows


class BM25:
    """Plain Okapi BM25 over (key, text) documents: the reference a keyword ranker is held
    against (k1 1.2, b 0.75; lower-cased word tokens, no stemming, no stop words)."""

    K1, B = 1.2, 0.75
    _TOKEN = re.compile(r"\w+")

    def __init__(self, documents: list[tuple[str, str]]):
        self.keys = [key for key, _ in documents]
        self.counts = [Counter(self._TOKEN.findall(text.lower())) for _, text in documents]
        self.lengths = [sum(counts.values()) for counts in self.counts]
        self.average = statistics.fmean(self.lengths) if self.lengths else 1.0
        frequency = Counter(word for counts in self.counts for word in counts)
        total = len(documents)
        self.idf = {word: math.log(1 + (total - df + 0.5) / (df + 0.5))
                    for word, df in frequency.items()}

    def rank(self, query: str, limit: int) -> list[str]:
        words = [word for word in dict.fromkeys(self._TOKEN.findall(query.lower()))
                 if word in self.idf]
        scores = []
        for position, counts in enumerate(self.counts):
            norm = self.K1 * (1 - self.B + self.B * self.lengths[position] / self.average)
            score = sum(self.idf[word] * counts[word] * (self.K1 + 1) / (counts[word] + norm)
                        for word in words if word in counts)
            if score > 0:
                scores.append((-score, self.keys[position]))
        return [key for _, key in sorted(scores)[:limit]]


def latency(groups: list[Group], minds: dict) -> dict[str, list[float]]:
    """Seconds per ``GET /memory/search`` of each mode, through the API in process."""
    from rest_framework.test import APIClient

    from minds.services import key_issue

    clients = {}
    for group in groups:
        client = APIClient()
        mind = minds[group.name][0]
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key_issue(mind=mind, name='lat')[1]}")
        clients[group.name] = client
    asked = list(itertools.islice(((group.name, ask.text) for group in groups
                                   for ask in group.asks), LATENCY_QUESTIONS))
    times = defaultdict(list)
    for mode in ("keyword", "semantic", "hybrid"):
        for name, text in asked:
            started = time.perf_counter()
            response = clients[name].get("/memory/search", {"q": text, "mode": mode,
                                                            "limit": 10})
            times[mode].append(time.perf_counter() - started)
            assert response.status_code == 200, response.content
    return times


# -- Measuring -----------------------------------------------------------------------------

def measure(rows, rank) -> dict:
    """{category | "all" | group | ("fold", n): {"r@5", …, "mrr"}} for ``rank``: row →
    ranked keys."""
    per = defaultdict(lambda: defaultdict(list))
    for row in rows:
        ranked = rank(row)[:max(KS)]
        wanted = row["wanted"]
        values = {f"r@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in KS}
        first = next((position for position, key in enumerate(ranked, 1) if key in wanted),
                     None)
        values["mrr"] = 1 / first if first else 0.0
        for group in (row["category"], "all", row["group"], ("fold", row["fold"])):
            for name, value in values.items():
                per[group][name].append(value)
    return {group: {name: statistics.fmean(v) for name, v in values.items()}
            for group, values in per.items()}


def ranker(tuning, *, context: bool = True):
    from memories.ranking import rank

    def ranked(row):
        candidates = row["candidates"].get(context) or row["candidates"][False]
        return [row["key_of"][hit.id] for hit in rank(candidates, row["question"], tuning)]
    return ranked


def side(name):
    return lambda row: row[name]


def tunings():
    from memories.ranking import Tuning

    return [Tuning(**dict(zip(GRID, values, strict=True)))
            for values in itertools.product(*GRID.values())]


def cross_validate(rows_by_dataset: dict[str, list[dict]]):
    """Five folds, each holding out one fold of every dataset: the tuning with the best
    unweighted mean over the datasets of recall@10 on the other folds, measured on the
    held-out fold. Returns ({dataset: [(fold, tuning, held-out metrics)]}, in-sample best
    per dataset, the tunings' scores)."""
    grid = tunings()
    scores = {dataset: {tuning: measure(rows, ranker(tuning)) for tuning in grid}
              for dataset, rows in rows_by_dataset.items()}

    def training(tuning, held_out):
        means = []
        for dataset in rows_by_dataset:
            folds = [scores[dataset][tuning][("fold", fold)]["r@10"] for fold in range(FOLDS)
                     if fold != held_out and ("fold", fold) in scores[dataset][tuning]]
            means.append(statistics.fmean(folds))
        return statistics.fmean(means)

    result = defaultdict(list)
    for held_out in range(FOLDS):
        best = max(grid, key=lambda tuning: (training(tuning, held_out), -grid.index(tuning)))
        for dataset in rows_by_dataset:
            metrics = scores[dataset][best].get(("fold", held_out))
            if metrics:
                result[dataset].append((held_out, best, metrics))
    in_sample = {dataset: max(grid, key=lambda tuning: scores[dataset][tuning]["all"]["r@10"])
                 for dataset in rows_by_dataset}
    return result, in_sample, scores


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


# -- The run and its report -----------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="locomo,beam",
                        help="comma-separated: locomo, beam")
    parser.add_argument("--locomo", default=str(DATASETS["locomo"]))
    parser.add_argument("--beam", default=str(DATASETS["beam"]))
    parser.add_argument("--keys", choices=("identifier", "derived"), default="identifier")
    parser.add_argument("--turns", default="",
                        help="comma-separated datasets also stored under the turn-alone "
                             "protocol (no paths, no dates)")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--data-dir", help="keep the cluster here (reused when it exists)")
    parser.add_argument("--out", default=str(ROOT / "bench/results/retrieval.md"))
    args = parser.parse_args()
    names = [name.strip() for name in args.datasets.split(",") if name.strip()]
    groups = {name: LOADERS[name](Path(getattr(args, name))) for name in names}
    throwaway = setup_django(args.data_dir)
    try:
        from memories.embeddings import get_model

        get_model()
        minds = {name: store(groups[name], "episodes", args.keys) for name in names}
        turn_minds = {name: store(groups[name], "turns", args.keys) for name in names
                      if name in args.turns.split(",")}
        run_worker()
        episodes = {name: collected(args.data_dir, f"{name}-episodes-{args.keys}",
                                    lambda name=name: collect(groups[name], minds[name],
                                                              contexts=True))
                    for name in names}
        turns = {name: collected(args.data_dir, f"{name}-turns-{args.keys}",
                                 lambda name=name: collect(groups[name], turn_minds[name],
                                                           contexts=False))
                 for name in turn_minds}
        times = {} if args.no_latency else {name: latency(groups[name], minds[name])
                                            for name in names}
        report = render(args, groups, episodes, turns, times)
        Path(args.out).write_text(report)
        print(report)
    finally:
        if throwaway:
            from django.db import connections

            connections.close_all()
            from synapse import embedded_db

            embedded_db.destroy(throwaway)


def _tuning(tuning) -> str:
    return (f"keyword {tuning.keyword_weight} (long memories {tuning.long_keyword_weight}), "
            f"neighbour {tuning.neighbour_share}, rerank {tuning.rerank_weight}")


def _cells(metrics) -> str:
    m = metrics["all"]
    return f"{m['r@5']:.3f} | {m['r@10']:.3f} | {m['r@20']:.3f} | {m['mrr']:.3f}"


def render(args, groups, episodes, turns, times) -> str:
    from memories.ranking import Tuning

    folds, in_sample, scores = cross_validate(episodes)
    shipped = Tuning()
    lines = ["# Retrieval benchmark (LoCoMo and BEAM)", "",
             f"`bench/retrieval.py --datasets {args.datasets} --keys {args.keys}`"
             + (f" --turns {args.turns}" if args.turns else "") + ". "
             + "; ".join(f"{name}: {len(groups[name])} groups, "
                         f"{sum(len(g.items) for g in groups[name])} items, "
                         f"{len(episodes[name])} questions" for name in episodes)
             + ". Protocol *episodes* (module docstring); recall@k = share of a question's "
               "evidence in the top k; MRR by the first evidence item.", "",
             "## Cross-validated hybrid (5 folds over both datasets, unweighted mean)", "",
             "| dataset | held-out recall@10 (mean of folds) | in-sample best | gap |",
             "|---|---|---|---|"]
    for name, results in folds.items():
        held = statistics.fmean(metrics["r@10"] for _fold, _tuning, metrics in results)
        best = scores[name][in_sample[name]]["all"]["r@10"]
        lines.append(f"| {name} | **{held:.3f}** | {best:.3f} ({_tuning(in_sample[name])}) | "
                     f"{best - held:+.3f} |")
    lines += ["", "| fold | chosen on the other folds | " + " | ".join(
        f"{name} r@10" for name in folds) + " |", "|---" * (2 + len(folds)) + "|"]
    for fold in range(FOLDS):
        chosen = next(t for results in folds.values() for f, t, _m in results if f == fold)
        cells = [next((f"{m['r@10']:.3f}" for f, _t, m in folds[name] if f == fold), "-")
                 for name in folds]
        lines.append(f"| {fold} | {_tuning(chosen)} | " + " | ".join(cells) + " |")
    lines += ["", "Grid: " + "; ".join(f"{name} {', '.join(map(str, values))}"
                                         for name, values in GRID.items())
              + f". Shipped tuning (memories.ranking.Tuning): {_tuning(shipped)}.", ""]
    for name, rows in episodes.items():
        results = {"BM25 (reference, in Python)": measure(rows, side("bm25")),
                   "keyword": measure(rows, side("keyword")),
                   "semantic": measure(rows, side("semantic")),
                   "hybrid (shipped tuning)": measure(rows, ranker(shipped))}
        ablation = {
            "without episode contexts": ranker(shipped, context=False),
            "one keyword weight (no long-memory weight)": ranker(
                replace(shipped, long_keyword_weight=None)),
            "without the neighbour share": ranker(replace(shipped, neighbour_share=0.0)),
            "without the rerank": ranker(replace(shipped, rerank_weight=0.0)),
            "fusion alone (no contexts, neighbours, rerank)": ranker(
                replace(shipped, neighbour_share=0.0, rerank_weight=0.0), context=False)}
        results.update({f"hybrid {name}": measure(rows, rank)
                        for name, rank in ablation.items()})
        lines += [f"## {name}: by mode (episodes)", "",
                  "| mode | recall@5 | recall@10 | recall@20 | MRR |", "|---|---|---|---|---|"]
        lines += [f"| {mode} | {_cells(metrics)} |" for mode, metrics in results.items()]
        categories = sorted({row["category"] for row in rows})
        lines += ["", f"### {name}: recall@10 by question type", "",
                  "| mode | " + " | ".join(categories) + " |",
                  "|---" * (len(categories) + 1) + "|"]
        for mode, metrics in results.items():
            lines.append(f"| {mode} | " + " | ".join(
                f"{metrics[c]['r@10']:.3f}" for c in categories) + " |")
        if name in turns:
            turn_rows = turns[name]
            lines += ["", f"### {name}: the turn-alone protocol (no paths, no dates)", "",
                      "| mode | recall@5 | recall@10 | recall@20 | MRR |",
                      "|---|---|---|---|---|"]
            for mode, metrics in {"keyword": measure(turn_rows, side("keyword")),
                                  "semantic": measure(turn_rows, side("semantic")),
                                  "hybrid (shipped)": measure(turn_rows, ranker(
                                      shipped, context=False))}.items():
                lines.append(f"| {mode} | {_cells(metrics)} |")
        if name in times:
            lines += ["", f"### {name}: latency per query (`GET /memory/search`, in process, "
                      f"{len(times[name]['keyword'])} questions, limit 10)", "",
                      "| mode | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|"]
            for mode, values in times[name].items():
                lines.append(f"| {mode} | {percentile(values, 0.5) * 1000:.1f} | "
                             f"{percentile(values, 0.95) * 1000:.1f} | "
                             f"{percentile(values, 0.99) * 1000:.1f} |")
        lines.append("")
    lines += ["Semantic and hybrid latency include embedding the question.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
