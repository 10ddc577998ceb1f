"""GET /memory (list), GET/PUT/DELETE /memory/{id}: filters, pagination, tenancy."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory, MemoryVersion

pytestmark = pytest.mark.django_db


def test_list_returns_count_and_results_newest_first(agent, remember):
    remember(key="a", content="first")
    remember(key="b", content="second")
    body = agent.get("/memory").json()
    assert body["count"] == 2
    assert [m["key"] for m in body["results"]] == ["b", "a"]
    assert set(body["results"][0]) >= {"id", "mind_id", "category", "key", "content", "tags",
                                       "priority", "source", "verified", "confidence",
                                       "expires_at", "version", "created_at", "updated_at"}


def test_list_paginates_with_limit_and_offset(agent, remember):
    for number in range(7):
        remember(key=f"k{number}", content=str(number))
    page = agent.get("/memory?limit=3&offset=3&ordering=key").json()
    assert page["count"] == 7
    assert [m["key"] for m in page["results"]] == ["k3", "k4", "k5"]


@pytest.mark.parametrize("query", ["limit=501", "limit=0", "offset=-1", "ordering=content",
                                   "verified=maybe", "updated_since=yesterday", "page=2"])
def test_bad_list_parameters_are_400_naming_them(agent, query):
    response = agent.get(f"/memory?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()["error"]["fields"]


@pytest.mark.parametrize("query", ["category=nonsense", "priority=urgent", "source=robot",
                                   "tag=" + "x" * 51, "include_expired=maybe"])
def test_bad_list_filter_values_are_400_in_the_error_shape(agent, query):
    response = agent.get(f"/memory?{query}")
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (400, "invalid")
    assert list(error["fields"]) == [query.split("=")[0]]


def test_memory_routes_answer_options_without_a_form_of_fields(agent):
    response = agent.options("/memory")
    assert response.status_code == 200
    assert "actions" not in response.json()


def test_list_limit_500_is_accepted(agent, remember):
    for number in range(51):  # one more than the default page of 50
        remember(key=f"k{number:02d}", content=str(number))
    response = agent.get("/memory?limit=500&ordering=key")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 51
    assert [m["key"] for m in body["results"]] == [f"k{number:02d}" for number in range(51)]


def test_list_filters(agent, remember, alice, alice_mind):
    remember(key="tagged", content="t", tags=["Work"], priority="high")
    remember(key="pref", content="p", category="preference", source="tool")
    remember(mind=alice_mind, actor=alice, key="human", content="h")
    keys = lambda query: sorted(m["key"] for m in agent.get(f"/memory?{query}").json()["results"])  # noqa: E731
    assert keys("tag=WORK") == ["tagged"]
    assert keys("priority=high") == ["tagged"]
    assert keys("category=preference") == ["pref"]
    assert keys("source=tool") == ["pref"]
    assert keys("verified=true") == ["human"]
    assert keys("verified=false") == ["pref", "tagged"]
    future = (timezone.now() + timedelta(hours=1)).timestamp()
    assert keys(f"updated_since={future}") == []


def test_list_keeps_expired_but_not_trashed(agent, remember):
    remember(key="expired", content="e", expires_at=timezone.now() - timedelta(days=1))
    trashed = remember(key="trashed", content="t")
    agent.delete(f"/memory/{trashed.id}")
    keys = [m["key"] for m in agent.get("/memory").json()["results"]]
    assert keys == ["expired"]
    assert agent.get("/memory?include_expired=false").json()["count"] == 0


def test_get_returns_one_memory(agent, remember):
    memory = remember(key="a", content="alpha")
    body = agent.get(f"/memory/{memory.id}").json()
    assert (body["id"], body["content"], body["version"]) == (memory.id, "alpha", 1)


def test_get_reveals_credentials_to_the_owning_mind_but_list_redacts(agent, remember):
    memory = remember(category="credentials", key="token", content="s3cret")
    assert agent.get(f"/memory/{memory.id}").json()["content"] == "s3cret"
    assert "s3cret" not in agent.get("/memory").content.decode()


def test_other_minds_memory_is_404(bob_agent, remember):
    memory = remember(key="private", content="alice only")
    for response in (bob_agent.get(f"/memory/{memory.id}"),
                     bob_agent.put(f"/memory/{memory.id}", {"content": "x"}, format="json"),
                     bob_agent.delete(f"/memory/{memory.id}")):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert Memory.objects.get(pk=memory.id).content == "alice only"


def test_unknown_memory_is_404(agent):
    assert agent.get("/memory/mem_doesnotexist").status_code == 404


def test_put_updates_fields_and_makes_a_version(agent, remember):
    memory = remember(key="a", content="alpha", tags=["x"])
    response = agent.put(f"/memory/{memory.id}", {"content": "beta", "tags": ["Y"],
                                                  "priority": "high"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["content"], body["tags"], body["priority"], body["version"]) == (
        "beta", ["y"], "high", 2)
    assert MemoryVersion.objects.filter(memory=memory).count() == 2


def test_put_with_same_values_changes_nothing(agent, remember):
    memory = remember(key="a", content="alpha")
    response = agent.put(f"/memory/{memory.id}", {"content": "alpha"}, format="json")
    assert response.json()["version"] == 1


def test_put_onto_a_taken_key_is_409_and_unchanged(agent, remember):
    remember(key="taken", content="one")
    memory = remember(key="mine", content="two")
    response = agent.put(f"/memory/{memory.id}", {"key": "taken"}, format="json")
    assert response.status_code == 409
    assert Memory.objects.get(pk=memory.id).key == "mine"


@pytest.mark.parametrize("body", [{}, {"verified": True}, {"version": 3}, {"mind_id": "m_x"},
                                  {"content": ""}, {"colour": "red"}, {"expires_at": "soon"}])
def test_put_with_bad_body_is_400_and_row_unchanged(agent, remember, body):
    memory = remember(key="a", content="alpha")
    before = Memory.objects.filter(pk=memory.id).values().get()
    response = agent.put(f"/memory/{memory.id}", body, format="json")
    assert response.status_code == 400
    assert Memory.objects.filter(pk=memory.id).values().get() == before


def test_put_can_clear_expiry(agent, remember):
    memory = remember(key="a", content="alpha", expires_at=timezone.now() + timedelta(days=1))
    body = agent.put(f"/memory/{memory.id}", {"expires_at": None}, format="json").json()
    assert body["expires_at"] is None


def test_delete_moves_to_trash(agent, remember):
    memory = remember(key="a", content="alpha")
    response = agent.delete(f"/memory/{memory.id}")
    assert response.status_code == 200
    assert response.json()["deleted_at"] is not None
    assert Memory.objects.get(pk=memory.id).deleted_at is not None
    assert agent.get(f"/memory/{memory.id}").status_code == 404


def test_storing_a_trashed_key_creates_a_fresh_memory(agent, remember):
    old = remember(key="a", content="alpha")
    agent.delete(f"/memory/{old.id}")
    response = agent.post("/memory", {"category": "fact", "key": "a", "content": "alpha"},
                          format="json")
    assert response.status_code == 201
    assert response.json()["id"] != old.id


def test_read_only_key_reads_but_cannot_write(reader, remember):
    memory = remember(key="a", content="alpha")
    assert reader.get(f"/memory/{memory.id}").status_code == 200
    assert reader.get("/memory").status_code == 200
    assert reader.put(f"/memory/{memory.id}", {"content": "b"}, format="json").status_code == 403
    assert reader.delete(f"/memory/{memory.id}").status_code == 403
    assert Memory.objects.get(pk=memory.id).deleted_at is None


def test_human_uses_memory_routes_with_mind_parameter(human, alice_mind, remember):
    memory = remember(key="a", content="alpha")
    assert human.get(f"/memory?mind={alice_mind.id}").json()["count"] == 1
    assert human.get(f"/memory/{memory.id}?mind={alice_mind.id}").status_code == 200
    assert human.get("/memory").status_code == 400


def test_human_on_another_users_mind_is_404(human, bob_mind):
    assert human.get(f"/memory?mind={bob_mind.id}").status_code == 404
    assert human.get(f"/memory/recall?mind={bob_mind.id}").status_code == 404


def test_mind_key_naming_another_mind_is_404(agent, bob_mind):
    assert agent.get(f"/memory?mind={bob_mind.id}").status_code == 404


def test_query_string_with_nul_or_bad_utf8_is_400(agent):
    assert agent.get("/memory?tag=a%00b").status_code == 400
    assert agent.get("/memory?tag=%ff%fe").status_code == 400


def test_health_reports_database_embeddings_and_policy(agent):
    body = agent.get("/memory/health").json()
    assert body["database"]["ok"] is True
    assert body["database"]["pgvector"]
    assert body["embeddings"]["model"] == "all-MiniLM-L6-v2"
    assert body["recall_policy"]["unverified"] == "marked"


def test_health_reveals_no_server_versions(agent):
    import platform

    import django
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version'), "
                       "(SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        postgresql, pgvector = cursor.fetchone()
    response = agent.get("/memory/health")
    assert response.status_code == 200
    text = response.content.decode()
    for version in (postgresql, pgvector, platform.python_version(), django.get_version()):
        assert version not in text
    assert "postgresql" not in response.json()["database"]
    assert response.json()["database"]["pgvector"] is True


def test_responses_are_not_cached(agent):
    response = agent.get("/memory")
    assert response["Cache-Control"] == "no-store"
    assert response["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize("accept", ["K_^v2&D<", "image/png", "text/html;q=0.5, */*;q=0"])
def test_an_accept_header_no_renderer_satisfies_still_gets_json(agent, remember, accept):
    remember(key="a", content="first")
    response = agent.get("/memory", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["count"] == 1


# -- The lookup of one memory (memories.models.memory_of_mind) -----------------------------

def captured_sql(client, method: str, url: str, body=None, first=None) -> list[str]:
    """The statements of a request, after ``first`` (or the same body) was sent once: the
    key's last_used_at is written once a minute, not in the count."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    getattr(client, method)(url, first or body, format="json")
    with CaptureQueriesContext(connection) as captured:
        response = getattr(client, method)(url, body, format="json")
    assert response.status_code == 200, response.content
    return [query["sql"] for query in captured]


