"""Search: keyword ranking, semantic and hybrid search of parsed queries (docs/search.md)."""

import html
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

from memories import ranking
from memories.embeddings import embed_query, model_name, query_encoder_name
from memories.models import EMBEDDING_INDEX, Category, Memory, MemoryRow, QuotaCounter
from memories.query import (
    DEFAULT_CONFIG,
    ParsedQuery,
    QuerySyntaxError,
    Term,
    words_query,
)
from minds.models import Mind
from synapse.db import beside

# ts_rank weights for {D, C, B, A}: key and tags (A) above English content (B) above the
# unstemmed copy of the content (D).
RANK_WEIGHTS = "{0.05, 0.1, 0.4, 1.0}"
# ts_rank normalisation (1: divide by 1 + log of the document length) and the BM25-like
# saturation of one word's rank: rank / (rank + TERM_SATURATION · norm), where norm is
# BM25's length normalisation 1 − b + b · length / mean length (b = LENGTH_NORMALIZATION;
# the length is the document's number of distinct lexemes, the mean over the memories
# ranked): a long memory no longer wins on its length alone.
RANK_NORMALIZATION = 0
TERM_SATURATION = 0.1
LENGTH_NORMALIZATION = 1.0
# Hybrid search ranks an episode with its context (its neighbours' words: memories.context)
# only while the context holds at most this many lexemes: the neighbours of a short turn
# (a conversation's: median 47, p90 67 on LoCoMo), not those of long messages (a project
# chat's: p10 173 on BEAM), whose words drown the episode's own.
CONTEXT_MAX_LEXEMES = 200
# How many candidates each side hands to the fusion (and recall ranks by relevance).
FUSION_CANDIDATES = 50
# hybrid_search's candidates a side; both sides then score the union of the two lists
# (measured on LoCoMo: bench/results/retrieval.md).
HYBRID_CANDIDATES = 100
SEMANTIC_EF_SEARCH = 100
# What an HNSW iterative scan spends per entry it visits, over what an exact scan spends
# measuring one memory: 3.5 to 9.3 measured at 1,000,000 memories (bench/results/scale.md:
# 3.5 with the whole graph in shared_buffers); exact_scan_bound_sql.
HNSW_VISIT_COST = 5
_MARK_START, _MARK_END = "\ue000", "\ue001"
_HEADLINE_OPTIONS = (f"StartSel={_MARK_START}, StopSel={_MARK_END}, MaxWords=30, MinWords=12, "
                     "MaxFragments=2, FragmentDelimiter=\" … \"")


# How many query embeddings each process keeps (least recently used dropped first): 1.5 kB
# each as float32, so 1.5 MB at most.
QUERY_EMBEDDING_CACHE_SIZE = 1024


# -- Query embeddings --------------------------------------------------------------------

class QueryEmbeddingCache:
    """The last ``size`` query embeddings of this process, keyed by model and exact text:
    an agent asking the same question again (or a hybrid search after a semantic one)
    skips the model. Thread-safe; vectors are kept as float32, the model's own precision,
    so a cached vector equals a fresh one."""

    def __init__(self, size: int = QUERY_EMBEDDING_CACHE_SIZE):
        self.size = size
        self._vectors: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def get(self, text: str) -> list[float]:
        key = (model_name(), query_encoder_name(), text)
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
                return vector.tolist()
        fresh = embed_query(text)  # outside the lock: the model is the slow part
        with self._lock:
            self._vectors[key] = np.asarray(fresh, dtype=np.float32)
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return fresh


query_embeddings = QueryEmbeddingCache()


def query_vector(text: str) -> list[float]:
    """The embedding of a search question, from this process's cache when it was asked
    before (QueryEmbeddingCache)."""
    return query_embeddings.get(text)


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


def _live_terms(terms: list[Term], using: str = DEFAULT_DB_ALIAS) -> list[bool]:
    """Whether each term leaves any lexeme (stop words and punctuation do not)."""
    if not terms:
        return []
    pieces, params = [], []
    for term in terms:
        sql, term_params = term.tsquery_sql()
        pieces.append(f"numnode({sql}) > 0")
        params += term_params
    with connections[using].cursor() as cursor:
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
    """Ranked (id, score) pairs; ``matched`` is "all" when the first hit holds every word,
    "some" when none does; ``all_words`` the hits that hold every word (the rest hold some,
    ranked after them)."""

    hits: list[tuple[str, float]] = field(default_factory=list)
    matched: str = "all"
    all_words: set[str] = field(default_factory=set)
    ignored_terms: list[str] = field(default_factory=list)
    # Hybrid: each hit's parts (memories.ranking), for explain=true.
    parts: dict[str, dict[str, float]] = field(default_factory=dict)


