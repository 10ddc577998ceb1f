"""Semantic and hybrid search, related memories and recall ranking, with the real model;
and the k nearest of a small mind through HNSW iterative index scans."""

import numpy as np
import pytest
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.test.utils import CaptureQueriesContext
from pgvector.django import CosineDistance

from memories import search
from memories.embeddings import embed_batch, get_model, model_name
from memories.models import Memory, MemoryRow
from memories.quotas import recount
from memories.recall import RecallItem, recall_memories
from memories.search import hybrid_search, semantic_search
from memories.services import memory_store
from minds.services import mind_create
from tests.conftest import plan_nodes, statements_sent


@pytest.fixture(scope="module")
def model():
    """The real model, loaded once (it stays loaded for the rest of the session)."""
    return get_model()


CORPUS = [
    ("preference", "editor_choice", "Michael edits code in Neovim with a dark theme", ["tools"]),
    ("preference", "coffee", "Prefers a double espresso every morning before work", ["food"]),
    ("fact", "pet", "Has a golden retriever called Bruno who loves the lake", ["family"]),
    ("project", "deploy_target", "Production runs on a Docker Swarm cluster at Hetzner",
     ["infra"]),
    ("skill", "languages", "Speaks German natively and fluent Spanish", []),
    ("note", "holiday", "Going hiking in the Dolomites in August", ["travel", "family"]),
    ("credentials", "api_token", "sk-live-do-not-leak", ["infra"]),
]


@pytest.fixture
def corpus(model, remember, alice_mind):
    stored = {key: remember(category=category, key=key, content=content, tags=tags)
              for category, key, content, tags in CORPUS}
    embed_batch(limit=100, mind=alice_mind)
    return stored


def keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [hit["key"] for hit in response.json()["results"]]


def test_semantic_search_finds_memories_by_meaning(agent, corpus):
    response = agent.get("/memory/semantic-search", {"q": "What does the user drink?"})
    assert keys(response)[0] == "coffee"
    scores = [hit["score"] for hit in response.json()["results"]]
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1


def test_the_threshold_drops_weak_matches(agent, corpus):
    everything = keys(agent.get("/memory/semantic-search", {"q": "dog", "limit": 50}))
    strong = agent.get("/memory/semantic-search", {"q": "dog", "threshold": 0.3}).json()
    assert len(everything) == len(CORPUS) - 1  # credentials are never embedded
    assert [hit["key"] for hit in strong["results"]] == ["pet"]
    assert all(hit["score"] >= 0.3 for hit in strong["results"])


def test_semantic_search_filters_by_category_and_tag(agent, corpus):
    assert keys(agent.get("/memory/semantic-search",
                          {"q": "coffee", "category": "fact"})) == ["pet"]
    assert set(keys(agent.get("/memory/semantic-search",
                              {"q": "dog", "tag": "family"}))) == {"pet", "holiday"}


def test_semantic_mode_on_the_search_route_matches_the_semantic_route(agent, corpus):
    question = {"q": "which text editor", "limit": 3}
    assert (keys(agent.get("/memory/search", {**question, "mode": "semantic"}))
            == keys(agent.get("/memory/semantic-search", question)))


def test_hybrid_finds_what_only_one_side_finds(agent, corpus):
    # "dog" shares no word with the pet memory; "Bruno" has no meaning to the model.
    assert keys(agent.get("/memory/search", {"q": "dog", "mode": "hybrid"}))[0] == "pet"
    assert keys(agent.get("/memory/search", {"q": "Bruno", "mode": "hybrid"}))[0] == "pet"
    assert keys(agent.get("/memory/search", {"q": "Bruno", "mode": "keyword"})) == ["pet"]


def test_hybrid_mode_reads_malformed_syntax_as_plain_words(agent, corpus):
    # Keyword mode answers 400 (test_search.py); hybrid mode is never refused.
    assert keys(agent.get("/memory/search", {"q": 'dog "', "mode": "hybrid"}))[0] == "pet"


