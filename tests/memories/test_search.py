"""Full-text search: GET /memory/search in keyword mode, and a property test that throws
thousands of generated queries at a live server (the parser: test_query.py)."""

import os
import random

import httpx
import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.models import Memory
from memories.query import QuerySyntaxError, parse_query, words_query
from memories.search import keyword_search
from tests.conftest import plan_nodes, planner_without, statements_sent

# -- The corpus ----------------------------------------------------------------------------

CORPUS = [
    ("preference", "editor_choice", "Michael edits code in Neovim with a dark theme",
     ["tools"]),
    ("fact", "deploy_target", "Production deploys go to a Docker Swarm cluster on Hetzner",
     ["docker", "infra"]),
    ("fact", "kubernetes_migration", "We plan to migrate from Docker Swarm to Kubernetes next "
     "year", ["kubernetes"]),
    ("project", "docker_images", "Container images are built with Docker Buildx and pushed "
     "to GHCR", ["ci"]),
    ("note", "coffee", "Prefers espresso over drip coffee in the morning", []),
    ("fact", "bereitstellung", "Die Bereitstellung läuft über Docker auf dem Server", ["de"]),
    ("fact", "hauptstadt", "Москва — столица России", ["ru"]),
    ("credentials", "docker_registry_password", "hunter2-registry-secret", ["docker"]),
]


@pytest.fixture
def corpus(remember):
    return {key: remember(category=category, key=key, content=content, tags=tags)
            for category, key, content, tags in CORPUS}


def search(client, **params):
    response = client.get("/memory/search", params)
    assert response.status_code == 200, response.content
    return response.json()


def keys(body) -> list[str]:
    return [hit["key"] for hit in body["results"]]


def test_memories_holding_every_word_come_first_and_tagged_ones_rank_first(agent, corpus):
    body = search(agent, q="docker swarm")
    assert keys(body)[:2] == ["deploy_target", "kubernetes_migration"]
    assert body["matched"] == "all"
    assert body["results"][0]["score"] > body["results"][1]["score"]
    # The page is filled with the memories holding some of the words, after them.
    assert [hit["matched_all"] for hit in body["results"]] == [True, True] + [False] * (
        len(body["results"]) - 2)
    assert {"docker_images", "bereitstellung"} <= set(keys(body)[2:])
    assert "docker_registry_password" in keys(body)  # by its key and tags, redacted


def test_a_question_whose_evidence_holds_some_words_finds_it_after_the_full_matches(
        agent, remember):
    """Before, partial matches came only when no memory held every word: a question whose
    AND set held one memory returned one result, and the evidence (holding most of the
    words) was never shown."""
    remember(key="a", content="The deploy runs on the Swarm cluster in Falkenstein")
    remember(key="b", content="Swarm cluster nodes: Ubuntu, deploy on Fridays, Falkenstein")
    remember(key="c", content="Falkenstein cluster: the Swarm managers")
    body = search(agent, q="which swarm cluster deploy runs in falkenstein", limit=5)
    assert keys(body)[0] == "a" and body["results"][0]["matched_all"] is True
    assert set(keys(body)) == {"a", "b", "c"}
    assert [hit["matched_all"] for hit in body["results"]][1:] == [False, False]


def test_a_long_memory_does_not_win_on_its_length(agent, remember):
    """BM25's length normalisation: the word twice in a short memory about it outranks it
    three times in a long one (without it, the long one won on its count)."""
    filler = " ".join(f"word{number} topic{number % 7}" for number in range(400))
    remember(key="long", content=f"Kubernetes kubernetes kubernetes. {filler}")
    remember(key="short", content="Kubernetes kubernetes upgrade plan")
    assert keys(search(agent, q="kubernetes"))[:2] == ["short", "long"]


def test_an_exact_phrase_matches_only_those_words_in_a_row(agent, corpus):
    assert keys(search(agent, q='"swarm cluster"')) == ["deploy_target"]
    assert keys(search(agent, q='"cluster swarm"')) == []