def test_get_is_the_key_lookup_and_one_row_without_join_order_or_vectors(agent, remember):
    memory = remember(key="a", content="alpha")
    key_lookup, row = captured_sql(agent, "get", f"/memory/{memory.id}")
    assert "minds_mindkey" in key_lookup
    assert "FROM memories_memory WHERE mind_id = " in row and "deleted_at IS NULL" in row
    assert "JOIN" not in row and "ORDER BY" not in row
    assert "embedding" not in row.replace("embedding_pending", "").replace(
        "embedding_model", "")


def test_an_update_never_reads_the_mind_row_again(agent, remember):
    memory = remember(key="a", content="alpha")
    for method, url, body in (("put", f"/memory/{memory.id}", {"content": "{}"}),
                              ("post", "/memory", {"category": "fact", "key": "a",
                                                   "content": "{}"})):
        statements = captured_sql(agent, method, url,
                                  {**body, "content": f"{method} two"},
                                  first={**body, "content": f"{method} one"})
        assert any(sql.startswith('INSERT INTO "memories_memoryversion"')
                   for sql in statements)
        minds = [sql for sql in statements if 'FROM "minds_mind"' in sql]
        assert minds == [], minds
    assert Memory.objects.get(pk=memory.pk).content == "post two"


def test_one_memory_of_a_scoped_mind_comes_with_the_whole_mind(alice_mind, remember,
                                                               django_assert_num_queries):
    import copy

    from memories.models import memory_of_mind

    inside = remember(key="in", path="projects/a")
    outside = remember(key="out", path="projects/b")
    scoped = copy.copy(alice_mind)
    scoped.reach = ("projects/a",)
    for mind in (alice_mind, scoped):
        with django_assert_num_queries(1):
            found = memory_of_mind(mind, inside.id, vectors=False)
            assert found.mind.pk == alice_mind.pk and found.mind.reach == ()
            assert found.content == inside.content
        assert "embedding" in found.get_deferred_fields()
        assert "embedding" not in memory_of_mind(mind, inside.id).get_deferred_fields()
    assert memory_of_mind(scoped, outside.id) is None
    assert memory_of_mind(alice_mind, outside.id).id == outside.id
    Memory.objects.filter(pk=inside.pk).update(deleted_at=timezone.now())
    for mind in (alice_mind, scoped):
        assert memory_of_mind(mind, inside.id) is None
        assert memory_of_mind(mind, inside.id, in_trash_too=True).id == inside.id


