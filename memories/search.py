"""Search: the query parser (SPEC syntax → tsquery), keyword ranking, semantic search and
hybrid fusion. The rules are written down in docs/search.md."""

import html
import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from pgvector.django import CosineDistance

from memories.models import Category, Memory
from minds.models import Mind

MAX_QUERY_TERMS = 64
# ts_rank weights for {D, C, B, A}: key and tags (A) above English content (B) above the
# unstemmed copy of the content (D).
RANK_WEIGHTS = "{0.05, 0.1, 0.4, 1.0}"
# ts_rank normalisation (1: divide by 1 + log of the document length) and the BM25-like
# saturation of one word's rank: rank / (rank + TERM_SATURATION).
RANK_NORMALIZATION = 0
TERM_SATURATION = 0.1
# How many candidates each side hands to the fusion (and recall ranks by relevance).
FUSION_CANDIDATES = 50
# hybrid_search's candidates a side; both sides then score the union of the two lists
# (measured on LoCoMo: bench/results/retrieval.md).
HYBRID_CANDIDATES = 100
# Hybrid: share of the keyword side in the fused score (measured on LoCoMo, see
# bench/results/retrieval.md); the semantic side gets the rest.
HYBRID_KEYWORD_WEIGHT = 0.6
SEMANTIC_EF_SEARCH = 100
_MARK_START, _MARK_END = "\ue000", "\ue001"
_HEADLINE_OPTIONS = (f"StartSel={_MARK_START}, StopSel={_MARK_END}, MaxWords=30, MinWords=12, "
                     "MaxFragments=2, FragmentDelimiter=\" … \"")
_PREFIX_CORE = re.compile(r"[^\W_]+")
_WORD = re.compile(r"[^\W_]+")


class QuerySyntaxError(ValueError):
    """The query does not follow the search syntax; the message says what is wrong."""


# -- Parser ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    """One searchable piece: a word, a "phrase", or a prefix*."""

    kind: str  # "word", "phrase" or "prefix"
    text: str

    def search_query(self) -> SearchQuery:
        """The same tsquery as a Django expression."""
        if self.kind == "prefix":
            return SearchQuery(f"'{self.text}':*", config="english", search_type="raw")
        return SearchQuery(self.text, config="english",
                           search_type="phrase" if self.kind == "phrase" else "plain")

    def tsquery_sql(self) -> tuple[str, list]:
        """SQL for this term's tsquery; the user's text only ever travels as a parameter."""
        if self.kind == "phrase":
            return "phraseto_tsquery('english'::regconfig, %s)", [self.text]
        if self.kind == "prefix":
            # The core is letters and digits only (checked by the parser), so quoting it
            # as a tsquery lexeme cannot be escaped out of.
            return "to_tsquery('english'::regconfig, %s)", [f"'{self.text}':*"]
        return "plainto_tsquery('english'::regconfig, %s)", [self.text]


@dataclass(frozen=True)
class ParsedQuery:
    """Clauses are ANDed; the terms inside one clause are ORed; excluded terms must not
    match. ``explicit`` says whether the query used any operator (quotes, OR, -, *)."""

    clauses: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...] = ()
    explicit: bool = False

    @property
    def terms(self) -> list[Term]:
        return [term for clause in self.clauses for term in clause]


def _tokens(text: str):
    """Yield (negated, kind, text, position) for each item of the query."""
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char.isspace():
            position += 1
            continue
        start = position
        negated = char == "-"
        if negated:
            position += 1
            if position >= length or text[position].isspace():
                raise QuerySyntaxError(
                    f"A '-' at character {start + 1} must be followed directly by a word or "
                    "phrase to exclude, e.g. docker -swarm.")
            char = text[position]
        if char == '"':
            end = text.find('"', position + 1)
            if end == -1:
                raise QuerySyntaxError(
                    f"Unbalanced quote: the phrase opened at character {position + 1} is "
                    "never closed.")
            phrase = text[position + 1:end]
            if not phrase.strip():
                raise QuerySyntaxError(f"Empty phrase \"\" at character {position + 1}.")
            yield negated, "phrase", phrase, start
            position = end + 1
            continue
        end = position
        while end < length and not text[end].isspace() and text[end] != '"':
            end += 1
        word = text[position:end]
        position = end
        if word.endswith("*"):
            core = word.rstrip("*")
            runs = _PREFIX_CORE.findall(core)
            if not core or len(runs) != 1 or runs[0] != core:
                raise QuerySyntaxError(
                    f"'{word}' at character {start + 1}: a '*' must follow a word's first "
                    "letters or digits, e.g. deploy*.")
            yield negated, "prefix", core, start
        elif word == "OR" and not negated:
            yield False, "or", word, start
        else:
            yield negated, "word", word, start