def test_a_prefix_matches_longer_words(agent, corpus):
    assert keys(search(agent, q="kube*")) == ["kubernetes_migration"]
    assert set(keys(search(agent, q="espres* OR neov*"))) == {"coffee", "editor_choice"}


def test_or_matches_either_word(agent, corpus):
    assert set(keys(search(agent, q="espresso OR neovim"))) == {"coffee", "editor_choice"}


def test_an_excluded_word_removes_memories_holding_it(agent, corpus):
    found = keys(search(agent, q="docker -kubernetes -registry"))
    assert set(found) == {"deploy_target", "docker_images", "bereitstellung"}


def test_key_and_tags_weigh_more_than_content(agent, remember):
    remember(key="morning", content="I drink espresso daily, espresso is great")
    remember(key="espresso_machine", content="Bought a new machine last week")
    assert keys(search(agent, q="espresso")) == ["espresso_machine", "morning"]


def test_english_words_are_stemmed(agent, corpus):
    assert keys(search(agent, q="deploying")) == ["deploy_target"]
    assert keys(search(agent, q="migrations")) == ["kubernetes_migration"]


def test_content_in_other_languages_is_searchable(agent, corpus):
    assert keys(search(agent, q="Bereitstellung")) == ["bereitstellung"]
    assert keys(search(agent, q="Москва")) == ["hauptstadt"]


def test_a_question_without_a_memory_holding_every_word_ranks_partial_matches(agent, corpus):
    body = search(agent, q="Which container images do we push to the cloud?")
    assert body["matched"] == "some"
    assert keys(body)[0] == "docker_images"


def test_explicit_syntax_never_falls_back_to_partial_matches(agent, corpus):
    body = search(agent, q='"container images" cloud')
    assert body["matched"] == "none"
    assert body["results"] == []


def test_only_stop_words_give_an_empty_result_naming_the_ignored_words(agent, corpus):
    body = search(agent, q="the and of")
    assert body == {"query": "the and of", "mode": "keyword", "matched": "none",
                    "ignored_terms": ["the", "and", "of"], "count": 0, "results": []}


def test_the_snippet_highlights_matches_and_is_html_safe(agent, remember):
    remember(key="markup", content="Alerts fire when load < 5 & swap > 2 on docker hosts "
             "<script>alert(1)</script> \ue000not a mark\ue001")
    snippet = search(agent, q="docker")["results"][0]["snippet"]
    assert "<mark>docker</mark>" in snippet
    assert "&lt; 5 &amp; swap &gt; 2" in snippet
    assert snippet.count("<mark>") == snippet.count("</mark>") == 1
    assert "<script>" not in snippet


def test_credentials_are_found_by_key_but_never_show_their_content(agent, corpus):
    response = agent.get("/memory/search", {"q": "registry"})
    body = response.json()
    assert keys(body) == ["docker_registry_password"]
    assert body["results"][0]["snippet"] is None
    assert "hunter2" not in response.content.decode()
    assert keys(search(agent, q="hunter2")) == []


def test_tag_category_and_limit_filter_the_results(agent, corpus):
    assert keys(search(agent, q="docker", tag="INFRA")) == ["deploy_target"]
    assert keys(search(agent, q="docker", category="project")) == ["docker_images"]
    assert len(search(agent, q="docker", limit=2)["results"]) == 2


def test_expired_memories_are_left_out_unless_asked_for(agent, remember):
    remember(key="old_plan", content="The zeppelin launch", expires_at="2001-01-01T00:00:00Z")
    assert keys(search(agent, q="zeppelin")) == []
    assert keys(search(agent, q="zeppelin", include_expired="true")) == ["old_plan"]


def test_trashed_memories_are_not_found(agent, corpus):
    agent.delete(f"/memory/{corpus['coffee'].id}")
    assert keys(search(agent, q="espresso")) == []


def test_another_minds_memories_are_never_found(bob_agent, corpus):
    assert keys(search(bob_agent, q="docker")) == []


