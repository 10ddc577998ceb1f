"""GET /memory/audit (every state change, filtered) and GET /memory/stats."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from memories.models import AuditEvent, Memory
from memories.services import memory_store

pytestmark = pytest.mark.django_db


def _actions(response) -> list[str]:
    return [event["action"] for event in response.json()["results"]]


def test_every_state_change_is_one_audit_event_with_who_and_which_memory(
        agent, human, alice_mind, remember):
    memory = remember(key="editor", content="Vim")
    remember(key="editor", content="Helix")
    on = f"?mind={alice_mind.id}"
    human.post(f"/memory/{memory.id}/verify{on}")
    human.post(f"/memory/{memory.id}/unverify{on}")
    agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json")
    agent.delete(f"/memory/{memory.id}")
    agent.post(f"/memory/{memory.id}/restore")
    response = agent.get(f"/memory/audit?memory={memory.id}")
    assert response.status_code == 200
    assert _actions(response) == ["restore", "delete", "revert", "unverify", "verify",
                                  "update", "store"]
    events = response.json()["results"]
    assert events[0]["actor"]["type"] == "key"
    assert events[3]["actor"] == {"type": "user", "id": str(alice_mind.owners().get().pk),
                                  "label": "alice"}
    assert all(event["memory_id"] == memory.id for event in events)


def test_audit_filters_by_action_since_and_limit(agent, remember):
    for i in range(5):
        remember(key=f"k{i}", content=f"Memory {i}")
    AuditEvent.objects.update(
        created_at=timezone.now() - timedelta(days=3))
    remember(key="k0", content="Changed")
    assert _actions(agent.get("/memory/audit?action=update")) == ["update"]
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert _actions(agent.get(f"/memory/audit?since={since}")) == ["update"]
    limited = agent.get("/memory/audit?action=store&limit=2").json()
    assert (limited["count"], len(limited["results"])) == (5, 2)


def test_a_failed_write_leaves_no_audit_event(agent, remember, alice_key):
    remember(key="a", content="A")
    before = AuditEvent.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        memory_store(mind=alice_key[0].mind, actor=None, category="fact", key="b",
                     content="B")
        raise RuntimeError("the request failed after the write")
    assert AuditEvent.objects.count() == before
    assert not Memory.objects.filter(key="b").exists()


def test_audit_of_key_issue_and_revoke_names_the_key_not_its_secret(human, alice_mind,
                                                                    alice_key):
    plaintext = alice_key[1]
    created = human.post(f"/minds/{alice_mind.id}/keys", {"name": "ci"}, format="json").json()
    human.delete(f"/minds/{alice_mind.id}/keys/{created['id']}")
    response = human.get(f"/memory/audit?mind={alice_mind.id}")
    assert {"key_issue", "key_revoke"} <= set(_actions(response))
    text = response.content.decode()
    assert plaintext not in text and created["key"] not in text


def test_audit_never_holds_credentials_content(agent):
    agent.post("/memory", {"category": "credentials", "key": "db", "content": "hunter2"},
               format="json")
    agent.post("/memory", {"category": "credentials", "key": "db", "content": "hunter3"},
               format="json")
    assert "hunter" not in agent.get("/memory/audit").content.decode()
    assert not any("hunter" in str(e.details) for e in AuditEvent.objects.all())


def test_audit_of_another_mind_is_invisible(agent, bob_agent, remember):
    memory = remember(key="a", content="A")
    response = bob_agent.get("/memory/audit")
    assert _actions(response) == ["key_issue"]
    assert bob_agent.get(f"/memory/audit?memory={memory.id}").json()["count"] == 0


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "since=yesterday", "who=me"])
def test_audit_with_bad_parameters_is_400(agent, query):
    assert agent.get(f"/memory/audit?{query}").status_code == 400


def test_stats_count_current_memories_by_category_priority_and_source(
        agent, human, alice_mind, remember):
    human.post(f"/memory?mind={alice_mind.id}", {"category": "identity", "key": "name",
                                                  "content": "Alice",
                                                  "priority": "critical"}, format="json")
    remember(category="preference", key="editor", content="Helix", priority="high")
    remember(category="fact", key="tool", content="From a tool", source="tool")
    remember(category="project", key="old", content="Old plan",
             expires_at=timezone.now() - timedelta(days=1))
    gone = remember(category="note", key="gone", content="Gone")
    agent.delete(f"/memory/{gone.id}")
    agent.post("/memory", {"category": "credentials", "key": "db", "content": "pw"},
               format="json")
    body = agent.get("/memory/stats").json()
    assert (body["total"], body["verified"], body["unverified"]) == (5, 1, 4)
    assert (body["expired"], body["in_trash"], body["superseded"], body["purged"]) == (
        1, 1, 0, 0)
    assert body["by_category"] == {"identity": 1, "preference": 1, "fact": 1, "project": 1,
                                   "skill": 0, "mistake": 0, "context": 0, "note": 0,
                                   "credentials": 1}
    assert body["by_priority"] == {"low": 0, "normal": 3, "high": 1, "critical": 1}
    assert body["by_source"] == {"user": 1, "agent": 3, "tool": 1, "system": 0}
    assert body["embeddings"]["pending"] == 4
    assert body["embeddings"]["done"] == 0


def test_stats_of_another_mind_are_its_own(bob_agent, remember):
    remember(key="a", content="A")
    assert bob_agent.get("/memory/stats").json()["total"] == 0