def parse_query(text: str) -> ParsedQuery:
    """Parse the SPEC syntax: words ANDed, "phrases", prefix*, a OR b, -exclusion.

    Raises QuerySyntaxError with a message for the user when the query is malformed.
    """
    if "\x00" in text:
        raise QuerySyntaxError("The query contains a NUL character.")
    clauses: list[list[Term]] = []
    excluded: list[Term] = []
    explicit = False
    pending_or = False
    last_was_positive = False
    for negated, kind, value, position in _tokens(text):
        if kind == "or":
            explicit = True
            if not last_was_positive or pending_or:
                raise QuerySyntaxError(
                    f"OR at character {position + 1} needs a word or phrase on each side, "
                    "e.g. docker OR kubernetes.")
            pending_or = True
            continue
        term = Term(kind, value)
        explicit = explicit or negated or kind != "word"
        if negated:
            if pending_or:
                raise QuerySyntaxError(
                    f"An excluded term cannot be part of OR (character {position + 1}).")
            excluded.append(term)
            last_was_positive = False
            continue
        if pending_or:
            clauses[-1].append(term)
            pending_or = False
        else:
            clauses.append([term])
        last_was_positive = True
    if pending_or:
        raise QuerySyntaxError("OR at the end of the query needs a word or phrase after it.")
    if not clauses:
        raise QuerySyntaxError(
            "Give at least one word or phrase to search for; excluded terms alone match "
            "nothing." if excluded else "The query is empty.")
    unique_clauses = tuple(dict.fromkeys(tuple(clause) for clause in clauses))
    unique_excluded = tuple(dict.fromkeys(excluded))
    if len(unique_excluded) + sum(len(clause) for clause in unique_clauses) > MAX_QUERY_TERMS:
        raise QuerySyntaxError(f"Too many distinct terms: at most {MAX_QUERY_TERMS} per query.")
    return ParsedQuery(unique_clauses, unique_excluded, explicit)


def search_query(parsed: ParsedQuery) -> SearchQuery:
    """The strict tsquery of a parsed query: every clause, no excluded term."""
    combined = None
    for clause in parsed.clauses:
        either = clause[0].search_query()
        for term in clause[1:]:
            either = either | term.search_query()
        combined = either if combined is None else combined & either
    for term in parsed.excluded:
        combined = combined & ~term.search_query()
    return combined


# -- SQL plumbing ------------------------------------------------------------------------

def _where(memories) -> tuple[str, list]:
    """The WHERE clause of a single-table Memory queryset, compiled with its parameters."""
    query = memories.query
    if any(count and alias != Memory._meta.db_table
           for alias, count in query.alias_refcount.items()):
        raise ValueError("search needs a queryset without joins")
    compiler = query.get_compiler(memories.db)
    if query.is_empty():
        return "FALSE", []
    sql, params = compiler.compile(query.where)
    return (sql or "TRUE"), list(params)


def _live_terms(terms: list[Term]) -> list[bool]:
    """Whether each term leaves any lexeme (stop words and punctuation do not)."""
    if not terms:
        return []
    pieces, params = [], []
    for term in terms:
        sql, term_params = term.tsquery_sql()
        pieces.append(f"numnode({sql}) > 0")
        params += term_params
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(pieces)}", params)
        return list(cursor.fetchone())


def _or_sql(terms: list[Term]) -> tuple[str, list]:
    pieces, params = [], []
    for term in terms:
        sql, term_params = term.tsquery_sql()
        pieces.append(sql)
        params += term_params
    return "(" + " || ".join(pieces) + ")", params


# -- Keyword search ----------------------------------------------------------------------

@dataclass
class KeywordResult:
    """Ranked (id, score) pairs; ``matched`` is "all" (every word) or "some" (fallback)."""

    hits: list[tuple[str, float]] = field(default_factory=list)
    matched: str = "all"
    ignored_terms: list[str] = field(default_factory=list)