def test_the_hits_rows_are_read_from_the_searching_mind_only(alice_mind, bob_mind, corpus):
    # load_hits reads the rows of the ids a search found; an id of another mind among
    # them (none reaches it from a mind-scoped search) is still never read.
    from memories.search import load_hits

    hits = [(corpus["coffee"].id, 0.9), (corpus["deploy_target"].id, 0.5)]
    assert [(hit.key, score) for hit, score, _snippet in load_hits(
        alice_mind.pk, hits, "coffee")] == [("coffee", 0.9), ("deploy_target", 0.5)]
    assert load_hits(bob_mind.pk, hits, "coffee") == []


@pytest.mark.parametrize(("params", "field"), [
    ({"q": '"unclosed'}, "q"),
    ({"q": "x" * 1001}, "q"),
    ({"q": "docker", "mode": "fuzzy"}, "mode"),
    ({"q": "docker", "limit": "0"}, "limit"),
    ({"q": "docker", "sort": "new"}, "sort"),
    ({}, "q"),
])
def test_bad_parameters_are_a_400_naming_the_field(agent, corpus, params, field):
    response = agent.get("/memory/search", params)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_nul_byte_in_the_query_is_a_400(agent, corpus):
    response = agent.get("/memory/search", {"q": "a\x00b"})
    assert response.status_code == 400
    assert "NUL" in response.json()["error"]["message"]


def test_a_thousand_character_question_is_answered(agent, corpus):
    query = ("docker " * 143)[:1000]
    assert keys(search(agent, q=query)) == keys(search(agent, q="docker")) != []


# -- Natural questions: a spaced dash is punctuation; hybrid and recall never refuse -----

QUESTION = "Which did she adopt first - the cat or the dog?"


@pytest.fixture
def pets(corpus, remember):
    remember(category="note", key="adoption",
             content="She adopted the cat in March, then the dog in June")
    return corpus


def recall_keys(client, **params):
    response = client.get("/memory/recall", {**params, "format": "json"})
    assert response.status_code == 200, response.content
    return [memory["key"] for memory in response.json()["memories"]]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_question_with_a_spaced_dash_is_answered(agent, pets, mode):
    body = search(agent, q=QUESTION, mode=mode)
    assert keys(body)[0] == "adoption"
    assert "-" not in body["ignored_terms"]


def test_recall_ranks_by_a_question_with_a_spaced_dash(agent, pets):
    assert recall_keys(agent, q=QUESTION)[0] == "adoption"


def keyword_found(body) -> list[str]:
    """The hits the keyword side found (hybrid mode, explain=true: the semantic side does
    not apply exclusions)."""
    return [hit["key"] for hit in body["results"]
            if hit.get("explain", {"keyword": 1})["keyword"] > 0]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("dash", ["-", "--", "—", "–"])
def test_a_lone_dash_is_ignored_and_an_attached_one_still_excludes(agent, corpus, mode, dash):
    body = search(agent, q=f"docker {dash} swarm {dash} -kubernetes {dash}", mode=mode,
                  explain="true")
    assert keys(body)[0] == "deploy_target"
    assert keyword_found(body) == ["deploy_target"]
    assert body["ignored_terms"] == []


def test_a_word_with_a_dash_inside_is_matched_as_before(agent, remember):
    # PostgreSQL reads well-known as the compound and its parts: only the memory holding
    # the compound matches every part of it.
    remember(key="famous", content="A well-known trick")
    remember(key="known_well", content="The trick is known well")
    remember(key="mail", content="Send it by e-mail")
    assert keys(search(agent, q="well-known")) == ["famous"]
    assert keys(search(agent, q="e-mail")) == ["mail"]
    assert keys(search(agent, q="well-known trick"))[0] == "famous"
    assert keys(search(agent, q="trick-")) == keys(search(agent, q="trick")) != []


@pytest.mark.parametrize("query", [
    'what did "she say', "(the cat or the dog", "OR docker", "docker OR", "docker AND AND OR",
    "*", "-docker", '""', "😀", "the of and", "?!", "x" * 1000,
    " ".join(f"word{n}" for n in range(100))[:1000],
])
def test_hybrid_and_recall_answer_what_keyword_search_refuses(agent, corpus, query):
    assert isinstance(search(agent, q=query, mode="hybrid")["results"], list)
    assert recall_keys(agent, q=query)


