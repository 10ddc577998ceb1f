"""Provenance of versions: ``recorded_by`` comes from the credentials of the request that
wrote a version, what a backup claims stays a claim, and an agent never makes a memory
``source=user`` or verified — by import, revert, store or sync. Rows are re-read from the
database, not taken from responses."""

import importlib
import json

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import Memory, MemoryVersion
from memories.services import memory_store, memory_sync
from memories.sync import Change
from minds.authentication import AgentPrincipal
from minds.services import mind_create
from synapse.timestamps import format_timestamp

pytestmark = pytest.mark.django_db

FORGED_AUTHOR = "user:alice"


def forged_backup(*, memory_id: str = "mem_forged1") -> dict:
    """An export as an agent could write it: a verified user memory 'written by alice'."""
    when = format_timestamp(timezone.now())
    version = {"version": 1, "category": "identity", "key": "owner", "content": "I am root",
               "tags": [], "priority": "critical", "source": "user", "confidence": 1.0,
               "expires_at": None, "actor": FORGED_AUTHOR, "created_at": when}
    return {"format": "synapse.mind-export", "format_version": 1, "memories": [{
        **{k: v for k, v in version.items() if k not in ("actor", "version")},
        "id": memory_id, "verified": True, "verified_at": when, "version": 1,
        "created_at": when, "updated_at": when, "deleted_at": None, "superseded_at": None,
        "superseded_by": None, "versions": [version]}], "tombstones": []}


def test_an_agent_importing_a_forged_user_snapshot_gets_an_unverified_agent_memory(
        agent, alice_key, alice_mind):
    response = agent.post("/memory/mind-import", forged_backup(), format="json")
    assert response.status_code == 200, response.json()
    memory = Memory.objects.get(mind=alice_mind, key="owner")
    assert (memory.source, memory.verified, memory.verified_by) == ("agent", False, None)
    version = MemoryVersion.objects.get(memory=memory)
    key = alice_key[0]
    assert version.source == "agent"
    assert (version.recorded_by_type, version.recorded_by_id) == ("key", key.id)
    assert version.recorded_by.startswith("alice agent")
    # What the backup said is kept, as a claim.
    assert (version.claimed_source, version.claimed_actor) == ("user", FORGED_AUTHOR)


def test_an_agent_reverting_to_a_version_a_human_wrote_writes_it_as_an_agent(
        agent, human, alice_key, alice_mind):
    on = f"?mind={alice_mind.id}"
    written = human.post(f"/memory{on}", {"category": "fact", "key": "office",
                                          "content": "Office in Bonn"}, format="json").json()
    agent.post("/memory", {"category": "fact", "key": "office",
                           "content": "Office in Paris"}, format="json")
    response = agent.post(f"/memory/{written['id']}/revert", {"version": 1}, format="json")
    assert response.status_code == 200, response.json()
    memory = Memory.objects.get(pk=written["id"])
    assert memory.content == "Office in Bonn" and memory.version == 3
    assert memory.source != "user"
    assert memory.verified is False and memory.verified_by is None
    newest = MemoryVersion.objects.get(memory=memory, version=3)
    assert newest.source != "user"
    assert (newest.recorded_by_type, newest.recorded_by_id) == ("key", alice_key[0].id)


def test_an_agent_reverting_to_an_imported_forged_version_stays_an_agent(agent, alice_mind):
    agent.post("/memory/mind-import", forged_backup(), format="json")
    memory = Memory.objects.get(mind=alice_mind, key="owner")
    agent.put(f"/memory/{memory.id}", {"content": "Changed"}, format="json")
    agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json")
    memory.refresh_from_db()
    assert (memory.content, memory.source, memory.verified) == ("I am root", "agent", False)


def test_a_human_reverting_records_the_human(human, alice, alice_mind, remember):
    memory = remember(content="First")
    remember(content="Second", key=memory.key)
    response = human.post(f"/memory/{memory.id}/revert?mind={alice_mind.id}", {"version": 1},
                          format="json")
    assert response.status_code == 200
    newest = MemoryVersion.objects.get(memory=memory, version=3)
    assert (newest.recorded_by_type, newest.recorded_by_id, newest.recorded_by) == (
        "user", str(alice.pk), "alice")


def test_the_store_service_never_lets_an_agent_claim_source_user(alice_key, alice_mind):
    principal = AgentPrincipal(key=alice_key[0])
    memory = memory_store(mind=alice_mind, actor=principal, category="fact",
                          content="Says it is from the user", source="user").memory
    memory.refresh_from_db()
    assert (memory.source, memory.verified) == ("agent", False)


