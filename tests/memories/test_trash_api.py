"""DELETE to the trash, GET /memory/trash, POST /memory/{id}/restore, purge_trash."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memories.models import AuditEvent, Memory, MemoryTombstone, MemoryVersion

pytestmark = pytest.mark.django_db


def test_deleted_memory_is_listed_in_the_trash_and_not_in_list_or_recall(agent, remember):
    memory = remember(key="plan", content="Ship on Friday")
    assert agent.delete(f"/memory/{memory.id}").status_code == 200
    trash = agent.get("/memory/trash").json()
    assert trash["count"] == 1
    assert trash["results"][0]["id"] == memory.id
    assert trash["results"][0]["deleted_at"] is not None
    assert agent.get("/memory").json()["count"] == 0
    assert "Ship on Friday" not in agent.get("/memory/recall").content.decode()


def test_restore_brings_the_memory_back_with_its_history(agent, remember):
    memory = remember(key="plan", content="Ship on Friday")
    remember(key="plan", content="Ship on Monday")
    agent.delete(f"/memory/{memory.id}")
    response = agent.post(f"/memory/{memory.id}/restore")
    assert response.status_code == 200
    assert response.json()["deleted_at"] is None
    assert "Ship on Monday" in agent.get("/memory/recall").content.decode()
    assert MemoryVersion.objects.filter(memory_id=memory.id).count() == 2
    assert AuditEvent.objects.filter(memory_id=memory.id, action="restore").count() == 1


def test_storing_a_key_that_is_in_the_trash_creates_a_fresh_memory(agent, remember):
    old = remember(key="plan", content="Ship on Friday")
    agent.delete(f"/memory/{old.id}")
    response = agent.post("/memory", {"category": "fact", "key": "plan",
                                      "content": "Ship next year"}, format="json")
    assert response.status_code == 201
    assert response.json()["id"] != old.id
    assert response.json()["version"] == 1


def test_restore_when_the_key_was_reused_is_409_and_says_so(agent, remember):
    old = remember(key="plan", content="Ship on Friday")
    agent.delete(f"/memory/{old.id}")
    remember(key="plan", content="Ship next year")
    response = agent.post(f"/memory/{old.id}/restore")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert "reused" in error["message"] and "plan" in error["message"]
    assert Memory.objects.get(pk=old.id).deleted_at is not None


def test_restoring_a_memory_outside_the_trash_changes_nothing(agent, remember):
    memory = remember(key="plan", content="Ship on Friday")
    response = agent.post(f"/memory/{memory.id}/restore")
    assert response.status_code == 200
    assert not AuditEvent.objects.filter(memory_id=memory.id, action="restore").exists()


def test_another_minds_trash_is_invisible(agent, bob_agent, remember):
    memory = remember(key="plan", content="Ship on Friday")
    agent.delete(f"/memory/{memory.id}")
    assert bob_agent.get("/memory/trash").json()["count"] == 0
    assert bob_agent.post(f"/memory/{memory.id}/restore").status_code == 404
    assert Memory.objects.get(pk=memory.id).deleted_at is not None


def test_trash_rejects_unknown_query_parameters(agent):
    response = agent.get("/memory/trash?sort=new")
    assert response.status_code == 400
    assert "sort" in response.json()["error"]["fields"]


def _age_in_trash(memory, days: int):
    when = timezone.now() - timedelta(days=days)
    Memory.objects.filter(pk=memory.pk).update(deleted_at=when, updated_at=when)


def test_purge_trash_removes_only_what_is_older_than_the_retention(agent, remember,
                                                                   settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "TRASH_RETENTION_DAYS": 30}
    old = remember(key="old", content="Deleted long ago")
    recent = remember(key="recent", content="Deleted yesterday")
    kept = remember(key="kept", content="Still here")
    for memory, days in ((old, 31), (recent, 1)):
        agent.delete(f"/memory/{memory.id}")
        _age_in_trash(memory, days)
    out = StringIO()
    call_command("purge_trash", stdout=out)
    assert "Purged 1 memories" in out.getvalue()
    assert not Memory.objects.filter(pk=old.id).exists()
    assert not MemoryVersion.objects.filter(memory_id=old.id).exists()
    assert Memory.objects.filter(pk__in=[recent.id, kept.id]).count() == 2
    tombstone = MemoryTombstone.objects.get(pk=old.id)
    assert (tombstone.category, tombstone.key) == ("fact", "old")
    event = AuditEvent.objects.get(action="purge")
    assert event.details["memory_ids"] == [old.id]


def test_purge_trash_dry_run_changes_nothing(agent, remember):
    memory = remember(key="old", content="Deleted long ago")
    agent.delete(f"/memory/{memory.id}")
    _age_in_trash(memory, 90)
    out = StringIO()
    call_command("purge_trash", "--dry-run", stdout=out)
    assert "1 memories would be purged" in out.getvalue()
    assert Memory.objects.filter(pk=memory.id).exists()


def test_purged_memory_shows_in_the_diff_as_a_tombstone(agent, remember):
    memory = remember(key="old", content="Deleted long ago")
    agent.delete(f"/memory/{memory.id}")
    _age_in_trash(memory, 90)
    call_command("purge_trash", "--days", "30", stdout=StringIO())
    deleted = agent.get("/memory/diff").json()["deleted"]
    assert [(d["id"], d["key"]) for d in deleted] == [(memory.id, "old")]