@pytest.mark.parametrize("query", ["", "   ", "a\x00b", "x" * 1001])
def test_only_the_parameter_limits_are_a_400_in_hybrid_mode_and_recall(agent, corpus, query):
    assert agent.get("/memory/search", {"q": query, "mode": "hybrid"}).status_code == 400
    assert agent.get("/memory/recall", {"q": query}).status_code == 400


def test_hybrid_mode_reads_syntax_that_parses_and_the_plain_words_of_the_rest(agent, corpus):
    excluded = search(agent, q="docker -kubernetes", mode="hybrid", explain="true")
    assert "kubernetes_migration" not in keyword_found(excluded)
    # An unbalanced quote: read as its plain words, swarm and docker.
    unparsed = search(agent, q='swarm "docker', mode="hybrid", explain="true")
    assert set(keyword_found(unparsed)[:2]) == {"deploy_target", "kubernetes_migration"}


def test_keyword_mode_still_refuses_malformed_syntax(agent, corpus):
    response = agent.get("/memory/search", {"q": QUESTION + ' "unclosed'})
    assert response.status_code == 400
    assert "Unbalanced quote" in response.json()["error"]["message"]


def test_matching_queryset_uses_the_same_syntax(alice_mind, corpus):
    found = Memory.objects.for_mind(alice_mind).matching("docker -kubernetes")
    assert set(found.values_list("key", flat=True)) == {
        "deploy_target", "docker_images", "bereitstellung", "docker_registry_password"}
    with pytest.raises(QuerySyntaxError):
        Memory.objects.matching('"unclosed')


def test_the_mind_and_the_words_are_read_from_one_index(alice_mind, bob_mind, corpus):
    # btree_gin puts the mind in the GIN index of the search documents (migration 0015):
    # one scan reads the mind's posting list with the words', so rows of other minds
    # holding the words are never read (before, the words' entries over the whole table,
    # then the mind's B-tree). Asked of the planner with the B-trees out of the way
    # (dropped in a transaction rolled back after): which plan a small test table favours
    # is not the question, whether the GIN index can serve the mind is.
    Memory.objects.bulk_create(
        [Memory(mind=bob_mind, category="note", key=f"b{n}", content=f"Docker swarm node {n}",
                source="agent", confidence=0.7) for n in range(300)]
        + [Memory(mind=alice_mind, category="note", key=f"a{n}", content=f"Garden bed {n}",
                  source="agent", confidence=0.7) for n in range(3000)])
    memories = Memory.objects.for_mind(alice_mind).current()
    with statements_sent() as sent:
        found = keyword_search(memories, words_query("kubernetes"), limit=5)
    assert [hit for hit, _ in found.hits] == [corpus["kubernetes_migration"].id]
    sql, params = sent[-1]
    with (planner_without("enable_seqscan"), transaction.atomic(),
          connection.cursor() as cursor):
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = "
                       "'memories_memory'::regclass AND indexrelid NOT IN (SELECT conindid "
                       "FROM pg_constraint) AND (SELECT amname FROM pg_am JOIN pg_class c ON "
                       "c.relam = pg_am.oid WHERE c.oid = indexrelid) = 'btree'")
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX {name}")
        nodes = plan_nodes(sql, params)
        transaction.set_rollback(True)

    word_scans = [(node["Index Name"], node["Index Cond"]) for node in nodes
                  if "search_vector @@" in node.get("Index Cond", "")]
    assert [name for name, _ in word_scans] == ["memory_mind_search_vector"]
    assert "mind_id" in word_scans[0][1]


GREEK = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "iota", "kappa",
         "lambda", "sigma", "omega"]


@pytest.mark.parametrize("query", ["alpha beta", "alpha beta gamma", "alpha OR beta gamma",
                                   "alpha beta -gamma", "alph* beta",
                                   '"alpha beta" OR gamma delta', "kappa", "kappa OR sigma"])