def keyword_search(memories, parsed: ParsedQuery, *, limit: int,
                   partial: bool = False, context: bool = False) -> KeywordResult:
    """Rank ``memories`` (a single-table queryset) by the parsed query.

    Memories matching every clause come first, ranked by how well they match (BM25: each
    word by its rarity in the mind, its weight — key and tags above content — and its
    frequency, normalised by the memory's length); when the query uses no operator (a
    natural-language question), the page is filled up to ``limit`` with the memories
    matching some of the words, ranked after them (``all_words`` of the result tells the
    two apart). ``partial`` reads every memory holding a word in one pass (hybrid search's
    keyword side) instead of the full matches first. ``context`` ranks an episode with its
    context too (memories.context: its neighbours' words and its date, weight C) while the
    context holds at most CONTEXT_MAX_LEXEMES; plain keyword search keeps to a memory's own
    words. The SQL runs where ``memories`` reads (a read replica, in a view that allows
    one: synapse.db_router).
    """
    terms = parsed.terms
    live = _live_terms(terms + list(parsed.excluded), memories.db)
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

    term_columns, params, term_sqls, term_params = [], [], [], []
    for position, term in enumerate(unique_terms):
        sql, own_params = term.tsquery_sql()
        term_columns.append(f"{sql} AS t{position}")
        term_sqls.append(sql)
        term_params.append(own_params)
        params += own_params
    positions = range(len(unique_terms))
    # Spelled out (not read from q) so the planner sees the query and reads the rows
    # holding any word through the GIN index that holds the mind and the words together.
    any_sql = " || ".join(term_sqls)
    found = f"memories_memory.search_vector @@ ({any_sql})"
    document, joined = "h.sv", ""
    if context:
        # Two documents; the rank reads both as one, concatenated once per matching row,
        # not once per term (OFFSET 0 keeps the planner from inlining it). A memory
        # without a context (all but episodes) reads its own document as it is: building
        # a copy joined to nothing cost about 1 µs a row.
        found = f"({found} OR memories_memory.context_vector @@ ({any_sql}))"
        params_found = params * 2
        # An episode whose context is long (CONTEXT_MAX_LEXEMES) keeps to its own words.
        joined = ("CROSS JOIN LATERAL (SELECT CASE WHEN h.cv IS NULL OR length(h.cv) > "
                  f"{int(CONTEXT_MAX_LEXEMES)} THEN h.sv ELSE h.sv || h.cv END AS document "
                  "OFFSET 0) d")
        document = "d.document"
    else:
        params_found = list(params)
    flags = ", ".join(f"{document} @@ q.t{position} AS m{position}" for position in positions)
    all_sql = " AND ".join("(" + " OR ".join(f"m.m{index[term]}" for term in clause) + ")"
                           for clause in clauses)
    exclusion, exclusion_params = "", []
    if excluded:
        excluded_sql, exclusion_params = _or_sql(excluded)
        exclusion = f"AND NOT (memories_memory.search_vector @@ {excluded_sql})"
    document_counts = ", ".join(f"count(*) FILTER (WHERE u.m{position}) AS d{position}"
                                for position in positions)
    # BM25-style: idf from how many memories of this (filtered) set hold the word; the
    # per-word ts_rank (weights, frequency) saturates like BM25's tf part.
    score = " + ".join(
        f"CASE WHEN c.m{p} THEN ln(1 + (n.n - n.d{p} + 0.5) / (n.d{p} + 0.5)) "
        f"* (r.r{p} / (r.r{p} + r.k)) ELSE 0 END"
        for p in positions)
    ranks = ", ".join([f"ts_rank('{RANK_WEIGHTS}', c.document, q.t{position}, "
                       f"{RANK_NORMALIZATION}) AS r{position}" for position in positions]
                      + [f"{TERM_SATURATION} * (1 - {LENGTH_NORMALIZATION} + "
                         f"{LENGTH_NORMALIZATION} * length(c.document) / n.mean_length) AS k"])
    # BM25's mean length (the ranks' k): over the memories holding every word when they
    # fill the page (so both shapes of the statement below rank such a page alike),
    # otherwise over the memories holding any word (u, read anyway to fill the page).
    total = f"(SELECT count(*) FROM memories_memory WHERE {where})::float AS n"  # noqa: S608

    def branch(source: str, counts: str, condition: str) -> str:
        """The page of ``source``'s rows meeting ``condition``, scored with ``counts``."""
        return f"""
            SELECT c.id, ({score}) AS score, c.all_match
            FROM {source} c CROSS JOIN {counts} n CROSS JOIN q
            CROSS JOIN LATERAL (SELECT {ranks}) r
            WHERE {condition}
            ORDER BY score DESC, c.id
            LIMIT %s"""  # noqa: S608

    # The memories holding any word (u), read through the mind's GIN index; the first pass
    # only tests which words each holds (counts for the idf, which rows match every
    # clause). The idf's N, the size of the filtered set, is counted apart, without reading
    # any document. Only fragments built here are formatted in; the user's text travels
    # as parameters.
    union = f"""
        u AS MATERIALIZED (
            SELECT m.*, coalesce({all_sql}, FALSE) AS all_match FROM (
                SELECT h.id, {document} AS document, {flags}
                FROM (
                    SELECT memories_memory.id, memories_memory.search_vector AS sv,
                           memories_memory.context_vector AS cv
                    FROM memories_memory
                    WHERE ({where}) AND {found} {exclusion}
                    OFFSET 0
                ) h CROSS JOIN q {joined}
            ) m
            WHERE {" OR ".join(f"m.m{position}" for position in positions)}
        ),
        un AS MATERIALIZED (
            SELECT count(*) FILTER (WHERE u.all_match) AS full_count,
                   {document_counts}, {total},
                   greatest(CASE WHEN count(*) FILTER (WHERE u.all_match) >= %s
                                 THEN avg(length(u.document)) FILTER (WHERE u.all_match)
                                 ELSE avg(length(u.document)) END, 1)::float AS mean_length
            FROM u
        )"""  # noqa: S608
    union_params = where_params + params_found + exclusion_params + where_params + [limit]
    if partial or context:
        # Hybrid search's keyword side: partial matches ranked after the full ones when
        # fewer than ``limit`` hold every clause (explicit syntax: never). ts_rank, the
        # costly part, runs only for the rows that can make the page: the full matches, and
        # the partial ones only when they may be shown (the second branch's one-time filter
        # skips them otherwise).
        if parsed.explicit or (not partial and len(clauses) == 1):
            partial_when, partial_params = "FALSE", []
        elif partial:
            partial_when, partial_params = "n.full_count < %s", [limit]
        else:
            partial_when, partial_params = "n.full_count = 0", []
        sql = f"""
            WITH q AS (SELECT {', '.join(term_columns)}), {union}
            SELECT ranked.id, ranked.score, ranked.all_match FROM (
                ({branch("u", "un", "c.all_match")})
                UNION ALL
                ({branch("u", "un", f"NOT c.all_match AND {partial_when}")})
            ) ranked
            ORDER BY ranked.all_match DESC, ranked.score DESC, ranked.id
            LIMIT %s
        """  # noqa: S608
        all_params = (params + union_params + [limit] + partial_params + [limit, limit])
    else:
        # Plain keyword search shows partial matches only when no memory matches every
        # clause: those that do (f) are read alone, through the index's intersection of
        # the clauses, and each word's count is taken apart (e), straight from the index
        # and the rows' visibility and filters, without reading a document; e holds a row
        # only when f does, so an empty f costs the intersection alone. One clause: the
        # rows read are the ones holding its words. The memories holding some words (u)
        # are read only when f is empty and the question may fall back (the second
        # branch's one-time filter).
        every, every_params = [], []
        for clause in clauses:
            clause_sql, clause_params = _or_sql(clause)
            every.append(clause_sql)
            every_params += clause_params
        counts, count_params = [], []
        for position in positions:
            if len(clauses) == 1:
                counts.append(f"(SELECT count(*) FILTER (WHERE f.m{position}) FROM f) "  # noqa: S608
                              f"AS d{position}")
                continue
            counts.append(f"(SELECT count(*) FROM memories_memory WHERE ({where}) AND "  # noqa: S608
                          f"memories_memory.search_vector @@ {term_sqls[position]} "
                          f"{exclusion}) AS d{position}")
            count_params += where_params + term_params[position] + exclusion_params
        # A plain question (no operator, several words) is filled up to ``limit`` with the
        # memories holding some of its words, ranked after those holding all of them: read
        # (u) only when fewer than ``limit`` hold every word (the one-time filter).
        fallback = not parsed.explicit and len(clauses) > 1
        fill = "NOT c.all_match AND (SELECT count(*) FROM f) < %s"
        sql = f"""
            WITH q AS (SELECT {', '.join(term_columns)}),
            f AS MATERIALIZED (
                SELECT h.id, h.sv AS document, {flags}, TRUE AS all_match
                FROM (
                    SELECT memories_memory.id, memories_memory.search_vector AS sv
                    FROM memories_memory
                    WHERE ({where})
                          AND memories_memory.search_vector @@ ({' && '.join(every)})
                          {exclusion}
                    OFFSET 0
                ) h CROSS JOIN q
            ),
            e AS MATERIALIZED (
                SELECT {', '.join(counts)}, {total},
                       (SELECT greatest(avg(length(f.document)), 1)::float FROM f)
                       AS mean_length
                FROM (SELECT FROM f LIMIT 1) any_match
            ){f", {union}" if fallback else ""}
            SELECT ranked.id, ranked.score, ranked.all_match FROM (
                ({branch("f", "e", "TRUE")})
                {f'UNION ALL ({branch("u", "un", fill)})' if fallback else ""}
            ) ranked
            ORDER BY ranked.all_match DESC, ranked.score DESC, ranked.id
            LIMIT %s
        """  # noqa: S608
        all_params = (params + where_params + every_params + exclusion_params + count_params
                      + where_params + (union_params if fallback else []) + [limit]
                      + ([limit, limit] if fallback else []) + [limit])
    with connections[memories.db].cursor() as cursor:
        cursor.execute(sql, all_params)
        rows = cursor.fetchall()
    result.hits = [(row[0], float(row[1])) for row in rows]
    result.all_words = {row[0] for row in rows if row[2]}
    result.matched = "all" if not rows or rows[0][2] else "some"
    return result


