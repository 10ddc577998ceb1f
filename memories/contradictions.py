"""Contradictions: pairs of memories that likely say opposite things about the same subject."""

import difflib
import functools
import re
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memories.embeddings import embed_texts, embedding_text, model_name
from memories.models import Category, Memory
from minds.models import Mind

# Below this cosine similarity two memories are not about the same subject.
SAME_SUBJECT = 0.5
# Numbers and free values need a closer subject than a negation does.
SAME_SLOT_SUBJECT = 0.6
NEIGHBOURS = 8
MAX_SIDE = 1000  # most recently updated memories considered as one side of a pair
MAX_PENDING = 500  # memories without an embedding embedded in-process per request

_DIGIT = re.compile(r"\d")
_TOKEN = re.compile(r"v?\d+(?:[.:/-]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_CONTRACTIONS = {"won't": ["will", "not"], "can't": ["can", "not"], "cannot": ["can", "not"],
                 "shan't": ["shall", "not"]}
NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "nobody", "neither", "nor",
                       "without", "longer", "anymore", "stopped", "quit"})
STOPWORDS = frozenset({"a", "an", "the", "is", "are", "was", "were", "be", "been", "being",
                       "am", "to", "of", "in", "on", "at", "for", "and", "or", "with", "by",
                       "it", "its", "this", "that", "these", "those", "we", "our", "us", "i",
                       "my", "me", "you", "your", "he", "him", "his", "she", "her", "they",
                       "them", "their", "has", "have", "had", "do", "does", "did", "will",
                       "would", "shall", "should", "can", "could", "may", "might", "must", "as",
                       "from", "per", "than", "then", "so", "also", "very", "even", "every",
                       "each", "all", "any", "some", "there", "here", "what", "which", "who",
                       "whom", "whose", "when", "where", "how", "about", "into", "over",
                       "under", "up", "out", "just", "only", "too", "still", "yet", "s"})
# Words before a value that hold one value at a time ("is Berlin", "in Munich").
VALUE_CUES = frozenset({"is", "are", "was", "were", "be", "in", "at", "on", "to", "called",
                        "named", "equal", "equals", "set", "via", "through", "using"})
_OPPOSITES = [("like", "dislike"), ("love", "hate"), ("enable", "disable"),
              ("enabled", "disabled"), ("allow", "forbid"), ("allowed", "forbidden"),
              ("true", "false"), ("yes", "no"), ("on", "off"), ("open", "closed"),
              ("always", "never"), ("include", "exclude"), ("accept", "reject"),
              ("public", "private"), ("available", "unavailable"), ("online", "offline"),
              ("active", "inactive"), ("pass", "fail"), ("success", "failure"),
              ("increase", "decrease"), ("prefer", "avoid"), ("agree", "disagree"),
              ("valid", "invalid"), ("supported", "unsupported"), ("dark", "light"),
              ("up", "down"), ("start", "stop"), ("win", "lose"), ("remote", "onsite"),
              ("required", "optional"), ("mandatory", "optional"), ("sync", "async")]
OPPOSITES = {pair for a, b in _OPPOSITES for pair in ((a, b), (b, a))}
_MONTHS = frozenset({"january", "february", "march", "april", "may", "june", "july", "august",
                     "september", "october", "november", "december", "jan", "feb", "mar", "apr",
                     "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"})


def stem(word: str) -> str:
    """A crude English stem, enough to match "supports"/"support", "engineers"/"engineer"."""
    if word.isalpha() and len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.isalpha() and len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=8192)
def tokens(text: str) -> tuple[str, ...]:
    """Lowercase words and numbers; "isn't" → "is", "not"; "alice's" → "alice"."""
    result = []
    for raw in _TOKEN.findall(text.lower().replace("’", "'")):
        if raw in _CONTRACTIONS:
            result += _CONTRACTIONS[raw]
        elif raw.endswith("n't"):
            result += [raw[:-3], "not"]
        elif raw.endswith("'s"):
            result.append(raw[:-2])
        else:
            result.append(stem(raw.split("'")[0]))
    return tuple(result)