@pytest.mark.parametrize("place", ["", "projects/p1"])
def test_the_memories_matching_every_clause_rank_as_in_the_union_of_their_words(
        alice_mind, query, place):
    # Plain keyword search reads the memories matching every clause alone (through the
    # index's intersection) and counts each word's memories apart; hybrid search's keyword
    # side reads the memories holding any word and counts there. Given a page that full
    # matches fill, both must give the same memories with the same scores: same idf, same
    # ranks. Some memories are trashed, some under another path, so the counts' filters
    # are the search's.
    rng = random.Random(7)
    rows = []
    for number in range(400):
        words = rng.sample(GREEK, 6)
        rows.append(Memory(mind=alice_mind, category="note", key=f"k{number}",
                           content=" ".join(words + rng.sample(GREEK, 2)),
                           tags=rng.sample(GREEK, rng.randint(0, 2)), source="agent",
                           confidence=0.7, path=rng.choice(["", "projects/p1", "other"])))
    Memory.objects.bulk_create(rows)
    Memory.objects.filter(mind=alice_mind, key__endswith="7").update(deleted_at=timezone.now())
    memories = Memory.objects.for_mind(alice_mind).current().unexpired()
    if place:
        memories = memories.under(place)
    parsed = parse_query(query)
    with statements_sent() as sent:
        alone = keyword_search(memories, parsed, limit=10)
    with_the_rest = keyword_search(memories, parsed, limit=10, partial=True)
    assert "any_match" in sent[-1][0]  # the intersection's statement answered
    assert len(alone.hits) == 10
    assert alone.hits == with_the_rest.hits
    assert alone.matched == with_the_rest.matched == "all"


def test_the_memories_holding_some_words_are_read_only_when_fewer_than_the_page_hold_all(
        alice_mind, corpus):
    memories = Memory.objects.for_mind(alice_mind).current()

    def union_scans(text, limit):
        """The scans of the words' union, and how often each ran."""
        with statements_sent() as sent:
            found = keyword_search(memories, words_query(text), limit=limit)
        conditions = ("Index Cond", "Recheck Cond", "Filter")
        return found, [node["Actual Loops"] for node in plan_nodes(*sent[-1], analyze=True)
                       if any("search_vector @@" in node.get(name, "")
                              and " | " in node[name] for name in conditions)]

    found, loops = union_scans("docker swarm", 2)  # two memories hold both: a full page
    assert found.matched == "all" and len(found.hits) == 2
    assert found.all_words == {hit for hit, _ in found.hits}
    assert loops and set(loops) == {0}  # planned for the fill, never run
    found, loops = union_scans("docker swarm", 5)
    assert found.matched == "all" and len(found.hits) == 5 and len(found.all_words) == 2
    assert loops and set(loops) == {1}
    found, loops = union_scans("docker neovim", 5)
    assert found.matched == "some" and found.hits and not found.all_words
    assert loops and set(loops) == {1}


# -- Property test against a live server ---------------------------------------------------

PIECES = st.sampled_from(['"', "-", "*", "OR", " OR ", "or", " ", "  ", "docker", "swarm",
                          "deploy*", "-docker", '"docker swarm"', "the", "'", "\\", ":*",
                          "&", "|", "!", "(", ")", "<->", "😀", "日本語", "Москва", "ß",
                          "\x00", "\t", "%", "_", "--", "**", '""', "e-mail"])
QUERIES = st.one_of(
    st.text(max_size=60),
    st.lists(PIECES, max_size=12).map("".join),
    st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=8).map(" ".join),
    st.text(min_size=990, max_size=1010),
)
# 1,500 in `make test`; `make properties` throws 5,000 (SYNAPSE_SEARCH_QUERIES).
GENERATED = int(os.environ.get("SYNAPSE_SEARCH_QUERIES", "1500"))


