"""Verification: only humans verify (JWT or session with CSRF); the queue; ?mind= for humans."""

from datetime import timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memories.models import AuditEvent, Memory
from memories.services import memory_delete
from tests.conftest import PASSWORD, jwt_client

pytestmark = pytest.mark.django_db


def snapshot(memory: Memory) -> tuple:
    memory.refresh_from_db()
    return (memory.verified, memory.verified_by_id, memory.verified_at, memory.version,
            memory.updated_at, memory.content)


# -- verify and unverify ------------------------------------------------------------------

def test_a_human_verifies_a_memory_and_it_records_who_and_when(human, alice, alice_mind,
                                                               remember):
    memory = remember()
    before = timezone.now()
    response = human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["verified"]) == (memory.id, True)
    memory.refresh_from_db()
    assert memory.verified and memory.verified_by == alice
    assert memory.verified_at >= before
    assert body["verified_at"] is not None
    event = AuditEvent.objects.get(action="verify")
    assert (event.actor_type, event.actor_id, event.memory_id) == ("user", str(alice.pk),
                                                                   memory.id)


def test_unverify_returns_the_memory_to_the_queue_and_is_audited(human, alice_mind, remember):
    memory = remember()
    human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}")
    response = human.post(f"/memory/{memory.id}/unverify?mind={alice_mind.id}")
    assert response.status_code == 200
    assert response.json()["verified"] is False
    memory.refresh_from_db()
    assert (memory.verified, memory.verified_by, memory.verified_at) == (False, None, None)
    assert AuditEvent.objects.filter(action="unverify", memory_id=memory.id).count() == 1
    queue = human.get(f"/memory/unverified?mind={alice_mind.id}").json()
    assert [item["id"] for item in queue["results"]] == [memory.id]


def test_verifying_twice_changes_nothing_the_second_time(human, alice_mind, remember):
    memory = remember()
    human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}")
    first = snapshot(memory)
    assert human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}").status_code == 200
    assert snapshot(memory) == first
    assert AuditEvent.objects.filter(action="verify").count() == 1


@pytest.mark.parametrize("action", ["verify", "unverify"])
def test_a_mind_key_on_verify_is_403_and_the_row_is_unchanged(agent, reader, human,
                                                              alice_mind, remember, action):
    memory = remember()
    if action == "unverify":
        human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}")
    before = snapshot(memory)
    events = AuditEvent.objects.count()
    for client in (agent, reader):
        response = client.post(f"/memory/{memory.id}/{action}")
        assert response.status_code == 403
        assert response.json()["error"] == {
            "status": 403, "code": "permission_denied",
            "message": "Only a human may do this; Mind Keys and OAuth tokens cannot."}
        # Naming the mind does not make a key a human.
        assert client.post(f"/memory/{memory.id}/{action}?mind={alice_mind.id}"
                           ).status_code == 403
    assert snapshot(memory) == before
    assert AuditEvent.objects.count() == events


def test_a_mind_key_cannot_verify_through_the_memory_body_either(agent, remember):
    memory = remember()
    response = agent.put(f"/memory/{memory.id}", {"verified": True}, format="json")
    assert response.status_code == 400
    memory.refresh_from_db()
    assert memory.verified is False


def test_verify_without_credentials_is_401(remember):
    memory = remember()
    response = APIClient().post(f"/memory/{memory.id}/verify")
    assert response.status_code == 401
    assert "WWW-Authenticate" in response
    memory.refresh_from_db()
    assert memory.verified is False


def test_a_session_verifies_with_the_csrf_token_and_not_without(alice, alice_mind, remember):
    memory = remember()
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password=PASSWORD)
    refused = client.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]
    memory.refresh_from_db()
    assert memory.verified is False
    secret = "b" * 32
    client.cookies["csrftoken"] = secret
    accepted = client.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}",
                           HTTP_X_CSRFTOKEN=secret)
    assert accepted.status_code == 200
    memory.refresh_from_db()
    assert memory.verified is True