# -- Semantic search ---------------------------------------------------------------------

def exact_scan_bound_sql(k: int) -> tuple[str, list]:
    """Up to how many memories measuring each one costs less than an HNSW scan for the
    ``k`` nearest (docs/search.md, "Semantic search in a small mind"), as SQL over the
    index's size (PostgreSQL's estimate, from its last VACUUM or ANALYZE; 0 while it has
    none). An iterative scan visits about k·entries/n entries before k of a set of n pass
    its filter, each HNSW_VISIT_COST times as dear as measuring one memory outright, so
    the exact scan is the cheaper one while n² < HNSW_VISIT_COST·k·entries."""
    return ("floor(sqrt(%s * %s * (SELECT greatest(reltuples, 0) FROM pg_class "
            "WHERE oid = to_regclass(%s))))", [HNSW_VISIT_COST, k, EMBEDDING_INDEX])


def semantic_search(memories, vector: list[float], *, limit: int,
                    threshold: float | None = None) -> list[tuple[str, float]]:
    """The ``limit`` memories nearest to ``vector`` as (id, cosine similarity), best first.

    ``memories`` is one mind's (Memory.objects.for_mind; the statement reads the size of
    the mind of its first row). A mind small beside the whole index (up to
    exact_scan_bound_sql memories, as its quota counters count them: every row, the trash
    included; sixteen rows to read whatever its size) is measured memory by memory:
    exact, and in a mind holding 1% of a large table several times faster than the
    graph. Otherwise HNSW with iterative index scans (pgvector ≥ 0.8): the index keeps
    scanning until ``limit`` rows pass the filter, instead of stopping after
    ``hnsw.ef_search`` candidates. ``relaxed_order`` may return rows slightly out of
    order; they are re-sorted here. An iterative scan also gives up
    (``hnsw.max_scan_tuples``, or a graph crowded with other minds' or dead entries): when
    it brings fewer than ``limit`` rows, the same statement measures every row passing
    the filters instead. Only vectors of the configured model count.

    One statement, in no transaction of its own: it sets the scan's settings itself
    (local to its transaction: the statement's own, or the caller's), before its graph
    side reads the index (a one-time filter on that side needs them first; pgvector reads
    them when the scan fetches its first row). The vector is sent once. The SQL runs
    where ``memories`` reads (a read replica, in a view that allows one:
    synapse.db_router).
    """
    where, where_params = _where(memories.filter(embedding__isnull=False,
                                                 embedding_model=model_name()))
    k = max(SEMANTIC_EF_SEARCH, limit)
    bound_sql, bound_params = exact_scan_bound_sql(k)
    distance_sql = "memories_memory.embedding <=> (SELECT v FROM q)"
    nearest = (f"SELECT memories_memory.id, {distance_sql} AS distance "  # noqa: S608
               f"FROM memories_memory WHERE {where}")
    sql = f"""
        WITH scan AS MATERIALIZED (
            SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative,
                   set_config('hnsw.ef_search', %s, true) AS ef_search,
                   {bound_sql} AS bound
        ),
        q AS MATERIALIZED (SELECT %s::vector AS v),
        size AS MATERIALIZED (
            SELECT coalesce(sum(memories), 0) AS n FROM {QuotaCounter._meta.db_table}
            WHERE mind_id = (SELECT memories_memory.mind_id FROM memories_memory
                             WHERE {where} LIMIT 1)
        ),
        indexed AS MATERIALIZED (
            {nearest} AND (SELECT iterative IS NOT NULL FROM scan)
            ORDER BY {distance_sql} LIMIT %s
        )
        SELECT * FROM indexed
         WHERE (SELECT n FROM size) > (SELECT bound FROM scan)
           AND (SELECT count(*) FROM indexed) >= %s
        UNION ALL
        SELECT * FROM ({nearest} ORDER BY ({distance_sql}) + 0.0 LIMIT %s) exact
         WHERE (SELECT n FROM size) <= (SELECT bound FROM scan)
            OR (SELECT count(*) FROM indexed) < %s
    """  # noqa: S608
    params = [str(k), *bound_params, _vector_literal(vector), *where_params,
              *where_params, limit, limit, *where_params, limit, limit]
    with connections[memories.db].cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    hits = sorted(((memory_id, 1.0 - float(distance)) for memory_id, distance in rows),
                  key=lambda hit: (-hit[1], hit[0]))
    if threshold is not None:
        hits = [hit for hit in hits if hit[1] >= threshold]
    return hits