def test_credentials_never_appear_in_semantic_results(agent, corpus):
    response = agent.get("/memory/semantic-search", {"q": "secret api token key", "limit": 50})
    assert "api_token" not in keys(response)
    assert "sk-live" not in response.content.decode()


def test_unembedded_memories_are_not_found_by_meaning_until_embedded(agent, model, remember,
                                                                      alice_mind):
    # Without the write-time vector (the encoder failed: tests/memories/
    # test_read_your_writes.py), a memory waits for the worker to be found by meaning.
    boat = remember(key="boat", content="Owns a small sailing boat on Lake Constance")
    Memory.objects.filter(pk=boat.pk).update(embedding=None, embedding_model="")
    assert keys(agent.get("/memory/semantic-search", {"q": "sailing"})) == []
    embed_batch(limit=10, mind=alice_mind)
    assert keys(agent.get("/memory/semantic-search", {"q": "sailing"})) == ["boat"]


def test_recall_with_a_question_puts_the_relevant_memory_first(agent, corpus):
    response = agent.get("/memory/recall", {"q": "what pet does the user have", "format": "json"})
    assert response.status_code == 200
    ordered = [memory["key"] for memory in response.json()["memories"]]
    assert ordered[0] == "pet"
    assert set(ordered) == {key for _c, key, _t, _g in CORPUS}


def test_recall_ranked_by_a_question_respects_the_budget(agent, corpus):
    response = agent.get("/memory/recall", {"q": "hiking holiday", "budget": 60})
    assert response.status_code == 200
    assert int(response["X-Recall-Tokens"]) <= 60
    assert "Dolomites" in response.content.decode()


def test_related_memories_share_tags_or_meaning_and_exclude_the_memory(agent, corpus):
    holiday = corpus["holiday"]
    body = agent.get(f"/memory/{holiday.id}/related").json()
    found = [hit["key"] for hit in body["results"]]
    assert "holiday" not in found
    assert len(found) == len(set(found))
    pet = body["results"][found.index("pet")]
    assert pet["shared_tags"] == ["family"] and pet["similarity"] is not None
    assert found[0] == "pet"
    assert agent.get(f"/memory/related/{holiday.id}").json() == body


def test_related_memories_prefer_the_same_path(agent, model, remember, alice_mind):
    """Two memories as close to the one asked about: the one on its path comes first,
    by the same-path bonus and nothing else."""
    asked = remember(category="fact", key="deploy", path="projects/a",
                     content="Deploys go to Hetzner through GitHub Actions", tags=["infra"])
    # The same key, tags and content in two categories: the model reads the same text.
    elsewhere = remember(category="project", key="deploy_plan", path="projects/b",
                         content="Deploys go to Hetzner via GitHub Actions", tags=["infra"])
    here = remember(category="note", key="deploy_plan", path="projects/a",
                    content="Deploys go to Hetzner via GitHub Actions", tags=["infra"])
    embed_batch(limit=100, mind=alice_mind)
    results = agent.get(f"/memory/{asked.id}/related").json()["results"]
    assert [hit["id"] for hit in results] == [here.id, elsewhere.id]
    first, second = results
    assert first["similarity"] == pytest.approx(second["similarity"], abs=1e-5)
    assert first["score"] - second["score"] == pytest.approx(0.1, abs=1e-5)


def test_related_of_another_minds_memory_is_404(bob_agent, corpus):
    assert bob_agent.get(f"/memory/{corpus['pet'].id}/related").status_code == 404


def test_by_tag_lists_memories_carrying_the_tag(agent, corpus):
    body = agent.get("/memory/by-tag", {"tag": "Family"}).json()
    assert body["tag"] == "family" and body["count"] == 2
    assert {hit["key"] for hit in body["results"]} == {"pet", "holiday"}
    infra = agent.get("/memory/by-tag", {"tag": "infra"}).json()["results"]
    credentials = next(hit for hit in infra if hit["key"] == "api_token")
    assert "sk-live" not in credentials["content"]
    assert agent.get("/memory/by-tag").status_code == 400