def test_the_live_memory_a_store_writes_is_locked_on_the_primary_by_key_and_reach(
        alice_mind, remember, django_assert_num_queries, settings):
    import copy

    from memories.models import live_memory_by_key
    from synapse.db_router import reads_from

    inside = remember(key="in", path="projects/a")
    outside = remember(key="out", path="projects/b")
    scoped = copy.copy(alice_mind)
    scoped.reach = ("projects/a",)
    # Inside a view that reads memories from a replica, the lock still runs where writes
    # go ("nowhere" is no database: a read sent there would fail).
    settings.DATABASE_ROUTERS = ["synapse.db_router.ReplicaRouter"]
    with reads_from("nowhere"):
        for mind in (alice_mind, scoped):
            with django_assert_num_queries(1) as captured:
                found = live_memory_by_key(mind, "fact", "in")
            assert "FOR UPDATE" in captured.captured_queries[0]["sql"]
            assert found.id == inside.id and found.content == inside.content
            assert found.mind.pk == alice_mind.pk and found.mind.reach == ()
        assert live_memory_by_key(scoped, "fact", "out") is None
        assert live_memory_by_key(alice_mind, "fact", "out").id == outside.id
        assert live_memory_by_key(alice_mind, "fact", "missing") is None
        Memory.objects.filter(pk=inside.pk).update(deleted_at=timezone.now())
        assert live_memory_by_key(alice_mind, "fact", "in") is None


