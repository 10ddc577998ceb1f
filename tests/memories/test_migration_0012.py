"""Migration 0012 (provenance and parents of versions) on a database filled by the code
before it: every memory, version and audit event is kept with every old column unchanged;
versions and events get blank claims, versions the one before them as parent; and they read
as before over the API.

The test changes the schema, so it runs alone (``serial``, after the parallel run: make
test), on committed rows (``transaction=True``), and leaves the database migrated to the
latest migration whatever happens (the ``finally``)."""

from datetime import UTC, datetime, timedelta

import pytest

from memories.crypto import encrypt
from tests.memories.test_migration_0008 import applied, columns, kept, migrate, rows

pytestmark = [pytest.mark.serial, pytest.mark.django_db(transaction=True)]

# minds before memberships too: the old code's Mind has its single owner column.
BEFORE = [("memories", "0011_search_language"), ("minds", "0005_oauth_connection")]
NEW_VERSION_COLUMNS = {"agent", "agent_instance", "device", "parent", "reverted_from"}
NEW_EVENT_COLUMNS = {"agent", "agent_instance", "device"}
T0 = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)
# (category, key, contents of each version oldest first)
OLD_MEMORIES = [("preference", "editor", ["Vim", "Emacs", "Helix"]),
                ("fact", "office", ["Bonn"]),
                ("credentials", "db_password", ["hunter1", "hunter2"])]


def fill_before_provenance(old, mind) -> dict:
    """OLD_MEMORIES, their versions and audit events through the historical models of
    0011; their ids by key."""
    Memory_, Version_, Event_ = (old.get_model("memories", name) for name in
                                 ("Memory", "MemoryVersion", "AuditEvent"))
    mind = old.get_model("minds", "Mind").objects.get(pk=mind.pk)
    ids = {}
    for category, key, contents in OLD_MEMORIES:
        seal = encrypt if category == "credentials" else str
        memory = Memory_.objects.create(
            mind=mind, category=category, key=key, content=seal(contents[-1]), source="agent",
            confidence=0.7, version=len(contents), created_at=T0,
            updated_at=T0 + timedelta(hours=len(contents)),
            embedding_pending=category != "credentials")
        for version, content in enumerate(contents, start=1):
            Version_.objects.create(
                memory=memory, version=version, category=category, key=key,
                content=seal(content), tags=[], priority="normal", source="agent",
                confidence=0.7, recorded_by_type="key", recorded_by_id="7",
                recorded_by="alice agent", created_at=T0 + timedelta(hours=version))
            Event_.objects.create(mind=mind, actor_type="key", actor_id="7",
                                  actor_label="alice agent",
                                  action="store" if version == 1 else "update",
                                  memory_id=memory.pk, details={"version": version})
        ids[key] = memory.pk
    return ids


def test_migration_0012_keeps_every_version_and_event_with_blank_claims_and_parents(
        alice, alice_mind, agent):
    latest = set(applied("memories"))
    try:
        old = migrate(BEFORE)
        assert "0012_provenance" not in applied("memories")
        assert "agent" not in columns("memories_memoryversion")
        ids = fill_before_provenance(old, alice_mind)
        memories_before = rows("memories_memory")
        versions_before = rows("memories_memoryversion")
        events_before = {row_id: row for row_id, row in rows("memories_auditevent").items()
                         if row["mind_id"] == alice_mind.pk}
        assert len(versions_before) == 6
    finally:
        migrate()
    assert applied("memories") == latest

    assert rows("memories_memory") == memories_before
    versions_after = rows("memories_memoryversion")
    assert versions_after.keys() == versions_before.keys()
    for before, after in kept(versions_before, versions_after, NEW_VERSION_COLUMNS):
        parent = before["version"] - 1 or None
        assert (after["agent"], after["agent_instance"], after["device"], after["parent"],
                after["reverted_from"]) == ("", "", "", parent, None)
    events_after = rows("memories_auditevent")
    for _before, after in kept(events_before, events_after, NEW_EVENT_COLUMNS):
        assert (after["agent"], after["agent_instance"], after["device"]) == ("", "", "")

    # Read as before over the API, credentials included.
    versions = agent.get(f"/memory/{ids['editor']}/versions").json()["versions"]
    assert [(v["content"], v["parent"], v["agent"]) for v in versions] == [
        ("Vim", None, ""), ("Emacs", 1, ""), ("Helix", 2, "")]
    secret = agent.get(f"/memory/{ids['db_password']}/versions/1").json()
    assert (secret["content"], secret["parent"]) == ("hunter1", None)
    diff = agent.get(f"/memory/{ids['editor']}/diff?from=1&to=3").json()
    assert [change["field"] for change in diff["changes"]] == ["content"]
    assert agent.get(f"/memory/{ids['office']}").json()["content"] == "Bonn"
    events = agent.get("/memory/audit?action=update").json()["results"]
    assert {(e["memory_id"], e["agent"]) for e in events} == {
        (ids["editor"], ""), (ids["db_password"], "")}
    # A write after the migration records its parent and claims as any other.
    agent.put(f"/memory/{ids['editor']}", {"content": "Kakoune"}, format="json",
              HTTP_X_SYNAPSE_AGENT="codex")
    newest = agent.get(f"/memory/{ids['editor']}/versions/4").json()
    assert (newest["parent"], newest["agent"]) == (3, "codex")