@pytest.mark.parametrize("action, verified", [("verify", True), ("unverify", False)])
def test_a_human_may_leave_the_mind_out_on_verify_and_unverify(human, alice, alice_mind,
                                                               remember, action, verified):
    memory = remember()
    if not verified:
        human.post(f"/memory/{memory.id}/verify")
    response = human.post(f"/memory/{memory.id}/{action}", {"version": 1}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["verified"] is verified
    memory.refresh_from_db()
    assert (memory.verified, memory.verified_by) == (verified, alice if verified else None)
    event = AuditEvent.objects.filter(action=action).get()
    assert (event.mind_id, event.memory_id) == (alice_mind.id, memory.id)


def test_the_bare_verify_finds_the_memory_in_any_of_the_humans_minds(alice, remember):
    from minds.services import mind_create

    second = mind_create(owner=alice, name="Alice's second mind")
    memory = remember(mind=second, actor=alice, content="In the second mind")
    Memory.objects.filter(pk=memory.id).update(verified=False)  # a human's store verifies
    response = jwt_client(alice).post(f"/memory/{memory.id}/verify")
    assert response.status_code == 200
    assert response.json()["mind_id"] == second.id
    memory.refresh_from_db()
    assert memory.verified is True


def test_the_bare_verify_of_another_users_memory_is_404_and_unchanged(bob, remember):
    memory = remember()
    before = snapshot(memory)
    for action in ("verify", "unverify"):
        response = jwt_client(bob).post(f"/memory/{memory.id}/{action}")
        assert response.status_code == 404
        assert response.json()["error"] == {"status": 404, "code": "not_found",
                                             "message": "No such memory."}
    assert snapshot(memory) == before
    assert not AuditEvent.objects.filter(action__in=["verify", "unverify"]).exists()


def test_the_bare_verify_of_a_missing_or_trashed_memory_is_404(human, alice, remember):
    trashed = remember()
    memory_delete(memory=trashed, actor=alice)
    for memory_id in ("mem_nothere", trashed.id):
        assert human.post(f"/memory/{memory_id}/verify").status_code == 404
    trashed.refresh_from_db()
    assert trashed.verified is False


def test_a_session_may_leave_the_mind_out_on_verify_too(owner, remember):
    memory = remember()
    assert owner.post(f"/memory/{memory.id}/verify", "{}",
                      content_type="application/json").status_code == 200
    memory.refresh_from_db()
    assert memory.verified is True


def test_other_memory_routes_still_need_the_mind(human, remember):
    memory = remember()
    for response in (human.get(f"/memory/{memory.id}"),
                     human.post(f"/memory/{memory.id}/restore"),
                     human.post("/memory/bulk-verify", {"memories": [
                         {"id": memory.id, "version": 1}]}, format="json")):
        assert response.status_code == 400
        assert "mind" in response.json()["error"]["fields"]
    memory.refresh_from_db()
    assert memory.verified is False


def test_another_users_memory_is_404_and_unchanged(bob, bob_mind, alice_mind, remember):
    memory = remember()
    bob_client = jwt_client(bob)
    before = snapshot(memory)
    for path in (f"/memory/{memory.id}/verify?mind={alice_mind.id}",
                 f"/memory/{memory.id}/verify?mind={bob_mind.id}",
                 f"/memory/{memory.id}/unverify?mind={bob_mind.id}"):
        response = bob_client.post(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert snapshot(memory) == before


def test_a_memory_in_the_trash_cannot_be_verified(human, alice, alice_mind, remember):
    memory = remember()
    memory_delete(memory=memory, actor=alice)
    assert human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}").status_code == 404


def test_an_unknown_memory_is_404(human, alice_mind):
    assert human.post(f"/memory/mem_nothere/verify?mind={alice_mind.id}").status_code == 404


# -- the queue ----------------------------------------------------------------------------

def test_the_queue_lists_unverified_memories_oldest_first(agent, human, alice_mind, remember):
    now = timezone.now()
    newest = remember(key="newest", content="newest")
    oldest = remember(key="oldest", content="oldest")
    middle = remember(key="middle", content="middle")
    for age, memory in ((1, newest), (30, oldest), (10, middle)):
        Memory.objects.filter(pk=memory.id).update(created_at=now - timedelta(minutes=age))
    verified = remember(key="verified", content="verified")
    human.post(f"/memory/{verified.id}/verify?mind={alice_mind.id}")
    body = agent.get("/memory/unverified").json()
    assert body["count"] == 3
    assert [item["key"] for item in body["results"]] == ["oldest", "middle", "newest"]
    assert all(item["verified"] is False for item in body["results"])


def test_the_queue_leaves_out_expired_deleted_and_superseded_memories(agent, alice, remember):
    waiting = remember(key="waiting", content="waiting")
    expired = remember(key="expired", content="expired")
    Memory.objects.filter(pk=expired.id).update(expires_at=timezone.now() - timedelta(hours=1))
    memory_delete(memory=remember(key="deleted", content="deleted"), actor=alice)
    superseded = remember(key="superseded", content="superseded")
    Memory.objects.filter(pk=superseded.id).update(superseded_at=timezone.now())
    body = agent.get("/memory/unverified").json()
    assert [item["id"] for item in body["results"]] == [waiting.id]
    assert body["count"] == 1


def test_the_queue_pages_with_limit_and_offset(reader, remember):
    for number in range(5):
        remember(key=f"note_{number}", content=f"note {number}")
    first = reader.get("/memory/unverified?limit=2").json()
    assert (first["count"], len(first["results"]), first["limit"]) == (5, 2, 2)
    rest = reader.get("/memory/unverified?limit=10&offset=2").json()
    assert len(rest["results"]) == 3
    assert {item["id"] for item in first["results"]}.isdisjoint(
        {item["id"] for item in rest["results"]})


@pytest.mark.parametrize("query, field", [("limit=0", "limit"), ("limit=501", "limit"),
                                          ("limit=ten", "limit"), ("offset=-1", "offset"),
                                          ("order=old", "order")])
def test_the_queue_refuses_bad_parameters(agent, query, field):
    response = agent.get(f"/memory/unverified?{query}")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_the_queue_shows_only_the_minds_own_memories(agent, bob_agent, remember):
    remember(content="alice's")
    bob_agent.post("/memory", {"category": "fact", "content": "bob's"}, format="json")
    assert [item["content"] for item in agent.get("/memory/unverified").json()["results"]] == [
        "alice's"]


def test_the_queue_redacts_credentials(agent, remember):
    remember(category="credentials", key="db_password", content="hunter2-secret")
    body = agent.get("/memory/unverified").json()
    assert "hunter2-secret" not in str(body)


# -- a human acts on a mind with ?mind= -----------------------------------------------------

STORE = {"category": "preference", "key": "tea", "content": "Prefers green tea"}


def test_a_human_uses_every_core_route_with_mind(human, alice_mind):
    mind = f"mind={alice_mind.id}"
    stored = human.post(f"/memory?{mind}", STORE, format="json")
    assert stored.status_code == 201
    memory_id = stored.json()["id"]
    memory = Memory.objects.get(pk=memory_id)
    assert (memory.mind, memory.source, memory.verified, memory.confidence) == (
        alice_mind, "user", True, 1.0)
    assert human.get(f"/memory?{mind}").json()["count"] == 1
    assert human.get(f"/memory/{memory_id}?{mind}").json()["content"] == "Prefers green tea"
    updated = human.put(f"/memory/{memory_id}?{mind}", {"content": "Prefers oolong"},
                        format="json")
    assert (updated.status_code, updated.json()["version"]) == (200, 2)
    assert "Prefers oolong" in human.get(f"/memory/recall?{mind}").content.decode()
    health = human.get(f"/memory/health?{mind}").json()
    assert health["mind"]["id"] == alice_mind.id
    assert human.get(f"/memory/unverified?{mind}").json()["count"] == 0
    assert human.delete(f"/memory/{memory_id}?{mind}").status_code == 200
    assert Memory.objects.get(pk=memory_id).deleted_at is not None


def test_a_human_naming_another_users_mind_gets_404_on_every_core_route(human, bob_mind,
                                                                        bob_agent):
    bob_memory_id = bob_agent.post("/memory", STORE, format="json").json()["id"]
    mind = f"mind={bob_mind.id}"
    responses = [
        human.get(f"/memory?{mind}"),
        human.post(f"/memory?{mind}", {**STORE, "content": "hijacked"}, format="json"),
        human.get(f"/memory/{bob_memory_id}?{mind}"),
        human.put(f"/memory/{bob_memory_id}?{mind}", {"content": "hijacked"}, format="json"),
        human.delete(f"/memory/{bob_memory_id}?{mind}"),
        human.get(f"/memory/recall?{mind}"),
        human.get(f"/memory/health?{mind}"),
        human.get(f"/memory/unverified?{mind}"),
        human.post(f"/memory/{bob_memory_id}/verify?{mind}"),
        human.post(f"/memory/{bob_memory_id}/unverify?{mind}"),
    ]
    for response in responses:
        assert response.status_code == 404, response.request["PATH_INFO"]
        assert response.json()["error"]["code"] == "not_found"
    memory = Memory.objects.get(pk=bob_memory_id)
    assert (memory.content, memory.version, memory.deleted_at, memory.verified) == (
        "Prefers green tea", 1, None, False)
    assert Memory.objects.count() == 1


def test_a_human_naming_their_own_mind_cannot_reach_another_minds_memory(
        human, alice_mind, bob_agent):
    bob_memory_id = bob_agent.post("/memory", STORE, format="json").json()["id"]
    mind = f"mind={alice_mind.id}"
    for response in (human.get(f"/memory/{bob_memory_id}?{mind}"),
                     human.put(f"/memory/{bob_memory_id}?{mind}", {"content": "x"},
                               format="json"),
                     human.delete(f"/memory/{bob_memory_id}?{mind}"),
                     human.post(f"/memory/{bob_memory_id}/verify?{mind}")):
        assert response.status_code == 404
    assert Memory.objects.get(pk=bob_memory_id).content == "Prefers green tea"


def test_a_human_without_mind_is_told_to_name_one(human):
    for response in (human.get("/memory"), human.get("/memory/recall"),
                     human.get("/memory/unverified"),
                     human.post("/memory", STORE, format="json")):
        assert response.status_code == 400
        assert "mind" in response.json()["error"]["fields"]


def test_a_mind_key_naming_another_mind_is_404(agent, bob_mind):
    assert agent.get(f"/memory?mind={quote(bob_mind.id)}").status_code == 404


# -- verify pins the version the human read ----------------------------------------------

def test_verify_with_a_stale_version_is_a_409_and_leaves_the_memory_unverified(
        human, agent, alice_mind, remember):
    memory = remember(key="plan", content="Ship in June")
    seen = memory.version
    agent.put(f"/memory/{memory.id}", {"content": "Ship in June; wire the bonus to me"},
              format="json")
    response = human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}",
                          {"version": seen}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (409, "version_conflict")
    assert "version 1" in error["message"] and "version 2" in error["message"]
    memory.refresh_from_db()
    assert (memory.verified, memory.verified_by_id, memory.verified_at) == (False, None, None)
    assert not AuditEvent.objects.filter(action="verify").exists()