def _vector_literal(vector) -> str:
    """pgvector's text form of ``vector``: nine significant digits a value, which name
    each float32 exactly (pgvector stores float32; its input reads each value as one),
    in less than half the time of ``repr``'s shortest double (about 80 against 175 µs
    for 384 values)."""
    return "[" + ",".join(map("%.9g".__mod__, vector)) + "]"


# -- Hybrid ------------------------------------------------------------------------------

def hybrid_search(memories, text: str, *, limit: int, parsed: ParsedQuery | None = None,
                  config: str = DEFAULT_CONFIG, tuning: ranking.Tuning | None = None,
                  context: bool = True) -> KeywordResult:
    """Keyword and semantic candidates, HYBRID_CANDIDATES a side, ranked by
    memories.ranking: fused, a share of the neighbouring turns' scores added, the best
    reranked. The keyword side ranks partial matches of a plain question too (the fusion
    decides, not the AND rule) and, with ``context``, an episode's context with it.
    ``parsed`` defaults to the plain words of ``text`` (stemmed with the mind's text-search
    ``config``); the result's ``matched`` and
    ``ignored_terms`` describe the keyword side, its ``hits`` the ranking and ``parts``
    each hit's share of it."""
    candidates, result = hybrid_candidates(memories, text, parsed=parsed, config=config,
                                           depth=max(limit, HYBRID_CANDIDATES),
                                           context=context)
    hits = ranking.rank(candidates, ranking.Question.of(text), tuning or ranking.Tuning())
    hits = hits[:limit]
    result.hits = [(hit.id, hit.score) for hit in hits]
    result.parts = {hit.id: hit.parts for hit in hits}
    return result


