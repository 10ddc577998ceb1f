"""Hybrid ranking, after the candidates are read: fusion, neighbour propagation, reranking.

Pure computation over :class:`Candidates` (memories.search reads them in a fixed number of
queries), so ``bench/retrieval.py`` replays exactly what search does under other
:class:`Tuning` values, for the cross-validation over both retrieval benchmarks (LoCoMo's
conversations, BEAM's project chats) that chose the defaults (docs/search.md,
bench/results/retrieval.md).

The score of a candidate is the sum of four parts, each reported by ``explain=true``:

- ``keyword``: ``keyword_weight`` × its keyword score over the best one's
  (``long_keyword_weight`` when the candidates are long memories, Tuning.keyword_weight_for:
  derived from their own length, no setting);
- ``semantic``: (1 − that weight) × its cosine similarity, min-max normalised over the
  candidates;
- ``neighbour``: ``neighbour_share`` × the better fused score (keyword + semantic) of the
  two episodes next to it on its timeline, when they are candidates too — the turn just
  before an answer often holds the question's words;
- ``rerank``: ``rerank_weight`` × what a cross-encoder would notice cheaply, on the best
  RERANK_DEPTH: the question's names and numbers in the text, its word pairs in the same
  order, and a year or month it names against when an episode happened.
"""

import re
from dataclasses import dataclass, field
from datetime import datetime

# How many of the fused candidates the rerank features look at.
RERANK_DEPTH = 40

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset([
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most",
    "my", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our",
    "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours"])
_MONTHS = {name: number for number, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august",
     "september", "october", "november", "december"], 1)}
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")


@dataclass(frozen=True)
class Tuning:
    """The ranking's parameters; the defaults are what cross-validation chose."""

    keyword_weight: float = 0.5
    neighbour_share: float = 0.3
    rerank_weight: float = 0.2
    # The keyword weight when the candidates are long memories (a mean over LONG_WORDS
    # words: project chats, documents), where a long text's words say less about it than a
    # short turn's; None: keyword_weight always.
    long_keyword_weight: float | None = 0.2

    def keyword_weight_for(self, candidates: "Candidates") -> float:
        """The keyword weight for these candidates: derived from their own length."""
        if self.long_keyword_weight is None or not candidates.texts:
            return self.keyword_weight
        return self.long_keyword_weight if candidates.long() else self.keyword_weight


LONG_WORDS = 60