def is_value(token: str) -> bool:
    return _DIGIT.search(token) is not None


def content_words(words: list[str]) -> set[str]:
    return {word for word in words if word not in STOPWORDS and word not in NEGATIONS
            and not is_value(word)}


def _negated(words: list[str]) -> bool:
    return any(word in NEGATIONS and word != "longer" for word in words) or (
        "no" in words and "longer" in words)


def _value_kind(values: list[str], context: list[str]) -> str:
    if any(re.fullmatch(r"v?\d+(\.\d+)+", v) or v.startswith("v") for v in values) and not any(
            _ISO_DATE.fullmatch(v) for v in values):
        return "versions"
    if any(re.fullmatch(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(/\d{2,4})?", v) for v in values) or (
            _MONTHS & set(context)):
        return "dates"
    if any(re.fullmatch(r"\d{1,2}:\d{2}", v) for v in values):
        return "times"
    return "numbers"


@dataclass(frozen=True)
class Conflict:
    kind: str  # negation, opposite, numbers, dates, times, versions, value
    reason: str
    strength: float


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}")


@dataclass(frozen=True)
class Value:
    text: str
    anchor: str | None  # the content word before it ("port 5432")
    unit: str | None  # the word after it ("25 MB", "12 May")


def _values(words: list[str]) -> list[Value]:
    found = []
    for position, word in enumerate(words):
        if not is_value(word):
            continue
        after = next((w for w in words[position + 1:position + 2] if not is_value(w)
                      and (w in _MONTHS or w not in STOPWORDS)), None)
        before = next((w for w in reversed(words[max(0, position - 3):position])
                       if w not in STOPWORDS and not is_value(w) and w not in NEGATIONS), None)
        found.append(Value(word, before, after))
    return found


def _same_slot(first: Value, second: Value, lone_dates: bool) -> bool:
    if first.unit and second.unit:
        return first.unit == second.unit
    if first.anchor is not None and first.anchor == second.anchor:
        return True
    # One date each ("launches on 2025-03-03" / "planned for 2025-04-14"): the same date.
    return lone_dates and bool(_ISO_DATE.fullmatch(first.text) and _ISO_DATE.fullmatch(
        second.text))


def _number_conflict(first: list[str], second: list[str]) -> Conflict | None:
    values_a, values_b = _values(first), _values(second)
    texts_a, texts_b = {v.text for v in values_a}, {v.text for v in values_b}
    lone_dates = (sum(bool(_ISO_DATE.fullmatch(t)) for t in texts_a) == 1
                  and sum(bool(_ISO_DATE.fullmatch(t)) for t in texts_b) == 1)
    differing = {(a, b) for a in values_a for b in values_b
                 if a.text not in texts_b and b.text not in texts_a
                 and _same_slot(a, b, lone_dates)}
    if len({a.text for a, _b in differing}) != 1 or len({b.text for _a, b in differing}) != 1:
        # Several values apart ("Milestone 1 … 2025-01-15" / "Milestone 2 … 2025-02-20")
        # means several things apart: different subjects, not one conflict.
        return None
    value_a, value_b = next(iter(differing))
    slot = value_a.unit or value_a.anchor or "the same thing"
    kind = _value_kind([value_a.text, value_b.text], [value_a.unit or "", value_a.anchor or ""])
    return Conflict(kind, f"different {kind} for {slot}: {value_a.text} vs {value_b.text}", 0.9)


def _substitutions(first: list[str], second: list[str]) -> list[tuple[list[str], list[str], str]]:
    """The places the two word lists differ, beyond stopwords: (a side, b side, word before)."""
    matcher = difflib.SequenceMatcher(a=first, b=second, autojunk=False)
    found = []
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        left, right = first[a1:a2], second[b1:b2]
        if all(word in STOPWORDS for word in left + right):
            continue
        found.append((left, right, first[a1 - 1] if a1 else ""))
    return found


def _opposite(left: list[str], right: list[str]) -> tuple[str, str] | None:
    for a in left:
        for b in right:
            if (a, b) in OPPOSITES or a in (f"un{b}", f"in{b}", f"dis{b}") or b in (
                    f"un{a}", f"in{a}", f"dis{a}"):
                return a, b
    return None