def hybrid_candidates(memories, text: str, *, parsed: ParsedQuery | None = None,
                      config: str = DEFAULT_CONFIG, depth: int = HYBRID_CANDIDATES,
                      context: bool = True) -> tuple[ranking.Candidates, KeywordResult]:
    """Everything memories.ranking needs for ``text``, in four queries whatever the
    number of candidates: the keyword side, the query's embedding and the semantic side,
    then the union's similarities, context windows, texts and moments in one. The
    semantic side (the question's embedding, then its query) runs beside the keyword side,
    on a connection of its own (synapse.db.beside), where the request is in no
    transaction."""
    parsed = parsed or words_query(text, config)
    using = memories.db  # chosen here (a replica, or the primary for one's own writes)
    memories = memories.using(using)
    semantic_side = beside(_semantic_side, memories, text, depth, using=using)
    result = (keyword_search(memories, parsed, limit=depth, partial=True, context=context)
              if parsed else KeywordResult())
    semantic, vector = semantic_side.result()
    candidates = ranking.Candidates(keyword=result.hits, semantic=semantic)
    ids = {memory_id for memory_id, _score in semantic} | {
        memory_id for memory_id, _score in result.hits}
    if ids:
        rows = _union_rows(memories, ids, vector)
        for memory_id, distance, window, category, content, moment in rows:
            if distance is not None:
                candidates.cosine[memory_id] = 1.0 - float(distance)
            if window:
                candidates.windows[memory_id] = window
            if category != Category.CREDENTIALS:
                candidates.texts[memory_id] = content
            if moment is not None:
                candidates.moments[memory_id] = moment
    return candidates, result


