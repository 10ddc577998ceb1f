"""POST /memory/bulk-delete: the caller's own go to the trash, the rest are not found."""

import pytest

from memories.models import AuditEvent, Memory

pytestmark = pytest.mark.django_db


def test_bulk_delete_moves_own_memories_to_the_trash(agent, remember):
    memories = [remember(key=f"k{i}", content=f"Memory {i}") for i in range(5)]
    ids = [m.id for m in memories[:3]]
    response = agent.post("/memory/bulk-delete", {"ids": ids}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], sorted(body["deleted"]), body["not_found"]) == (3, sorted(ids), [])
    assert Memory.objects.in_trash().count() == 3
    assert agent.get("/memory").json()["count"] == 2


def test_bulk_delete_reports_other_minds_ids_as_not_found_and_leaves_them(
        agent, bob_agent, remember):
    mine = remember(key="mine", content="Mine")
    bobs_id = bob_agent.post("/memory", {"category": "fact", "key": "bobs",
                                         "content": "Bob's"}, format="json").json()["id"]
    response = agent.post("/memory/bulk-delete",
                          {"ids": [mine.id, bobs_id, "mem_doesnotexist"]}, format="json")
    assert response.json()["deleted"] == [mine.id]
    assert response.json()["not_found"] == [bobs_id, "mem_doesnotexist"]
    assert Memory.objects.get(pk=bobs_id).deleted_at is None


def test_bulk_delete_of_memories_already_in_the_trash_reports_them_not_found(agent,
                                                                             remember):
    memory = remember(key="gone", content="Gone")
    agent.delete(f"/memory/{memory.id}")
    response = agent.post("/memory/bulk-delete", {"ids": [memory.id, memory.id]},
                          format="json")
    assert response.json() == {"count": 0, "deleted": [], "not_found": [memory.id]}
    assert not AuditEvent.objects.filter(action="bulk_delete").exists()


def test_bulk_delete_is_one_audit_event_naming_every_memory(agent, remember):
    ids = [remember(key=f"k{i}", content=f"Memory {i}").id for i in range(3)]
    agent.post("/memory/bulk-delete", {"ids": ids}, format="json")
    event = AuditEvent.objects.get(action="bulk_delete")
    assert sorted(event.details["memory_ids"]) == sorted(ids)
    assert event.actor_type == "key"
    audit = agent.get(f"/memory/audit?memory={ids[1]}").json()["results"]
    assert [e["action"] for e in audit] == ["bulk_delete", "store"]


def test_bulk_delete_accepts_1000_ids_and_refuses_1001(agent, remember):
    remember(key="kept", content="Kept")
    assert agent.post("/memory/bulk-delete", {"ids": [f"mem_x{i}" for i in range(1000)]},
                      format="json").status_code == 200
    response = agent.post("/memory/bulk-delete", {"ids": [f"mem_x{i}" for i in range(1001)]},
                          format="json")
    assert response.status_code == 400
    assert "ids" in response.json()["error"]["fields"]


@pytest.mark.parametrize("body", [{}, {"ids": []}, {"ids": "mem_x"}, {"ids": [1, None]},
                                  {"ids": ["mem_x"], "force": True}])
def test_bulk_delete_with_bad_body_is_400(agent, body):
    response = agent.post("/memory/bulk-delete", body, format="json")
    assert response.status_code == 400


def test_read_only_key_cannot_bulk_delete(reader, remember):
    memory = remember(key="kept", content="Kept")
    assert reader.post("/memory/bulk-delete", {"ids": [memory.id]},
                       format="json").status_code == 403
    assert Memory.objects.get(pk=memory.id).deleted_at is None