@dataclass
class Candidates:
    """What ranking needs about one query's candidates.

    ``keyword`` and ``semantic``: each side's ranked (id, score); ``cosine``: the
    similarity of every candidate that has a current vector; ``windows``: an episode's
    context window in timeline order, itself included (memories.context); ``texts``: the
    readable content of each candidate (credentials never), and ``moments`` when an
    episode happened."""

    keyword: list[tuple[str, float]] = field(default_factory=list)
    semantic: list[tuple[str, float]] = field(default_factory=list)
    cosine: dict[str, float] = field(default_factory=dict)
    windows: dict[str, list[str]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    moments: dict[str, datetime] = field(default_factory=dict)
    # rerank_features of a candidate, once per question (the features do not depend on
    # the tuning, and the benchmark ranks the same candidates under many tunings).
    features: dict[str, float] = field(default_factory=dict, repr=False)
    # long(), once per question, for the same reason.
    _long: bool | None = field(default=None, repr=False)

    def long(self) -> bool:
        """Whether these are long memories: their texts average more than LONG_WORDS
        words (Tuning.keyword_weight_for)."""
        if self._long is None:
            words = sum(len(text.split()) for text in self.texts.values())
            self._long = words / max(len(self.texts), 1) > LONG_WORDS
        return self._long


@dataclass
class RankedHit:
    id: str
    score: float
    parts: dict[str, float]


@dataclass(frozen=True)
class Question:
    """The cheap features of a question: its names and numbers, its content-word pairs,
    and the years and months it names."""

    names: frozenset[str]
    pairs: frozenset[tuple[str, str]]
    years: frozenset[int]
    months: frozenset[int]

    @classmethod
    def of(cls, text: str) -> "Question":
        words = _WORD.findall(text)
        # A month by name ("may" only capitalised: it is also a verb) feeds the date feature.
        months = {_MONTHS[word.lower()] for word in words if word.lower() in _MONTHS
                  and (word.lower() != "may" or word[0].isupper())}
        names = set()
        for position, word in enumerate(words):
            lowered = word.lower()
            if lowered in _STOP or _MONTHS.get(lowered) in months:
                continue
            if any(ch.isdigit() for ch in word) or (position > 0 and word[0].isupper()):
                names.add(lowered)
        content = [word.lower() for word in words if word.lower() not in _STOP]
        return cls(names=frozenset(names),
                   pairs=frozenset(zip(content, content[1:], strict=False)),
                   years=frozenset(int(year) for year in _YEAR.findall(text)),
                   months=frozenset(months))


def rerank_features(question: Question, text: str, moment: datetime | None) -> float:
    """0–1: the share of the question's names and numbers found in ``text``, of its word
    pairs found in order, and whether a year or month it names is when ``moment`` was,
    averaged over the features the question has."""
    words = [word.lower() for word in _WORD.findall(text)]
    present = set(words)
    scores = []
    if question.names:
        scores.append(len(question.names & present) / len(question.names))
    if question.pairs:
        content = [word for word in words if word not in _STOP]
        pairs = set(zip(content, content[1:], strict=False))
        scores.append(len(question.pairs & pairs) / len(question.pairs))
    if (question.years or question.months) and moment is not None:
        year_ok = not question.years or moment.year in question.years
        month_ok = not question.months or moment.month in question.months
        scores.append(1.0 if year_ok and month_ok else 0.0)
    return sum(scores) / len(scores) if scores else 0.0


def fused_parts(candidates: Candidates, keyword_weight: float) -> dict[str, dict[str, float]]:
    """The keyword and semantic parts of every candidate (docs/search.md, "Fusion")."""
    parts: dict[str, dict[str, float]] = {}
    if candidates.keyword:
        best = max(score for _id, score in candidates.keyword) or 1.0
        for memory_id, score in candidates.keyword:
            parts[memory_id] = {"keyword": keyword_weight * score / best, "semantic": 0.0}
    cosines = {memory_id: candidates.cosine[memory_id] for memory_id in
               ({memory_id for memory_id, _ in candidates.semantic} | parts.keys())
               if memory_id in candidates.cosine}
    if cosines:
        best, worst = max(cosines.values()), min(cosines.values())
        spread = (best - worst) or 1.0
        for memory_id, score in cosines.items():
            parts.setdefault(memory_id, {"keyword": 0.0, "semantic": 0.0})
            parts[memory_id]["semantic"] = (1 - keyword_weight) * (score - worst) / spread
    return parts


def rank(candidates: Candidates, question: Question, tuning: Tuning = Tuning()
         ) -> list[RankedHit]:
    """Every candidate with its score and parts, best first (ties by id)."""
    parts = fused_parts(candidates, tuning.keyword_weight_for(candidates))
    fused = {memory_id: part["keyword"] + part["semantic"] for memory_id, part in parts.items()}
    for memory_id, part in parts.items():
        part["neighbour"] = tuning.neighbour_share * _best_neighbour(
            candidates.windows.get(memory_id), memory_id, fused)
    scored = sorted(parts, key=lambda memory_id: (-sum(parts[memory_id].values()), memory_id))
    for memory_id in scored[:RERANK_DEPTH]:
        if tuning.rerank_weight and memory_id not in candidates.features:
            candidates.features[memory_id] = rerank_features(
                question, candidates.texts.get(memory_id, ""),
                candidates.moments.get(memory_id))
        parts[memory_id]["rerank"] = (tuning.rerank_weight
                                      * candidates.features.get(memory_id, 0.0))
    for memory_id in scored[RERANK_DEPTH:]:
        parts[memory_id]["rerank"] = 0.0
    hits = [RankedHit(memory_id, sum(part.values()), part) for memory_id, part in parts.items()]
    hits.sort(key=lambda hit: (-hit.score, hit.id))
    return hits


def _best_neighbour(window: list[str] | None, memory_id: str, fused: dict[str, float]) -> float:
    """The better fused score of the episodes just before and after ``memory_id``."""
    if not window or memory_id not in window:
        return 0.0
    position = window.index(memory_id)
    adjacent = window[max(position - 1, 0):position] + window[position + 1:position + 2]
    return max((fused.get(neighbour, 0.0) for neighbour in adjacent), default=0.0)