def _union_rows(memories, ids: set[str], vector) -> list[tuple]:
    """Each candidate's cosine distance to ``vector`` (None without a current embedding),
    context window, category, content and moment: the candidates of ``memories`` named by
    ``ids``, read by their primary key (:func:`_by_id`)."""
    tail, params = _by_id(memories, ids)
    sql = f"""
        SELECT memories_memory.id,
               CASE WHEN memories_memory.embedding IS NOT NULL
                         AND memories_memory.embedding_model = %s
                    THEN memories_memory.embedding <=> %s::vector END,
               memories_memory.context_ids, memories_memory.category,
               memories_memory.content, memories_memory.occurred_at
        {tail}
    """  # noqa: S608
    with connections[memories.db].cursor() as cursor:
        cursor.execute(sql, [model_name(), _vector_literal(vector), *params])
        return cursor.fetchall()


def _by_id(memories, ids) -> tuple[str, list]:
    """The FROM and WHERE of a statement reading the memories of ``memories`` (a
    single-table queryset) named by ``ids``, by primary key, with their parameters. Left
    to the ORM (``id__in`` with a mind's filters), the planner walked one of the mind's
    whole index entries to test each id: about 4 ms for 200 ids in a mind of 10,000."""
    where, params = _where(memories)
    return (f"FROM unnest(%s::text[]) AS wanted(id) "  # noqa: S608
            f"JOIN memories_memory ON memories_memory.id = wanted.id WHERE {where}",
            [sorted(ids), *params])


def _semantic_side(memories, text: str, depth: int) -> tuple[list[tuple[str, float]], list]:
    vector = query_vector(text)
    return semantic_search(memories, vector, limit=depth), vector


# -- Presentation ------------------------------------------------------------------------

def highlight(snippet: str | None) -> str | None:
    """HTML-escape a ts_headline snippet, then turn its markers into <mark> tags."""
    if snippet is None:
        return None
    return (html.escape(snippet).replace(_MARK_START, "<mark>")
            .replace(_MARK_END, "</mark>"))


class Hit(MemoryRow):
    """A memory found: its shown fields (MemoryRow), with room for what the answer adds
    (score, snippet, explain: memories.api.serializers.search.search_hits)."""


def _columns(row) -> str:
    """The columns of a row tuple's fields (MemoryRow, memories.recall.RecallItem: each
    named as its column), for a hand-written SELECT."""
    return ", ".join(f'memories_memory."{name}"' for name in row._fields)


_HIT_COLUMNS = _columns(MemoryRow)


