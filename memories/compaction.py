"""Compaction: plan clusters of near-duplicate unverified agent memories and their summaries."""

import hashlib
import re
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from django.utils import timezone

from memories.embeddings import embed_texts, embedding_text, model_name
from memories.models import PRIORITY_RANK, Category, Memory, MemoryType, Source
from minds.models import Mind

# Two memories of one category are near-duplicates when their embeddings are very close
# (cosine ≥ SAME_MEANING), or close (≥ SAME_MEANING_WITH_TAG) and they share a tag.
SAME_MEANING = 0.86
SAME_MEANING_WITH_TAG = 0.75
# Sentences at least this close say the same thing; the summary keeps the first.
SAME_SENTENCE = 0.9
# The most candidates one run considers (oldest first); run again for the rest.
MAX_CANDIDATES = 2000
MAX_TAGS = 20
MAX_CONTENT = 50_000
SUMMARY_CONFIDENCE = 0.7
AGENT_SOURCES = (Source.AGENT, Source.TOOL)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|without|cannot|\w+n't)\b", re.IGNORECASE)


@dataclass
class ClusterPlan:
    category: str
    path: str
    memory_type: str
    members: list[Memory]
    similarity: float  # the lowest similarity between two members
    key: str = ""
    content: str = ""
    tags: list[str] = field(default_factory=list)
    priority: str = ""
    expires_at: object = None


@dataclass
class CompactionPlan:
    candidates: int
    clusters: list[ClusterPlan]


def compaction_candidates(*, mind: Mind, older_than: timedelta | None = None,
                          category: str | None = None):
    """Memories compaction may touch: current, unexpired, unverified, by an agent, and not
    episodes (each is an event at its own moment on a timeline: two alike are two events).

    Current means not in the trash and not superseded; written by an agent means ``source``
    agent or tool; never credentials, never summaries (``source=system``) — so a
    compaction can always be undone by ``services.memory_uncompact`` without unpicking
    older ones.
    """
    memories = (Memory.objects.for_mind(mind).in_recall()
                .filter(verified=False, source__in=AGENT_SOURCES)
                .exclude(category=Category.CREDENTIALS)
                .exclude(memory_type=MemoryType.EPISODIC))
    if older_than is not None:
        memories = memories.filter(updated_at__lte=timezone.now() - older_than)
    if category:
        memories = memories.filter(category=category)
    return memories.order_by("created_at", "id")


def memory_vectors(memories: list[Memory]) -> np.ndarray:
    """Unit vectors of ``memories``: the stored embedding when current, else computed now
    (not stored: the worker owns that)."""
    current = model_name()
    vectors: list = [None] * len(memories)
    missing = []
    for position, memory in enumerate(memories):
        if (memory.embedding is not None and not memory.embedding_pending
                and memory.embedding_model == current):
            vectors[position] = np.asarray(memory.embedding, dtype=np.float32)
        else:
            missing.append(position)
    computed = embed_texts([embedding_text(memories[position]) for position in missing])
    for position, vector in zip(missing, computed, strict=True):
        vectors[position] = np.asarray(vector, dtype=np.float32)
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack(vectors)


def link_matrix(memories: list[Memory], similarity: np.ndarray) -> np.ndarray:
    """Which pairs are near-duplicates: same category, type and path (compaction never
    merges two projects' memories), and close — or a bit less close with a tag in common."""
    tags = sorted({tag for memory in memories for tag in memory.tags})
    column = {tag: position for position, tag in enumerate(tags)}
    incidence = np.zeros((len(memories), max(1, len(tags))), dtype=np.float32)
    for row, memory in enumerate(memories):
        for tag in memory.tags:
            incidence[row, column[tag]] = 1.0
    share_tag = (incidence @ incidence.T) > 0
    places = np.array([f"{memory.category}\n{memory.memory_type}\n{memory.path}"
                       for memory in memories])
    same_place = places[:, None] == places[None, :]
    return same_place & ((similarity >= SAME_MEANING)
                            | ((similarity >= SAME_MEANING_WITH_TAG) & share_tag))


def cluster_memories(memories: list[Memory], vectors: np.ndarray,
                     min_cluster_size: int) -> list[tuple[list[int], float]]:
    """Complete-linkage clusters (positions into ``memories``) and their lowest similarity,
    largest first.

    A cluster needs every pair of its members to be near-duplicates (complete linkage), so
    a chain a≈b≈c never pulls unrelated a and c together."""
    if not memories:
        return []
    similarity = vectors @ vectors.T
    linked = link_matrix(memories, similarity)
    clusters: list[list[int]] = []
    for position in range(len(memories)):
        best, best_score = None, -1.0
        for cluster in clusters:
            if linked[position, cluster].all():
                score = float(similarity[position, cluster].mean())
                if score > best_score:
                    best, best_score = cluster, score
        if best is None:
            clusters.append([position])
        else:
            best.append(position)
    found = []
    for cluster in clusters:
        if len(cluster) >= min_cluster_size:
            block = similarity[np.ix_(cluster, cluster)]
            lowest = float(block[np.triu_indices(len(cluster), k=1)].min())
            found.append((cluster, lowest))
    found.sort(key=lambda item: (-len(item[0]), -item[1], memories[item[0][0]].created_at))
    return found


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def normalized(sentence: str) -> str:
    return _NOT_WORD.sub(" ", sentence.lower()).strip()