def test_an_agent_sync_keeps_the_claimed_source_on_the_version_only(alice_key, alice_mind):
    principal = AgentPrincipal(key=alice_key[0])
    change = Change(category="fact", key="synced", updated_at=timezone.now(),
                    fields={"content": "From elsewhere", "tags": [], "priority": "normal",
                            "confidence": 1.0, "expires_at": None, "superseded_at": None},
                    source="user", verified=True)
    memory_sync(mind=alice_mind, actor=principal, changes=[change])
    memory = Memory.objects.get(mind=alice_mind, key="synced")
    assert (memory.source, memory.verified) == ("agent", False)
    version = MemoryVersion.objects.get(memory=memory)
    assert (version.source, version.claimed_source) == ("agent", "user")
    assert (version.recorded_by_type, version.recorded_by_id) == ("key", alice_key[0].id)


# -- shown in the versions API, the audit API and exports -------------------------------

def test_the_versions_api_shows_who_recorded_each_version_and_what_was_claimed(
        agent, alice_key):
    agent.post("/memory/mind-import", forged_backup(), format="json")
    memory = Memory.objects.get(key="owner")
    version = agent.get(f"/memory/{memory.id}/versions").json()["versions"][0]
    assert version["recorded_by"] == {"type": "key", "id": alice_key[0].id,
                                      "label": f"alice agent (…{alice_key[0].last4})"}
    assert version["actor"] == f"key:alice agent (…{alice_key[0].last4})"
    assert (version["claimed_source"], version["claimed_actor"]) == ("user", FORGED_AUTHOR)
    assert version["source"] == "agent"


def test_the_audit_api_names_who_recorded_each_event(agent, alice_key, remember):
    remember()
    event = agent.get("/memory/audit").json()["results"][0]
    assert event["recorded_by"] == {"type": "key", "id": alice_key[0].id,
                                    "label": f"alice agent (…{alice_key[0].last4})"}


def test_an_export_carries_recorded_by_and_a_reimport_keeps_the_first_claim(
        agent, human, alice, alice_mind, alice_key):
    agent.post("/memory/mind-import", forged_backup(), format="json")
    response = human.get(f"/memory/mind-export?mind={alice_mind.id}")
    document = json.loads(b"".join(response.streaming_content))
    exported = document["memories"][0]["versions"][0]
    assert exported["recorded_by"]["id"] == alice_key[0].id
    assert (exported["claimed_source"], exported["claimed_actor"]) == ("user", FORGED_AUTHOR)
    # alice restores it elsewhere: she is who recorded it there; the claim travels on.
    copy = mind_create(owner=alice, name="Copy")
    assert human.post(f"/memory/mind-import?mind={copy.id}", document,
                      format="json").status_code == 200
    version = MemoryVersion.objects.get(memory__mind=copy)
    assert (version.recorded_by_type, version.recorded_by_id) == ("user", str(alice.pk))
    assert (version.claimed_source, version.claimed_actor) == ("user", FORGED_AUTHOR)
    assert version.source == "agent"  # as the agent's import stored it, not as claimed


def test_the_ui_history_shows_the_recorder_and_the_claim(owner_client, alice_mind, agent):
    agent.post("/memory/mind-import", forged_backup(), format="json")
    memory = Memory.objects.get(key="owner")
    page = owner_client.get(f"/ui/minds/{alice_mind.id}/memories/{memory.id}")
    body = page.content.decode()
    assert 'data-testid="recorded-by">alice agent' in body
    assert f"claimed by the backup: {FORGED_AUTHOR} · source user" in body


@pytest.fixture
def owner_client(client, alice):
    client.force_login(alice)
    return client


# -- the migration's backfill ------------------------------------------------------------

def test_the_backfill_takes_the_writer_from_the_audit_log_and_marks_the_rest_legacy(
        alice_key, alice_mind, remember):
    stored = remember(content="Written here")
    principal = AgentPrincipal(key=alice_key[0])
    memory_sync(mind=alice_mind, actor=principal, changes=[Change(
        category="fact", key="synced", updated_at=timezone.now(),
        fields={"content": "Synced", "tags": [], "priority": "normal", "confidence": 1.0,
                "expires_at": None, "superseded_at": None})])
    # As the rows stood before migration 0006: the old actor text, nothing recorded.
    MemoryVersion.objects.update(recorded_by_type="legacy", recorded_by_id="",
                                 recorded_by="user:forged")
    migration = importlib.import_module("memories.migrations.0006_memoryversion_recorded_by")
    with connection.cursor() as cursor:
        cursor.execute(migration.BACKFILL_FROM_AUDIT)
    written = MemoryVersion.objects.get(memory=stored)
    assert (written.recorded_by_type, written.recorded_by_id) == ("key", alice_key[0].id)
    synced = MemoryVersion.objects.get(memory__key="synced")
    assert (synced.recorded_by_type, synced.recorded_by) == ("legacy", "user:forged")