def load_hits(mind_id: str, hits: list[tuple[str, float]], text: str,
              config: str = DEFAULT_CONFIG) -> list[tuple[Hit, float, str | None]]:
    """The memories of ``hits`` in order, each with its score and an HTML-safe snippet
    highlighting the words of ``text`` (credentials get no snippet), in the mind's
    text-search ``config``: one hand-written statement, read as tuples. Only memories of
    the mind ``mind_id`` are read, whatever ids ``hits`` names."""
    if not hits:
        return []
    words = words_query(text, config)
    if words:
        highlight_sql, params = _or_sql(words.terms)
    else:
        highlight_sql, params = "''::tsquery", []
    # Marker characters are removed from the content first, so stored text can never
    # produce a <mark> tag of its own.
    sql = (f"SELECT {_HIT_COLUMNS}, CASE WHEN category = %s THEN NULL "  # noqa: S608
           f"ELSE ts_headline(%s::regconfig, translate(content, %s, ''), {highlight_sql}, %s) "
           f"END FROM memories_memory WHERE mind_id = %s AND id = ANY(%s)")
    with connections[Memory.objects.db].cursor() as cursor:
        cursor.execute(sql, [Category.CREDENTIALS, config, _MARK_START + _MARK_END, *params,
                             _HEADLINE_OPTIONS, mind_id, [memory_id for memory_id, _ in hits]])
        by_id = {row[0]: row for row in cursor.fetchall()}
    return [(Hit(*by_id[memory_id][:-1]), score, highlight(by_id[memory_id][-1]))
            for memory_id, score in hits if memory_id in by_id]


def rank_for_recall(*, mind: Mind, memories, query: str, row) -> tuple[list, QuerySet]:
    """Recall ordered by hybrid relevance to ``query``: the relevant memories as ``row``
    tuples (memories.recall.RecallItem, or MemoryRow for JSON; best first, at most
    FUSION_CANDIDATES), and the query of the rest in recall order, to read as the same
    rows, whole or streamed (memories.recall.read_whole, recall_items). The ranked are read
    by primary key (:func:`_by_id`)."""
    memories = memories.without_vectors()
    if not memories.exists():
        return [], memories.none()
    # The search runs now, in the view, so a failure is a clean error response rather
    # than a stream broken off.
    try:
        ranked = [memory_id for memory_id, _score in
                  hybrid_search(memories, query, limit=FUSION_CANDIDATES,
                                config=mind.search_config).hits]
    except QuerySyntaxError:
        ranked = []
    found = {}
    if ranked:
        tail, params = _by_id(memories, ranked)
        with connections[memories.db].cursor() as cursor:
            cursor.execute(f"SELECT {_columns(row)} {tail}", params)
            found = {item.id: item for item in map(row._make, cursor.fetchall())}
    return ([found[memory_id] for memory_id in ranked if memory_id in found],
            memories.exclude(pk__in=ranked).recall_order())


# -- Related -----------------------------------------------------------------------------

# Added to the score of a related memory on the same path as the one asked about: enough to
# put a same-project memory ahead of an equally close one elsewhere, not ahead of a far
# closer one (scores run 0–1).
SAME_PATH_BONUS = 0.1


@dataclass
class RelatedHit:
    memory: Memory
    score: float
    shared_tags: list[str]
    similarity: float | None


def related_memories(memory: Memory, candidates, *, limit: int) -> list[RelatedHit]:
    """Memories related to ``memory`` among ``candidates`` (which exclude it): sharing
    tags, or nearest in meaning. Score = half the share of its tags they carry plus half
    the cosine similarity, plus SAME_PATH_BONUS for a memory on the same path (related
    memories prefer their own project); each memory appears once."""
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
    found = shared.keys() | similarity.keys()
    same_path = set(candidates.filter(id__in=found, path=memory.path)
                    .values_list("id", flat=True)) if found else set()
    scores = {memory_id: 0.5 * len(shared.get(memory_id, ())) / max(len(tags), 1)
              + 0.5 * max(similarity.get(memory_id, 0.0), 0.0)
              + (SAME_PATH_BONUS if memory_id in same_path else 0.0)
              for memory_id in found}
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    by_id = (candidates.filter(id__in=[memory_id for memory_id, _ in best]).without_vectors()
             .in_bulk())
    return [RelatedHit(by_id[memory_id], score, shared.get(memory_id, []),
                       similarity.get(memory_id))
            for memory_id, score in best if memory_id in by_id]