def keyword_search(memories, parsed: ParsedQuery, *, limit: int,
                   partial: bool = False) -> KeywordResult:
    """Rank ``memories`` (a single-table queryset) by the parsed query.

    Memories matching every clause come first, ranked by how well they match; when none
    match every clause and the query uses no operator (a natural-language question), the
    memories matching some of the words are ranked instead, each word counting by its
    rarity in the mind (BM25's idf) and its weight (key and tags above content).
    ``partial`` ranks partial matches of a plain question after the full ones even when
    full ones exist (hybrid search's keyword side).
    """
    terms = parsed.terms
    live = _live_terms(terms + list(parsed.excluded))
    term_live = dict(zip(terms, live[:len(terms)], strict=True))
    ignored = [term.text for term, alive in term_live.items() if not alive]
    clauses = [[term for term in clause if term_live[term]] for clause in parsed.clauses]
    clauses = [clause for clause in clauses if clause]
    excluded = [term for term, alive in zip(parsed.excluded, live[len(terms):], strict=True)
                if alive]
    result = KeywordResult(ignored_terms=ignored)
    if not clauses:
        return result
    unique_terms = list(dict.fromkeys(term for clause in clauses for term in clause))
    index = {term: position for position, term in enumerate(unique_terms)}
    where, where_params = _where(memories)

    term_columns, params = [], []
    for position, term in enumerate(unique_terms):
        sql, term_params = term.tsquery_sql()
        term_columns.append(f"{sql} AS t{position}")
        params += term_params
    any_sql = " || ".join(f"q.t{position}" for position in range(len(unique_terms)))
    flags = ", ".join(f"memories_memory.search_vector @@ q.t{position} AS m{position}, "
                      f"ts_rank('{RANK_WEIGHTS}', memories_memory.search_vector, q.t{position}, "
                      f"{RANK_NORMALIZATION}) AS r{position}"
                      for position in range(len(unique_terms)))
    all_sql = " AND ".join("(" + " OR ".join(f"c.m{index[term]}" for term in clause) + ")"
                           for clause in clauses)
    exclusion, exclusion_params = "", []
    if excluded:
        excluded_sql, exclusion_params = _or_sql(excluded)
        exclusion = f"AND NOT (memories_memory.search_vector @@ {excluded_sql})"
    document_counts = ", ".join(f"count(*) FILTER (WHERE c.m{position}) OVER () AS d{position}"
                                for position in range(len(unique_terms)))
    # BM25-style: idf from how many memories of this (filtered) set hold the word; the
    # per-word ts_rank (weights, frequency) saturates like BM25's tf part.
    score = " + ".join(
        f"CASE WHEN s.m{p} THEN ln(1 + (s.n - s.d{p} + 0.5) / (s.d{p} + 0.5)) "
        f"* (s.r{p} / (s.r{p} + {TERM_SATURATION})) ELSE 0 END"
        for p in range(len(unique_terms)))
    # Explicit syntax is strict; a plain list of words falls back to partial matches.
    if partial and not parsed.explicit:
        only_all = ""
    elif parsed.explicit or len(clauses) == 1:
        only_all = "WHERE s.all_match"
    else:
        only_all = "WHERE s.all_match OR NOT s.any_all"
    # Only fragments built here are formatted in; the user's text travels as parameters.
    sql = f"""
        WITH q AS (SELECT {', '.join(term_columns)}),
        c AS (
            SELECT memories_memory.id, {flags}
            FROM memories_memory, q
            WHERE {where} AND memories_memory.search_vector @@ ({any_sql}) {exclusion}
        ),
        s AS (
            SELECT c.*, ({all_sql}) AS all_match,
                   bool_or({all_sql}) OVER () AS any_all,
                   (SELECT count(*) FROM memories_memory WHERE {where})::float AS n,
                   {document_counts}
            FROM c
        )
        SELECT s.id, ({score}) AS score, s.all_match, s.any_all FROM s
        {only_all}
        ORDER BY s.all_match DESC, score DESC, s.id
        LIMIT %s
    """  # noqa: S608
    all_params = params + where_params + exclusion_params + where_params + [limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, all_params)
        rows = cursor.fetchall()
    result.hits = [(row[0], float(row[1])) for row in rows]
    result.matched = "all" if not rows or rows[0][3] else "some"
    return result


# -- Semantic search ---------------------------------------------------------------------