def assess(first: str, second: str, similarity: float) -> Conflict | None:
    """Whether two texts about the same subject (cosine ``similarity``) conflict, and how.

    Rules over the two texts, aligned word by word:

    - negation: one says "not", "never", "no longer"… about what the other affirms;
    - opposites: the same sentence with an antonym swapped in (enabled/disabled,
      likes/dislikes);
    - different numbers, dates or versions in the same slot ("port 5432" / "port 5433");
    - a different value after "is", "in", "at"… in otherwise the same sentence.
    """
    if similarity < SAME_SUBJECT:
        return None
    words_a, words_b = tokens(first), tokens(second)
    plain_a = [w for w in words_a if w not in NEGATIONS]
    plain_b = [w for w in words_b if w not in NEGATIONS]
    shared = content_words(words_a) & content_words(words_b)
    smaller = min(len(content_words(words_a)), len(content_words(words_b))) or 1
    overlap = len(shared) / smaller
    changes = _substitutions(plain_a, plain_b)
    if _negated(words_a) != _negated(words_b) and overlap >= 0.6:
        said = next(w for w in (words_a if _negated(words_a) else words_b) if w in NEGATIONS)
        return Conflict("negation", f"one says '{said}' where the other affirms the same "
                                    "thing", 0.9)
    if len(changes) == 1:
        left, right, before = changes[0]
        pair = _opposite(left, right)
        if pair and len(shared) >= 1:
            return Conflict("opposite", f"opposite words for the same thing: {pair[0]} vs "
                                        f"{pair[1]}", 0.9)
    if similarity >= SAME_SLOT_SUBJECT:
        numbers = _number_conflict(plain_a, plain_b)
        if numbers:
            return numbers
        if len(changes) == 1:
            left, right, before = changes[0]
            values_differ = (left and right and len(left) <= 3 and len(right) <= 3
                             and not any(is_value(w) for w in left + right))
            if values_differ and before in VALUE_CUES and len(shared) >= 2:
                return Conflict("value", f"different values after '{before}': "
                                         f"{' '.join(left)} vs {' '.join(right)}", 0.75)
    return None


def score(conflict: Conflict, similarity: float) -> float:
    """A pair's score: the rule's strength blended with the subject similarity."""
    return round(0.6 * conflict.strength + 0.4 * similarity, 3)


@dataclass
class Contradiction:
    first: Memory
    second: Memory
    similarity: float
    conflict: Conflict

    @property
    def score(self) -> float:
        return score(self.conflict, self.similarity)


def contradiction_candidates(mind: Mind):
    """Memories that take part: current, unexpired, not credentials (their content is
    encrypted, and never shown)."""
    return (Memory.objects.for_mind(mind).in_recall().exclude(category=Category.CREDENTIALS)
            .defer("search_vector"))


def _neighbour_pairs(mind: Mind, side: list[Memory],
                     computed: dict[str, np.ndarray]) -> dict[tuple[str, str], float]:
    """Nearest stored neighbours of every memory of ``side``, in one pgvector query: from
    its stored vector, or from ``computed`` when it has none yet."""
    if not side:
        return {}
    ids = [memory.id for memory in side]
    literals = [("[" + ",".join(f"{x:.7f}" for x in computed[memory_id]) + "]")
                if memory_id in computed else None for memory_id in ids]
    sql = """
        SELECT a.id, n.id, n.similarity
        FROM unnest(%s::text[], %s::text[]) AS a(id, vec)
        JOIN memories_memory s ON s.id = a.id AND (a.vec IS NOT NULL OR s.embedding IS NOT NULL)
        CROSS JOIN LATERAL (
            SELECT m.id, 1 - (m.embedding <=> COALESCE(a.vec::vector, s.embedding))
                   AS similarity
            FROM memories_memory m
            WHERE m.mind_id = %s AND m.id <> a.id AND m.embedding IS NOT NULL
              AND NOT m.embedding_pending AND m.embedding_model = %s
              AND m.deleted_at IS NULL AND m.superseded_at IS NULL
              AND (m.expires_at IS NULL OR m.expires_at > now())
              AND m.category <> 'credentials' AND m.path = s.path
            ORDER BY m.embedding <=> COALESCE(a.vec::vector, s.embedding) LIMIT %s) n
    """
    # Iterative HNSW scans (pgvector ≥ 0.8): the index keeps scanning until the mind's
    # filter lets NEIGHBOURS rows through, so a small mind in a big table still gets them.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(sql, [ids, literals, mind.id, model_name(), NEIGHBOURS])
        return {tuple(sorted((a, b))): float(sim) for a, b, sim in cursor.fetchall()
                if sim >= SAME_SUBJECT}