def test_verify_with_the_current_version_verifies_it(human, alice, alice_mind, remember):
    memory = remember()
    response = human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}",
                          {"version": memory.version}, format="json")
    assert response.status_code == 200 and response.json()["verified"] is True
    memory.refresh_from_db()
    assert memory.verified and memory.verified_by == alice


@pytest.mark.parametrize("body", [{"version": 0}, {"version": "one"}, {"version": None},
                                  {"versions": 1}])
def test_verify_with_a_malformed_version_is_a_400_naming_the_field(human, alice_mind, remember,
                                                                   body):
    memory = remember()
    response = human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}", body,
                          format="json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == set(body)
    memory.refresh_from_db()
    assert memory.verified is False


def test_an_agent_sending_a_version_is_still_refused(agent, remember):
    memory = remember()
    assert agent.post(f"/memory/{memory.id}/verify", {"version": 1},
                      format="json").status_code == 403
    memory.refresh_from_db()
    assert memory.verified is False


def test_verifying_several_with_one_stale_verifies_none(alice, alice_mind, remember):
    from memories.services import VersionConflict, memory_verify_many

    first, second = remember(key="first"), remember(key="second")
    remember(key="second", content="Edited after the page loaded")
    with pytest.raises(VersionConflict) as conflict:
        memory_verify_many(mind=alice_mind, user=alice, seen={first.id: 1, second.id: 1})
    assert conflict.value.stale == [{"id": second.id, "version": 1, "current_version": 2}]
    assert not Memory.objects.filter(verified=True).exists()
    assert not AuditEvent.objects.filter(action="verify").exists()