@pytest.fixture
def live_client(live_server, alice_key, remember, monkeypatch):
    # The rate limit (tested elsewhere) would answer most of these queries with a 429;
    # this test is about what the search route does with them.
    monkeypatch.setattr("synapse.throttling.ScopeRateThrottle.allow_request",
                        lambda self, request, view: True)
    for category, key, content, tags in CORPUS:
        remember(category=category, key=key, content=content, tags=tags)
    with httpx.Client(base_url=live_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {alice_key[1]}"}) as client:
        yield client


@pytest.mark.slow
def test_thousands_of_generated_queries_never_get_a_server_error(live_client):
    seen = []

    @settings(max_examples=GENERATED, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(query=QUERIES)
    def ask(query):
        response = live_client.get("/memory/search", params={"q": query})
        seen.append(response.status_code)
        assert response.status_code in (200, 400), (query, response.text)
        body = response.json()
        if response.status_code == 400:
            assert body["error"]["message"]
        else:
            assert isinstance(body["results"], list)

    ask()
    assert len(seen) >= GENERATED
    assert 200 in seen and 400 in seen


# -- Property test: natural questions in hybrid mode and recall ---------------------------

QUESTION_WORDS = st.sampled_from([
    "which", "did", "she", "adopt", "first", "the", "cat", "dog", "what", "when", "how",
    "does", "Michael", "use", "docker", "swarm", "kubernetes", "deploy", "coffee", "espresso",
    "or", "and", "not", "OR", "AND", "NOT", "NEAR", "well-known", "e-mail", "don't",
    "Caroline's", "2023", "9:30", "3.5", "café", "Москва", "日本語", "😀", "🐶👍", "x" * 300,
    "supercalifragilistic" * 12, "C++", "node.js", "#42", "@bob", "a/b", "50%", "under_score",
])
QUESTION_MARKS = st.sampled_from([
    "?", "!", ".", ",", ";", ":", "'", '"', "(", ")", "[", "]", "{", "}", "-", "--", "—",
    "–", "*", "**", "...", "…", "&", "|", "<->", ":*", "\\", "/", "%", "_", "+", "=", "~",
    "^", "`", "«", "»", "“", "”", "¿", "¡",
])
QUESTION_TOKENS = st.one_of(
    QUESTION_WORDS, QUESTION_WORDS, QUESTION_MARKS,
    # Punctuation attached to a word: -swarm, "dog?", (cat, deploy*, —really
    st.tuples(QUESTION_MARKS, QUESTION_WORDS).map("".join),
    st.tuples(QUESTION_WORDS, QUESTION_MARKS).map("".join),
    st.tuples(QUESTION_MARKS, QUESTION_WORDS, QUESTION_MARKS).map("".join),
)
QUESTION_GAPS = st.sampled_from([" ", " ", " ", " ", "", "  ", " - ", " — ", " -- ", ", ",
                                 "\n", "\t"])
NATURAL_QUESTIONS = st.one_of(
    st.lists(st.tuples(QUESTION_TOKENS, QUESTION_GAPS), min_size=1, max_size=24)
    .map(lambda pairs: "".join(token + gap for token, gap in pairs)),
    # Anything printable (no control characters: no one types a NUL).
    st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=200),
).map(lambda text: text[:1000]).filter(str.strip)
# Each question is embedded (hybrid mode, then recall's hybrid ranking: the second from the
# query-embedding cache) and ranked twice: 150 in `make test`, 500 in `make properties`.
QUESTIONS = max(10, GENERATED // 10)


@pytest.mark.slow
def test_generated_natural_questions_are_always_answered_in_hybrid_mode_and_recall(
        agent, pets, alice_mind, monkeypatch):
    from memories.embeddings import embed_batch

    monkeypatch.setattr("synapse.throttling.ScopeRateThrottle.allow_request",
                        lambda self, request, view: True)
    embed_batch(limit=100, mind=alice_mind)  # so the semantic side finds something too
    asked = []

    @settings(max_examples=QUESTIONS, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(question=NATURAL_QUESTIONS)
    def ask(question):
        asked.append(question)
        response = agent.get("/memory/search", {"q": question, "mode": "hybrid"})
        assert response.status_code == 200, (question, response.content)
        assert isinstance(response.json()["results"], list)
        response = agent.get("/memory/recall", {"q": question, "format": "json"})
        assert response.status_code == 200, (question, response.content)
        assert len(response.json()["memories"]) == len(CORPUS) + 1  # all, ranked or not

    ask()
    assert len(asked) >= QUESTIONS