def _stored_vectors(ids: list[str]) -> dict[str, np.ndarray]:
    rows = Memory.objects.filter(pk__in=ids, embedding__isnull=False).values_list(
        "id", "embedding")
    return {memory_id: np.asarray(vector, dtype=np.float32) for memory_id, vector in rows}


def find_contradictions(*, mind: Mind, within: timedelta | None = None,
                        limit: int = 50) -> list[Contradiction]:
    """Likely contradicting pairs, best first. With ``within``, one memory of each pair was
    updated within that window.

    Two steps. *Same subject*: candidate pairs come from the embeddings — the nearest
    neighbours of each memory (pgvector over stored vectors, and the model in-process for
    memories still waiting for the worker). *Conflicting content*: :func:`assess`; each pair
    gets a reason and a :func:`score`. Two memories on different paths are never a pair:
    "port 5432" in one project does not contradict "port 5433" in another. Precision and
    recall on the labelled set in tests/memories/data/contradiction_pairs.json:
    docs/insight.md."""
    # Vectors stay in the database unless needed here: parsing them costs more than the rules.
    memories = contradiction_candidates(mind).defer("embedding")
    side_qs = memories.filter(updated_at__gte=timezone.now() - within) if within else memories
    side = list(side_qs.order_by("-updated_at", "id")[:MAX_SIDE])
    if not side:
        return []
    stale = Q(embedding_pending=True) | Q(embedding__isnull=True) | ~Q(
        embedding_model=model_name())
    missing = {memory.id: memory for memory in side if memory.embedding_pending
               or memory.embedding_model != model_name()}
    missing.update((memory.id, memory) for memory in memories.filter(stale)
                   .exclude(pk__in=missing).order_by("-updated_at")[:MAX_PENDING])
    computed = {memory_id: np.asarray(vector, dtype=np.float32) for memory_id, vector in zip(
        missing, embed_texts([embedding_text(m) for m in missing.values()]), strict=True)}
    similarities = _neighbour_pairs(mind, side, computed)
    by_id = {memory.id: memory for memory in side} | missing
    # Memories without a stored vector are nobody's pgvector neighbour: compare them here.
    if missing:
        side_vectors = computed | _stored_vectors([m.id for m in side if m.id not in computed])
        usable = [memory.id for memory in side if memory.id in side_vectors]
        side_matrix = np.vstack([side_vectors[memory_id] for memory_id in usable])
        missing_ids = list(missing)
        products = np.vstack([computed[i] for i in missing_ids]) @ side_matrix.T
        for row, column in zip(*np.nonzero(products >= SAME_SUBJECT), strict=True):
            first, second = missing_ids[row], usable[column]
            if first != second:
                similarities[tuple(sorted((first, second)))] = float(products[row, column])
    unknown = {memory_id for pair in similarities for memory_id in pair} - by_id.keys()
    by_id.update({memory.id: memory for memory in memories.filter(pk__in=unknown)})
    found = []
    for (first_id, second_id), similarity in similarities.items():
        first, second = by_id[first_id], by_id[second_id]
        if first.path != second.path:
            continue  # memories of two paths never contradict: each project has its own
        conflict = assess(first.content, second.content, similarity)
        if conflict:
            found.append(Contradiction(first, second, round(similarity, 4), conflict))
    found.sort(key=lambda c: (-c.score, c.first.id, c.second.id))
    return found[:limit]