def test_the_hand_written_lookups_build_the_instance_the_orm_does(alice_mind, remember):
    import numpy as np

    from memories.models import VECTOR_FIELDS, live_memory_by_key, memory_of_mind

    memory = remember(key="a", content="alpha", tags=["x"], path="projects/a")
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    Memory.objects.filter(pk=memory.pk).update(embedding=vector)
    expected = Memory.objects.get(pk=memory.pk)
    for found in (memory_of_mind(alice_mind, memory.id),
                  memory_of_mind(alice_mind, memory.id, vectors=False),
                  live_memory_by_key(alice_mind, "fact", "a")):
        assert found._state.adding is False and found._state.db == "default"
        for field in Memory._meta.concrete_fields:
            if field.attname in found.get_deferred_fields():
                assert field.name in VECTOR_FIELDS
                continue
            value, wanted = getattr(found, field.attname), getattr(expected, field.attname)
            assert type(value) is type(wanted), field.name
            if field.name in VECTOR_FIELDS and wanted is not None:
                assert np.array_equal(value, wanted), field.name
            else:
                assert value == wanted, field.name
    read = memory_of_mind(alice_mind, memory.id).embedding
    assert np.array_equal(np.asarray(read, dtype=np.float32), vector)
    assert {"embedding"} <= memory_of_mind(alice_mind, memory.id,
                                           vectors=False).get_deferred_fields()