# -- The k nearest of a small mind -----------------------------------------------------------

def _unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, 384)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# Committed, then truncated after the test: rolled back, the 3,030 rows would stay in the
# HNSW index as dead entries until a vacuum, for every later test of the worker to scan.
BIG_TABLE = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small_mind_in_a_big_table(alice, alice_mind):
    """alice's mind holds 30 of 3,030 embedded memories (1%)."""
    crowd = mind_create(owner=alice, name="crowd")
    vectors = _unit_vectors(3030, seed=7)
    rows = []
    for index, vector in enumerate(vectors):
        mind = alice_mind if index % 101 == 0 else crowd
        rows.append(Memory(mind=mind, category="note", key=f"n{index}", content=f"note {index}",
                           source="user", confidence=1.0, embedding=vector.tolist(),
                           embedding_model=model_name(), embedding_pending=False))
    Memory.objects.bulk_create(rows, batch_size=500)
    recount()  # the minds' sizes, as the services would have counted them
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    return {row.id: vectors[index] for index, row in enumerate(rows)
            if row.mind_id == alice_mind.id}


def _exact_nearest(mine: dict, query: np.ndarray, k: int) -> list[str]:
    ids = list(mine)
    similarity = np.array([mine[memory_id] for memory_id in ids]) @ query
    return [ids[position] for position in np.argsort(-similarity)[:k]]


@BIG_TABLE
def test_a_mind_holding_one_percent_of_the_table_gets_its_k_nearest(alice_mind,
                                                                    small_mind_in_a_big_table):
    query = _unit_vectors(1, seed=99)[0]
    hits = semantic_search(Memory.objects.for_mind(alice_mind).current(), query.tolist(),
                           limit=10)
    assert [memory_id for memory_id, _ in hits] == _exact_nearest(small_mind_in_a_big_table,
                                                                  query, 10)