@contextmanager
def iterative_scan(ef_search: int = SEMANTIC_EF_SEARCH):
    """A transaction in which HNSW scans iterate (pgvector ≥ 0.8) until enough rows pass
    the query's filters, instead of stopping after ``ef_search`` candidates."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
        yield


def semantic_search(memories, vector: list[float], *, limit: int,
                    threshold: float | None = None) -> list[tuple[str, float]]:
    """The ``limit`` memories nearest to ``vector`` as (id, cosine similarity), best first.

    HNSW with iterative index scans: the index keeps scanning until ``limit`` rows pass
    the mind's filter, so a mind holding 1% of the table still gets its k nearest.
    ``relaxed_order`` may return rows slightly out of order; they are re-sorted here.
    Only vectors of the configured model count.
    """
    from memories.embeddings import model_name

    nearest = memories.filter(embedding_model=model_name()).nearest(vector, limit)
    with iterative_scan(max(SEMANTIC_EF_SEARCH, limit)):
        rows = list(nearest.values_list("id", "distance"))
    hits = sorted(((memory_id, 1.0 - float(distance)) for memory_id, distance in rows),
                  key=lambda hit: (-hit[1], hit[0]))
    if threshold is not None:
        hits = [hit for hit in hits if hit[1] >= threshold]
    return hits


# -- Hybrid ------------------------------------------------------------------------------

def similarities(memories, ids, vector: list[float]) -> dict[str, float]:
    """Cosine similarity of ``vector`` to each memory of ``ids`` among ``memories`` that
    holds a vector of the configured model; one query, whatever the number of ids."""
    from memories.embeddings import model_name

    if not ids:
        return {}
    rows = (memories.filter(id__in=list(ids), embedding_model=model_name(),
                            embedding__isnull=False)
            .annotate(distance=CosineDistance("embedding", vector))
            .values_list("id", "distance"))
    return {memory_id: 1.0 - float(distance) for memory_id, distance in rows}


def fuse(keyword: list[tuple[str, float]], semantic: list[tuple[str, float]], *,
         keyword_weight: float = HYBRID_KEYWORD_WEIGHT,
         similarity: dict[str, float] | None = None) -> list[tuple[str, float]]:
    """Fuse two ranked lists by normalised scores, weighted; a memory found by both
    sides adds both parts.

    Keyword scores are divided by the best one. Semantic scores (cosine similarities)
    are min-max normalised over every candidate that has one: the semantic list, plus
    the keyword candidates whose similarity ``similarity`` gives (hybrid_search passes
    it for the keyword-only ones, so the semantic side scores the whole union instead
    of counting 0 for a memory it merely ranked below its cut). A memory without a
    score on a side gets 0 for that side."""
    fused: dict[str, float] = {}
    if keyword:
        best = max(score for _id, score in keyword) or 1.0
        for memory_id, score in keyword:
            fused[memory_id] = keyword_weight * score / best
    cosines = dict(similarity or {})
    cosines.update(semantic)
    if cosines:
        best = max(cosines.values())
        worst = min(cosines.values())
        spread = (best - worst) or 1.0
        for memory_id, score in cosines.items():
            fused[memory_id] = (fused.get(memory_id, 0.0)
                                + (1 - keyword_weight) * (score - worst) / spread)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def words_query(text: str) -> ParsedQuery | None:
    """The plain words of ``text`` as a natural-language query (operators ignored)."""
    words = _WORD.findall(text)[:MAX_QUERY_TERMS]
    if not words:
        return None
    return ParsedQuery(tuple((Term("word", word),) for word in words))


def hybrid_search(memories, text: str, *, limit: int, parsed: ParsedQuery | None = None
                  ) -> KeywordResult:
    """Keyword and semantic candidates, HYBRID_CANDIDATES a side, fused (see ``fuse``);
    both sides score the union. The keyword side ranks partial matches of a plain
    question too: the fusion decides, not the AND rule. ``parsed`` defaults to the plain
    words of ``text``; the result's ``matched`` and ``ignored_terms`` describe the
    keyword side, its ``hits`` the fused ranking."""
    from memories.embeddings import embed_query

    parsed = parsed or words_query(text)
    depth = max(limit, HYBRID_CANDIDATES)
    result = (keyword_search(memories, parsed, limit=depth, partial=True) if parsed
              else KeywordResult())
    vector = embed_query(text)
    semantic = semantic_search(memories, vector, limit=depth)
    # The keyword-only candidates get their similarity from one more query.
    found = {memory_id for memory_id, _score in semantic}
    similarity = similarities(memories, [memory_id for memory_id, _score in result.hits
                                         if memory_id not in found], vector)
    result.hits = fuse(result.hits, semantic, similarity=similarity)[:limit]
    return result


# -- Presentation ------------------------------------------------------------------------

def highlight(snippet: str | None) -> str | None:
    """HTML-escape a ts_headline snippet, then turn its markers into <mark> tags."""
    if snippet is None:
        return None
    return (html.escape(snippet).replace(_MARK_START, "<mark>")
            .replace(_MARK_END, "</mark>"))


def load_hits(hits: list[tuple[str, float]], text: str) -> list[tuple[Memory, float, str | None]]:
    """The memories of ``hits`` in order, each with its score and an HTML-safe snippet
    highlighting the words of ``text`` (credentials get no snippet)."""
    if not hits:
        return []
    words = words_query(text)
    if words:
        highlight_sql, params = _or_sql(words.terms)
    else:
        highlight_sql, params = "''::tsquery", []
    # Marker characters are removed from the content first, so stored text can never
    # produce a <mark> tag of its own.
    snippet_sql = (f"CASE WHEN category = %s THEN NULL ELSE ts_headline('english'::regconfig, "
                   f"translate(content, %s, ''), {highlight_sql}, %s) END")
    from django.db.models.expressions import RawSQL

    memories = (Memory.objects.filter(id__in=[memory_id for memory_id, _ in hits])
                .without_vectors()
                .annotate(snippet=RawSQL(snippet_sql, [Category.CREDENTIALS,  # noqa: S611
                                                      _MARK_START + _MARK_END, *params,
                                                      _HEADLINE_OPTIONS])))
    by_id = {memory.id: memory for memory in memories}
    return [(by_id[memory_id], score, highlight(by_id[memory_id].snippet))
            for memory_id, score in hits if memory_id in by_id]


def rank_for_recall(*, mind: Mind, memories, query: str) -> Iterator[Memory]:
    """Recall ordered by hybrid relevance to ``query``: the relevant memories first (best
    first), then the rest in recall order. Streamed: memory holds the FUSION_CANDIDATES
    ranked memories and one chunk of the rest."""
    memories = memories.without_vectors()
    if not memories.exists():
        return iter(())
    # The search runs now, in the view, so a failure is a clean error response rather
    # than a stream broken off.
    try:
        ranked = [memory_id for memory_id, _score in
                  hybrid_search(memories, query, limit=FUSION_CANDIDATES).hits]
    except QuerySyntaxError:
        ranked = []
    found = memories.in_bulk(ranked)
    return itertools.chain((found[memory_id] for memory_id in ranked if memory_id in found),
                           memories.exclude(pk__in=ranked).recall_order().iterator(
                               chunk_size=500))


# -- Related -----------------------------------------------------------------------------

@dataclass
class RelatedHit:
    memory: Memory
    score: float
    shared_tags: list[str]
    similarity: float | None


def related_memories(memory: Memory, candidates, *, limit: int) -> list[RelatedHit]:
    """Memories related to ``memory`` among ``candidates`` (which exclude it): sharing
    tags, or nearest in meaning. Score = half the share of its tags they carry plus half
    the cosine similarity; each memory appears once."""
    from memories.embeddings import model_name

    tags = set(memory.tags)
    shared: dict[str, list[str]] = {}
    if tags:
        for memory_id, their_tags in (candidates.filter(tags__overlap=list(tags))
                                      .values_list("id", "tags")[:500]):
            shared[memory_id] = [tag for tag in their_tags if tag in tags]
    similarity: dict[str, float] = {}
    if memory.embedding is not None and memory.embedding_model == model_name():
        similarity = dict(semantic_search(candidates, list(memory.embedding),
                                          limit=max(limit, FUSION_CANDIDATES)))
    scores = {memory_id: 0.5 * len(shared.get(memory_id, ())) / max(len(tags), 1)
              + 0.5 * max(similarity.get(memory_id, 0.0), 0.0)
              for memory_id in shared.keys() | similarity.keys()}
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    by_id = (candidates.filter(id__in=[memory_id for memory_id, _ in best]).without_vectors()
             .in_bulk())
    return [RelatedHit(by_id[memory_id], score, shared.get(memory_id, []),
                       similarity.get(memory_id))
            for memory_id, score in best if memory_id in by_id]