def same_claims(first: str, second: str) -> bool:
    """Whether two close sentences state the same numbers and the same negations: "port
    5432" and "port 5433" embed almost alike but are two different facts, both kept."""
    return (_NUMBER.findall(first) == _NUMBER.findall(second)
            and bool(_NEGATION.search(first)) == bool(_NEGATION.search(second)))


def union_of_facts(contents: list[str], known: dict[str, np.ndarray] | None = None) -> str:
    """Every sentence of ``contents`` once: exact repeats (ignoring case, spacing and
    punctuation) and sentences that mean the same (embeddings, with the same numbers and
    negations) are dropped, the first kept. ``known``: sentence vectors already computed."""
    sentences, seen = [], set()
    for content in contents:
        for sentence in split_sentences(content):
            norm = normalized(sentence)
            if norm and norm not in seen:
                seen.add(norm)
                sentences.append(sentence)
    if len(sentences) > 1:
        known = known or {}
        new = [sentence for sentence in sentences if sentence not in known]
        known = {**known, **dict(zip(new, embed_texts(new), strict=True))}
        vectors = np.asarray([known[sentence] for sentence in sentences], dtype=np.float32)
        kept: list[int] = []
        for position in range(len(sentences)):
            if all(float(vectors[position] @ vectors[other]) < SAME_SENTENCE
                   or not same_claims(sentences[position], sentences[other])
                   for other in kept):
                kept.append(position)
        sentences = [sentences[position] for position in kept]
    lines, size = [], 0
    for sentence in sentences:
        if size + len(sentence) + 1 > MAX_CONTENT:
            break
        lines.append(sentence)
        size += len(sentence) + 1
    return "\n".join(lines)


def merged_tags(members: list[Memory]) -> list[str]:
    """Tags of all members, most shared first, at most MAX_TAGS."""
    counts: dict[str, int] = {}
    for member in members:
        for tag in member.tags:
            counts[tag] = counts.get(tag, 0) + 1
    return sorted(counts, key=lambda tag: (-counts[tag], tag))[:MAX_TAGS]


def summary_key(members: list[Memory]) -> str:
    digest = hashlib.sha256(" ".join(sorted(m.id for m in members)).encode()).hexdigest()[:12]
    return f"compacted_{digest}"


def summarise(cluster: ClusterPlan, known: dict[str, np.ndarray] | None = None) -> ClusterPlan:
    """Fill in the summary memory of ``cluster``: newest member's words first."""
    newest_first = sorted(cluster.members, key=lambda m: m.updated_at, reverse=True)
    cluster.key = summary_key(cluster.members)
    cluster.content = union_of_facts([member.content for member in newest_first], known)
    cluster.tags = merged_tags(newest_first)
    cluster.priority = min((m.priority for m in cluster.members),
                           key=lambda priority: PRIORITY_RANK[priority])
    expiries = [member.expires_at for member in cluster.members]
    cluster.expires_at = None if None in expiries else max(expiries)
    return cluster


def plan_compaction(*, mind: Mind, older_than: timedelta | None = None,
                    category: str | None = None, max_clusters: int = 50,
                    min_cluster_size: int = 2) -> CompactionPlan:
    """Which memories to merge and what each summary says. Changes nothing.

    Planning only reads (and may run the embedding model); ``services.memory_compact``
    applies a plan in one transaction."""
    memories = list(compaction_candidates(mind=mind, older_than=older_than,
                                          category=category)[:MAX_CANDIDATES])
    vectors = memory_vectors(memories)
    found = cluster_memories(memories, vectors, min_cluster_size)[:max_clusters]
    # One model call for the sentences of every cluster, not one per cluster.
    sentences = list(dict.fromkeys(
        sentence for positions, _lowest in found for position in positions
        for sentence in split_sentences(memories[position].content)))
    known = dict(zip(sentences, embed_texts(sentences), strict=True))
    clusters = []
    for positions, lowest in found:
        members = [memories[position] for position in positions]
        first = members[0]
        clusters.append(summarise(ClusterPlan(
            category=first.category, path=first.path, memory_type=first.memory_type,
            members=members, similarity=round(lowest, 4)), known))
    return CompactionPlan(candidates=len(memories), clusters=clusters)
