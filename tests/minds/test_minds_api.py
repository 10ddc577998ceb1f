"""/minds: create, list, get, rename, recall policy, delete with confirmation; tenancy."""

from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from memories.models import AuditEvent, Memory, MemoryVersion
from memories.services import memory_delete
from minds.models import Mind, MindKey
from minds.services import mind_create
from tests.conftest import PASSWORD, key_client

pytestmark = pytest.mark.django_db


def test_create_mind_returns_it_with_an_m_id(human, alice):
    response = human.post("/minds", {"name": "Work"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("m_")
    assert (body["name"], body["unverified_in_recall"]) == ("Work", "marked")
    assert (body["memories"], body["unverified"], body["keys"]) == (0, 0, 0)
    assert list(Mind.objects.get(pk=body["id"]).owners()) == [alice]


def test_create_mind_can_choose_the_hidden_recall_policy(human):
    response = human.post("/minds", {"name": "Strict", "unverified_in_recall": "hidden"},
                          format="json")
    assert response.status_code == 201
    assert Mind.objects.get(pk=response.json()["id"]).unverified_in_recall == "hidden"


@pytest.mark.parametrize("body, field", [
    ({}, "name"),
    ({"name": "   "}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": "tab\tname"}, "name"),
    ({"name": "ok", "owner": 2}, "owner"),
    ({"name": "ok", "id": "m_chosen"}, "id"),
    ({"name": "ok", "unverified_in_recall": "sometimes"}, "unverified_in_recall"),
])
def test_create_mind_with_bad_input_is_400_naming_the_field(human, body, field):
    response = human.post("/minds", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Mind.objects.exists()


def test_list_shows_only_my_minds_with_counts(human, alice_mind, bob_mind, remember, alice):
    remember(content="unverified agent note")
    old = remember(key="old", content="old")
    memory_delete(memory=old, actor=alice)
    body = human.get("/minds").json()
    assert [mind["id"] for mind in body] == [alice_mind.id]
    # One live memory (the trashed one does not count), unverified; alice's agent key.
    assert (body[0]["memories"], body[0]["unverified"], body[0]["keys"]) == (1, 1, 1)


def test_list_counts_cost_one_query_however_many_minds(human, alice, django_assert_num_queries):
    for number in range(5):
        mind_create(owner=alice, name=f"Mind {number}")
    # Authentication (user) and the annotated list of minds.
    with django_assert_num_queries(2):
        response = human.get("/minds")
    assert len(response.json()) == 5


def test_get_my_mind(human, alice_mind):
    body = human.get(f"/minds/{alice_mind.id}").json()
    assert (body["id"], body["name"]) == (alice_mind.id, "Alice's Mind")


def test_another_users_mind_is_404_for_every_method(human, bob_mind):
    for response in (human.get(f"/minds/{bob_mind.id}"),
                     human.patch(f"/minds/{bob_mind.id}", {"name": "mine"}, format="json"),
                     human.delete(f"/minds/{bob_mind.id}", {"confirm": bob_mind.name},
                                  format="json")):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    bob_mind.refresh_from_db()
    assert bob_mind.name == "Bob's Mind"


def test_unknown_mind_is_404(human):
    assert human.get("/minds/m_doesnotexist").status_code == 404


def test_rename_mind_is_audited(human, alice_mind, alice):
    response = human.patch(f"/minds/{alice_mind.id}", {"name": "Renamed"}, format="json")
    assert response.status_code == 200
    assert response.json()["name"] == "Renamed"
    alice_mind.refresh_from_db()
    assert alice_mind.name == "Renamed"
    event = AuditEvent.objects.get(mind=alice_mind, action="mind_update")
    assert (event.actor_type, event.actor_id) == ("user", str(alice.pk))
    assert event.details == {"before": {"name": "Alice's Mind"}, "after": {"name": "Renamed"}}


def test_patch_with_no_change_writes_no_audit_event(human, alice_mind):
    response = human.patch(f"/minds/{alice_mind.id}", {"name": alice_mind.name}, format="json")
    assert response.status_code == 200
    assert not AuditEvent.objects.filter(action="mind_update").exists()


@pytest.mark.parametrize("body, field", [
    ({}, "non_field_errors"),
    ({"unverified_in_recall": "never"}, "unverified_in_recall"),
    ({"owner": 5}, "owner"),
    ({"name": ""}, "name"),
])
def test_patch_with_bad_input_is_400_and_changes_nothing(human, alice_mind, body, field):
    response = human.patch(f"/minds/{alice_mind.id}", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in error.get("fields", {}) or field == "non_field_errors"
    alice_mind.refresh_from_db()
    assert (alice_mind.name, alice_mind.unverified_in_recall) == ("Alice's Mind", "marked")


def test_hidden_policy_keeps_unverified_memories_out_of_recall_until_verified(
        human, agent, alice_mind, remember, alice):
    remember(key="agent_guess", content="The user probably likes tea")
    assert "agent_guess" in agent.get("/memory/recall").content.decode()
    response = human.patch(f"/minds/{alice_mind.id}", {"unverified_in_recall": "hidden"},
                           format="json")
    assert response.json()["unverified_in_recall"] == "hidden"
    assert "agent_guess" not in agent.get("/memory/recall").content.decode()
    health = agent.get("/memory/health").json()
    assert health["recall_policy"]["unverified"] == "hidden"
    memory = Memory.objects.get(key="agent_guess")
    assert human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}").status_code == 200
    assert "agent_guess" in agent.get("/memory/recall").content.decode()


def test_marked_policy_shows_unverified_memories_marked_and_health_says_so(agent, remember):
    remember(key="agent_guess", content="The user probably likes tea")
    text = agent.get("/memory/recall").content.decode()
    assert "[unverified]" in text and "agent_guess" in text
    assert agent.get("/memory/health").json()["recall_policy"]["unverified"] == "marked"


def test_delete_without_confirmation_is_400_and_keeps_the_mind(human, alice_mind):
    response = human.delete(f"/minds/{alice_mind.id}")
    assert response.status_code == 400
    assert "confirm" in response.json()["error"]["fields"]
    assert Mind.objects.filter(pk=alice_mind.id).exists()


def test_delete_with_the_wrong_name_is_400_and_keeps_the_mind(human, alice_mind):
    response = human.delete(f"/minds/{alice_mind.id}", {"confirm": "alice's mind"},
                            format="json")
    assert response.status_code == 400
    assert Mind.objects.filter(pk=alice_mind.id).exists()


def test_delete_with_the_name_removes_everything_of_the_mind(
        human, alice_mind, alice_key, remember, bob_mind, bob_agent):
    memory = remember(content="first")
    second = remember(key="second", content="second")
    Memory.objects.filter(pk=memory.pk).update(superseded_by=second)
    bob_agent.post("/memory", {"category": "fact", "content": "bob's"}, format="json")
    response = human.delete(f"/minds/{alice_mind.id}", {"confirm": "Alice's Mind"},
                            format="json")
    assert response.status_code == 204
    assert not Mind.objects.filter(pk=alice_mind.id).exists()
    assert not Memory.objects.filter(mind_id=alice_mind.id).exists()
    assert not MemoryVersion.objects.filter(memory_id=memory.id).exists()
    assert not MindKey.objects.filter(mind_id=alice_mind.id).exists()
    assert not AuditEvent.objects.filter(mind_id=alice_mind.id).exists()
    assert Memory.objects.filter(mind=bob_mind).count() == 1
    # The mind's key died with it.
    assert key_client(alice_key[1]).get("/memory").status_code == 401


def test_deleting_a_large_mind_takes_as_many_statements_as_a_small_one(human, alice, remember):
    def statements_to_delete(memories: int) -> int:
        mind = mind_create(owner=alice, name=f"{memories} memories")
        for number in range(memories):
            remember(mind=mind, key=f"note_{number}", content=f"note {number}")
        with CaptureQueriesContext(connection) as queries:
            response = human.delete(f"/minds/{mind.id}?confirm={quote(mind.name)}")
        assert response.status_code == 204
        assert not Memory.objects.filter(mind_id=mind.id).exists()
        return len(queries)

    assert statements_to_delete(40) == statements_to_delete(2)


def test_delete_accepts_the_confirmation_as_a_query_parameter(human, alice_mind):
    response = human.delete(f"/minds/{alice_mind.id}?confirm={quote(alice_mind.name)}")
    assert response.status_code == 204
    assert not Mind.objects.filter(pk=alice_mind.id).exists()


def test_mind_routes_refuse_mind_keys_with_403(agent, reader, alice_mind):
    for client in (agent, reader):
        for response in (client.get("/minds"),
                         client.post("/minds", {"name": "x"}, format="json"),
                         client.get(f"/minds/{alice_mind.id}"),
                         client.patch(f"/minds/{alice_mind.id}", {"name": "x"}, format="json"),
                         client.delete(f"/minds/{alice_mind.id}?confirm=Alice%27s%20Mind")):
            assert response.status_code == 403
            assert response.json()["error"]["code"] == "permission_denied"
    assert Mind.objects.filter(pk=alice_mind.id, name="Alice's Mind").exists()
    assert Mind.objects.count() == 1


def test_mind_routes_without_credentials_are_401():
    response = APIClient().get("/minds")
    assert response.status_code == 401
    assert "WWW-Authenticate" in response


def test_mind_routes_refuse_unknown_query_parameters(human):
    response = human.get("/minds?page=2")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"page": ["Unknown query parameter."]}


def test_session_login_works_and_writes_need_the_csrf_token(alice):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password=PASSWORD)
    assert client.get("/minds").status_code == 200
    refused = client.post("/minds", {"name": "Via session"}, format="json")
    assert refused.status_code == 403
    assert not Mind.objects.filter(name="Via session").exists()
    secret = "a" * 32  # the CSRF cookie's secret; the header must repeat it
    client.cookies["csrftoken"] = secret
    accepted = client.post("/minds", {"name": "Via session"}, format="json",
                           HTTP_X_CSRFTOKEN=secret)
    assert accepted.status_code == 201