# -- POST /memory/bulk-verify -----------------------------------------------------------

def test_bulk_verify_verifies_each_at_the_version_read(human, alice, alice_mind, remember):
    first, second = remember(key="first"), remember(key="second")
    response = human.post(f"/memory/bulk-verify?mind={alice_mind.id}", {"memories": [
        {"id": first.id, "version": 1}, {"id": second.id, "version": 1}]}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"count": 2, "verified": sorted([first.id, second.id])}
    assert set(Memory.objects.filter(verified=True, verified_by=alice)
               .values_list("id", flat=True)) == {first.id, second.id}


def test_bulk_verify_with_one_stale_is_a_409_and_verifies_none(human, alice_mind, remember):
    first, second = remember(key="first"), remember(key="second")
    remember(key="second", content="Edited after it was read")
    response = human.post(f"/memory/bulk-verify?mind={alice_mind.id}", {"memories": [
        {"id": first.id, "version": 1}, {"id": second.id, "version": 1}]}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "version_conflict"
    assert f"{second.id} (you saw version 1, it is now version 2)" in error["message"]
    assert first.id not in error["message"]
    assert not Memory.objects.filter(verified=True).exists()
    assert not AuditEvent.objects.filter(action="verify").exists()


def test_bulk_verify_with_another_minds_memory_verifies_none(human, alice_mind, remember,
                                                            bob_agent, bob_mind):
    mine = remember()
    bob_agent.post("/memory", {"category": "fact", "content": "Bob's"}, format="json")
    bobs = Memory.objects.get(mind=bob_mind)
    response = human.post(f"/memory/bulk-verify?mind={alice_mind.id}", {"memories": [
        {"id": mine.id, "version": 1}, {"id": bobs.id, "version": 1}]}, format="json")
    assert response.status_code == 409
    assert f"{bobs.id} (you saw version 1, it is gone)" in response.json()["error"]["message"]
    assert not Memory.objects.filter(verified=True).exists()


@pytest.mark.parametrize("body", [{}, {"memories": []}, {"memories": [{"id": "mem_x"}]},
                                  {"memories": [{"id": "mem_x", "version": 1, "extra": 1}]},
                                  {"memories": "mem_x"}])
def test_bulk_verify_with_a_malformed_body_is_a_400(human, alice_mind, body):
    response = human.post(f"/memory/bulk-verify?mind={alice_mind.id}", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_an_agent_cannot_bulk_verify(agent, remember):
    memory = remember()
    response = agent.post("/memory/bulk-verify", {"memories": [
        {"id": memory.id, "version": 1}]}, format="json")
    assert response.status_code == 403
    memory.refresh_from_db()
    assert memory.verified is False


# -- POST /memory/bulk-unverify and /memory/bulk-trash --------------------------------------

def _seen(*memories) -> dict:
    return {"memories": [{"id": memory.id, "version": memory.version} for memory in memories]}


def test_bulk_unverify_returns_each_to_the_queue_with_one_event_each(human, alice_mind,
                                                                     remember, agent):
    first, second, third = (remember(key=name) for name in ("first", "second", "third"))
    human.post(f"/memory/bulk-verify?mind={alice_mind.id}", _seen(first, second, third),
               format="json")
    response = human.post(f"/memory/bulk-unverify?mind={alice_mind.id}", _seen(first, second),
                          format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"count": 2, "unverified": sorted([first.id, second.id])}
    assert set(Memory.objects.filter(verified=True).values_list("id", flat=True)) == {third.id}
    assert sorted(AuditEvent.objects.filter(action="unverify").values_list("memory_id",
                                                                            flat=True)) == sorted(
        [first.id, second.id])
    queue = agent.get("/memory/unverified").json()
    assert {item["id"] for item in queue["results"]} == {first.id, second.id}


def test_bulk_trash_moves_each_to_the_trash_with_one_delete_event_each(human, alice_mind,
                                                                       remember, agent):
    first, second, kept = (remember(key=name) for name in ("first", "second", "kept"))
    response = human.post(f"/memory/bulk-trash?mind={alice_mind.id}", _seen(first, second),
                          format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"count": 2, "trashed": sorted([first.id, second.id])}
    trashed = Memory.objects.filter(deleted_at__isnull=False)
    assert set(trashed.values_list("id", flat=True)) == {first.id, second.id}
    events = AuditEvent.objects.filter(action="delete").order_by("memory_id")
    assert [(e.memory_id, e.details["key"]) for e in events] == sorted(
        [(first.id, "first"), (second.id, "second")])
    assert [item["id"] for item in agent.get("/memory/unverified").json()["results"]] == [
        kept.id]
    # Restorable as any deleted memory.
    assert agent.post(f"/memory/{first.id}/restore").status_code == 200


@pytest.mark.parametrize("route", ["bulk-unverify", "bulk-trash"])
def test_bulk_review_with_one_stale_is_a_409_and_changes_none(human, alice_mind, remember,
                                                              route):
    first, second = remember(key="first"), remember(key="second")
    human.post(f"/memory/bulk-verify?mind={alice_mind.id}", _seen(first, second),
               format="json")
    remember(key="second", content="Edited after it was read")
    before = [snapshot(first), snapshot(second)]
    events = AuditEvent.objects.count()
    response = human.post(f"/memory/{route}?mind={alice_mind.id}", {"memories": [
        {"id": first.id, "version": 1}, {"id": second.id, "version": 1}]}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "version_conflict"
    assert f"{second.id} (you saw version 1, it is now version 2)" in error["message"]
    assert [snapshot(first), snapshot(second)] == before
    assert not Memory.objects.filter(deleted_at__isnull=False).exists()
    assert AuditEvent.objects.count() == events


@pytest.mark.parametrize("route", ["bulk-unverify", "bulk-trash"])
def test_bulk_review_of_another_minds_or_a_trashed_memory_changes_none(
        human, alice, alice_mind, remember, bob_agent, bob_mind, route):
    mine, trashed = remember(key="mine"), remember(key="trashed")
    memory_delete(memory=trashed, actor=alice)
    bob_agent.post("/memory", {"category": "fact", "content": "Bob's"}, format="json")
    bobs = Memory.objects.get(mind=bob_mind)
    response = human.post(f"/memory/{route}?mind={alice_mind.id}",
                          _seen(mine, bobs, trashed), format="json")
    assert response.status_code == 409
    message = response.json()["error"]["message"]
    assert f"{bobs.id} (you saw version 1, it is gone)" in message
    assert f"{trashed.id} (you saw version 1, it is gone)" in message
    mine.refresh_from_db()
    bobs.refresh_from_db()
    assert (mine.deleted_at, bobs.deleted_at) == (None, None)


@pytest.mark.parametrize("route", ["bulk-unverify", "bulk-trash"])
@pytest.mark.parametrize("body", [{}, {"memories": []}, {"memories": [{"id": "mem_x"}]},
                                  {"memories": [{"id": "mem_x", "version": 1, "extra": 1}]},
                                  {"memories": "mem_x"}, {"ids": ["mem_x"]}])
def test_bulk_review_with_a_malformed_body_is_a_400(human, alice_mind, route, body):
    response = human.post(f"/memory/{route}?mind={alice_mind.id}", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


@pytest.mark.parametrize("route", ["bulk-unverify", "bulk-trash"])
def test_bulk_review_takes_at_most_1000_memories(human, alice_mind, route):
    body = {"memories": [{"id": f"mem_{n}", "version": 1} for n in range(1001)]}
    response = human.post(f"/memory/{route}?mind={alice_mind.id}", body, format="json")
    assert response.status_code == 400
    assert "memories" in response.json()["error"]["fields"]


@pytest.mark.parametrize("route", ["bulk-unverify", "bulk-trash"])
def test_a_mind_key_cannot_bulk_review(agent, human, alice_mind, remember, route):
    memory = remember()
    human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}")
    before = snapshot(memory)
    response = agent.post(f"/memory/{route}", _seen(memory), format="json")
    assert response.status_code == 403
    assert snapshot(memory) == before
    memory.refresh_from_db()
    assert memory.deleted_at is None


@pytest.mark.parametrize("route", ["bulk-unverify", "bulk-trash"])
def test_another_users_mind_is_404_for_bulk_review(bob, alice_mind, remember, route):
    memory = remember()
    response = jwt_client(bob).post(f"/memory/{route}?mind={alice_mind.id}", _seen(memory),
                                    format="json")
    assert response.status_code == 404
    memory.refresh_from_db()
    assert memory.deleted_at is None


# -- the queue by path and type -------------------------------------------------------------

def test_the_queue_filters_by_memory_type(agent, remember):
    remember(key="fact", content="A fact")
    episode = remember(key="turn", content="A turn", memory_type="episodic")
    body = agent.get("/memory/unverified?memory_type=episodic").json()
    assert (body["count"], [item["id"] for item in body["results"]]) == (1, [episode.id])
    assert agent.get("/memory/unverified?memory_type=memo").status_code == 400