def _alice_by_graph(alice_mind, query: np.ndarray, k: int = 10) -> list[str]:
    """The k nearest of alice's memories by the HNSW graph, as the connection's settings
    let it scan (filtered by an expression no B-tree answers, with sequential scans off:
    the planner must take the graph)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN SELECT id FROM memories_memory WHERE mind_id || '' = %s "
                       "ORDER BY embedding <=> %s::vector LIMIT %s",
                       [alice_mind.id, str(query.tolist()), k])
        assert "memory_embedding_hnsw" in "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("SELECT id FROM memories_memory WHERE mind_id || '' = %s "
                       "ORDER BY embedding <=> %s::vector LIMIT %s",
                       [alice_mind.id, str(query.tolist()), k])
        return [row[0] for row in cursor.fetchall()]


def _graph_side(memories, query: list[float], limit: int = 10, *, settings=()) -> dict:
    """How the statement semantic_search sends for ``memories`` ran its graph side (the
    CTE ``indexed``): replayed under EXPLAIN ANALYZE after ``settings`` (SET LOCAL
    statements), its loops and the rows it brought."""
    with statements_sent() as sent:
        semantic_search(memories, query, limit=limit)
    sql, params = sent[-1]
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(f"SET LOCAL {setting}")
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0][0]["Plan"]
    node = next(node for node in plan["Plans"] if node.get("Subplan Name") == "CTE indexed")
    return {"loops": node["Actual Loops"], "rows": node["Actual Rows"]}


@BIG_TABLE
def test_the_hnsw_index_scan_iterates_until_k_rows_pass_the_filter(
        alice_mind, small_mind_in_a_big_table, monkeypatch):
    # Without iteration the graph stops after ef_search candidates: 40 candidates of a
    # table where alice holds 1% carry well under 10 of hers. semantic_search's statement
    # turns iteration on itself, before its graph side reads the index: replayed after
    # the settings are turned off, its graph side still brings 10 rows, the exact ones.
    monkeypatch.setattr(search, "HNSW_VISIT_COST", 0)  # no set is small enough to measure
    query = _unit_vectors(1, seed=5)[0]
    off = ("enable_seqscan = off", "hnsw.iterative_scan = off", "hnsw.ef_search = 40")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = off")
        cursor.execute("SET LOCAL hnsw.ef_search = 40")
        assert len(_alice_by_graph(alice_mind, query)) < 10
    memories = (Memory.objects.alias(owner=Concat(F("mind_id"), Value("")))
                .filter(owner=alice_mind.id))
    assert _graph_side(memories, query.tolist(), settings=off) == {"loops": 1, "rows": 10}
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in off:
            cursor.execute(f"SET LOCAL {setting}")
        hits = semantic_search(memories, query.tolist(), limit=10)
    # Ten of alice's, best first; the graph is approximate (other tests' dead entries in
    # the index change its walk), so most, not always all, of the exact ten.
    found = [memory_id for memory_id, _ in hits]
    assert len(found) == 10 and set(found) <= small_mind_in_a_big_table.keys()
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert len(set(found) & set(_exact_nearest(small_mind_in_a_big_table, query, 10))) >= 8


@BIG_TABLE
def test_when_the_index_scan_gives_up_every_row_of_the_mind_is_measured(
        alice_mind, small_mind_in_a_big_table, monkeypatch):
    # An iterative scan stops after hnsw.max_scan_tuples (a graph crowded with other
    # minds' entries, or with dead ones between vacuums): semantic search then measures
    # the rows passing the filter instead of answering with fewer than k. Here the scan
    # is made to give up early: the narrowest first pass semantic_search asks for (its
    # limit) and no room to iterate. Giving up, pgvector still returns the candidates its
    # first pass looked at and set aside: with ef_search 40 and a random question, 5-9 of
    # alice's over 40 builds of the graph (so 10 now and then); with ef_search 10 and a
    # question pointing away from alice's memories, 0-3.
    monkeypatch.setattr(search, "SEMANTIC_EF_SEARCH", 10)
    monkeypatch.setattr(search, "HNSW_VISIT_COST", 0)  # no set is small enough to measure
    away = -np.array(list(small_mind_in_a_big_table.values())).sum(axis=0)
    query = (away / np.linalg.norm(away)).astype(np.float32)
    memories = (Memory.objects.alias(owner=Concat(F("mind_id"), Value("")))
                .filter(owner=alice_mind.id))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL hnsw.max_scan_tuples = 1")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SET LOCAL hnsw.ef_search = 10")
        given_up = _alice_by_graph(alice_mind, query)
        hits = semantic_search(memories, query.tolist(), limit=10)
    assert len(given_up) < 10
    assert [memory_id for memory_id, _ in hits] == _exact_nearest(small_mind_in_a_big_table,
                                                                  query, 10)


@BIG_TABLE
def test_a_mind_small_beside_the_index_is_measured_without_the_graph(
        alice_mind, small_mind_in_a_big_table):
    # 30 memories among 3,030: measuring 30 vectors costs less than walking the graph
    # past ~3,000 of other minds' entries to find 10 of alice's (exact_scan_bound_sql).
    query = _unit_vectors(1, seed=21)[0]
    memories = Memory.objects.for_mind(alice_mind).current()
    assert _graph_side(memories, query.tolist())["loops"] == 0
    hits = semantic_search(memories, query.tolist(), limit=10)
    assert [memory_id for memory_id, _ in hits] == _exact_nearest(small_mind_in_a_big_table,
                                                                  query, 10)


@BIG_TABLE
def test_a_mind_holding_most_of_the_index_is_searched_through_the_graph(
        alice_mind, small_mind_in_a_big_table):
    # The other mind holds 3,000 of the 3,030 entries, more than exact_scan_bound_sql.
    crowd = Memory.objects.exclude(mind=alice_mind).values_list("mind", flat=True).first()
    memories = Memory.objects.filter(mind=crowd).current()
    assert _graph_side(memories, _unit_vectors(1, seed=22)[0].tolist())["loops"] == 1


def test_a_memory_keeps_its_vector_in_its_row(alice_mind, remember):
    # A row of about 2 kB (the vector alone is 1,540 bytes) would have its vector moved to
    # the TOAST table, and every vector measured would cost several more buffer reads
    # (migration 0016).
    memory = remember(category="note", key="long",
                      content=" ".join(f"word{number}" for number in range(120)))
    Memory.objects.filter(pk=memory.pk).update(
        embedding=_unit_vectors(1, seed=3)[0].tolist(), embedding_model=model_name(),
        embedding_pending=False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(m.*), pg_column_toast_chunk_id(m.embedding) "
                       "FROM memories_memory m WHERE id = %s", [memory.pk])
        row_bytes, vector_chunk = cursor.fetchone()
    assert row_bytes > 2032  # past PostgreSQL's TOAST threshold
    assert vector_chunk is None


def test_memories_stored_through_the_service_reach_semantic_search(model, alice, alice_mind):
    memory_store(mind=alice_mind, actor=alice, category="fact", key="sky",
                 content="The sky is blue on a clear day")
    embed_batch(limit=5, mind=alice_mind)
    hits = semantic_search(Memory.objects.for_mind(alice_mind), get_model().encode(
        "colour of the sky", normalize_embeddings=True).tolist(), limit=1)
    assert len(hits) == 1 and hits[0][1] > 0.5


def test_hybrid_search_reads_the_union_s_similarities_in_one_query(alice_mind, corpus):
    # Memories not embedded yet are keyword-only candidates: their similarities are
    # looked up (and found missing) in one query, however many there are.
    memories = Memory.objects.for_mind(alice_mind).current().unexpired()

    def store(numbers):
        for number in numbers:
            memory_store(mind=alice_mind, actor=alice_mind.owners().get(), category="note",
                         key=f"bruno_{number}", content=f"Bruno walked {number} times")

    store(range(1))
    with CaptureQueriesContext(connection) as few:
        hybrid_search(memories, "Bruno", limit=5)
    store(range(1, 40))
    with CaptureQueriesContext(connection) as many:
        hits = hybrid_search(memories, "Bruno", limit=5).hits
    assert len(many.captured_queries) == len(few.captured_queries)
    assert len(hits) == 5


@pytest.fixture
def theirs(alice_mind, bob_mind, corpus):
    """alice's mind grown by 3,000 memories, analyzed (the planner sees a large mind), and
    a memory of bob's mind, to ask for by id from alice's."""
    Memory.objects.bulk_create(
        [Memory(mind=alice_mind, category="note", key=f"a{n}", content=f"Garden bed {n}",
                source="agent", confidence=0.7) for n in range(3000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    return memory_store(mind=bob_mind, actor=bob_mind.owners().get(), category="note",
                        key="bruno", content="Bruno is our dog too").memory


def test_the_union_s_rows_are_read_by_id_from_the_searched_memories_only(
        alice_mind, corpus, theirs):
    # The candidates' similarities, windows and texts: read by primary key (given the
    # mind's filters the planner walked the mind's whole recall index to test each id),
    # only from the memories searched, with the ORM's cosine distance.
    memories = Memory.objects.for_mind(alice_mind).current().unexpired()
    vector = search.query_vector("a dog by the lake")
    wanted = {corpus["pet"].id, corpus["api_token"].id, theirs.id, "mem_missing"}
    with statements_sent() as sent:
        rows = {row[0]: row for row in search._union_rows(memories, wanted, vector)}
    assert set(rows) == {corpus["pet"].id, corpus["api_token"].id}
    expected = Memory.objects.annotate(d=CosineDistance("embedding", vector)).get(
        pk=corpus["pet"].id).d
    assert rows[corpus["pet"].id][1] == pytest.approx(expected, abs=1e-12)
    assert rows[corpus["api_token"].id][1] is None  # credentials: never embedded
    reads = [node for node in plan_nodes(*sent[-1])
             if node.get("Relation Name") == "memories_memory"]
    assert len(reads) == 1 and "wanted.id" in reads[0].get("Index Cond", ""), reads


def test_recall_reads_its_ranked_memories_by_id_from_the_recalled_memories_only(
        alice_mind, corpus, theirs):
    # The memories a question ranks: the rows recall shows (as values_list reads them),
    # read by primary key, and only from the memories recalled.
    memories = recall_memories(alice_mind)
    for row in (RecallItem, MemoryRow):
        with statements_sent() as sent:
            ranked, _rest = search.rank_for_recall(mind=alice_mind, memories=memories,
                                                   query="what pet does the user have", row=row)
        read = sent[-1]  # the last statement: the rest is only a query, not read yet
        assert "wanted(id)" in read[0]
        assert ranked[0].key == "pet" and theirs.id not in {memory.id for memory in ranked}
        shown = {values[0]: row(*values[1:])
                 for values in memories.values_list("id", *row._fields)}
        assert ranked == [shown[memory.id] for memory in ranked]
        assert all(type(memory) is row for memory in ranked)
    tail, params = search._by_id(memories, [corpus["pet"].id, theirs.id, "mem_missing"])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT memories_memory.id {tail}", params)
        assert [found for (found,) in cursor.fetchall()] == [corpus["pet"].id]
    reads = [node for node in plan_nodes(*read) if node.get("Relation Name") == "memories_memory"]
    assert len(reads) == 1 and "wanted.id" in reads[0].get("Index Cond", ""), reads


def test_the_vector_literal_names_each_float32_exactly(db, model):
    # Nine significant digits name every float32: PostgreSQL reads back the very values
    # of the question's vector and of a stored embedding (numpy float32), as from the
    # ORM's text form, whatever the magnitude.
    rng = np.random.default_rng(7)
    question = search.query_vector("a dog by the lake")
    stored = rng.standard_normal(384).astype(np.float32) * np.float32(1e-3)
    extremes = np.array([1e-38, -3.4e38, 1.17549435e-38, 0.1, -0.0, 1 - 2**-24],
                        dtype=np.float32)
    with connection.cursor() as cursor:
        for vector in (question, list(stored), list(extremes)):
            cursor.execute("SELECT %s::vector::real[]", [search._vector_literal(vector)])
            read = np.array(cursor.fetchone()[0], dtype=np.float32)
            assert np.array_equal(read, np.array(vector, dtype=np.float32))
            cursor.execute("SELECT %s::vector = %s::vector",
                           [search._vector_literal(vector),
                            "[" + ",".join(map(repr, map(float, vector))) + "]"])
            assert cursor.fetchone()[0] is True


@pytest.mark.django_db(transaction=True)
def test_hybrid_search_runs_its_semantic_side_beside_the_keyword_side(alice_mind, corpus):
    """Outside a transaction the semantic side (the question's embedding and its query)
    runs on a connection of its own while the keyword side runs on this one
    (synapse.db.beside); the answer is the one the two sides give one after the other."""
    memories = Memory.objects.for_mind(alice_mind).current().unexpired()
    for question in ("Bruno", "What does the user drink?", "cluster hetzner",
                     "hiking holiday family"):
        with CaptureQueriesContext(connection) as here:
            parallel = hybrid_search(memories, question, limit=5)
        with transaction.atomic(), CaptureQueriesContext(connection) as alone:
            sequential = hybrid_search(memories, question, limit=5)
        assert parallel.hits and parallel.hits == sequential.hits, question
        assert parallel.parts == sequential.parts
        semantic_side = ["hnsw.iterative_scan" in query["sql"]
                         for query in here.captured_queries]
        assert not any(semantic_side), "the semantic side ran on this connection"
        assert any("hnsw.iterative_scan" in query["sql"] for query in alone.captured_queries)
