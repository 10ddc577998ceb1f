"""GET /memory/diff and POST /memory/sync: the cursor never skips, conflicts resolve
deterministically, deletes win over older updates, nothing deleted comes back."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from memories.models import AuditEvent, Memory
from memories.recall import REDACTED
from memories.services import memory_store
from minds.authentication import AgentPrincipal

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def item(key: str, content: str, minutes: int, **fields) -> dict:
    return {"category": "fact", "key": key, "content": content, "updated_at": at(minutes),
            **fields}


def live(mind) -> dict:
    return {(m.category, m.key): m for m in Memory.objects.for_mind(mind).alive()}


# -- The cursor -------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_first_diff_returns_everything_as_added_and_a_cursor(agent, remember):
    remember(key="a", content="Alpha")
    remember(key="b", content="Beta")
    body = agent.get("/memory/diff").json()
    assert sorted(m["key"] for m in body["added"]) == ["a", "b"]
    assert (body["updated"], body["deleted"], body["has_more"]) == ([], [], False)
    assert body["cursor"].startswith("tx")
    again = agent.get(f"/memory/diff?since={body['cursor']}").json()
    assert (again["added"], again["updated"], again["deleted"]) == ([], [], [])


@pytest.mark.django_db(transaction=True)
def test_diff_sorts_changes_into_added_updated_and_tombstones(agent, remember):
    kept = remember(key="kept", content="Kept")
    edited = remember(key="edited", content="Before")
    gone = remember(key="gone", content="Gone")
    cursor = agent.get("/memory/diff").json()["cursor"]
    remember(key="edited", content="After")
    agent.delete(f"/memory/{gone.id}")
    new = remember(key="new", content="New")
    body = agent.get(f"/memory/diff?since={cursor}").json()
    assert [m["id"] for m in body["added"]] == [new.id]
    assert [(m["id"], m["content"], m["version"]) for m in body["updated"]] == [
        (edited.id, "After", 2)]
    assert body["deleted"] == [{"id": gone.id, "category": "fact", "key": "gone", "path": "",
                                "deleted_at": body["deleted"][0]["deleted_at"],
                                "updated_at": body["deleted"][0]["updated_at"]}]
    assert kept.id not in str(body)


@pytest.mark.django_db(transaction=True)
def test_cursor_never_skips_a_transaction_that_commits_after_the_diff(agent, alice_key):
    """A slow writer starts before the diff and commits after it; a fast one starts after
    the slow one and commits before the diff. The next diff must carry the slow write."""
    principal = AgentPrincipal(key=alice_key[0])
    mind = alice_key[0].mind
    cursor = agent.get("/memory/diff").json()["cursor"]
    slow_wrote, diff_done = threading.Event(), threading.Event()
    errors = []

    def slow_writer():
        try:
            with transaction.atomic():
                memory_store(mind=mind, actor=principal, category="fact", key="slow",
                             content="Committed late")
                slow_wrote.set()
                assert diff_done.wait(30)
        except Exception as error:  # noqa: BLE001 - surfaced in the main thread
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert slow_wrote.wait(30)
    memory_store(mind=mind, actor=principal, category="fact", key="fast",
                 content="Committed early")
    first = agent.get(f"/memory/diff?since={cursor}").json()
    assert [m["key"] for m in first["added"]] == ["fast"]
    diff_done.set()
    thread.join(30)
    assert not errors
    second = agent.get(f"/memory/diff?since={first['cursor']}").json()
    assert "slow" in [m["key"] for m in second["added"]]


@pytest.mark.django_db(transaction=True)
def test_paged_diff_delivers_every_memory_once_in_order(agent, remember):
    ids = {remember(key=f"k{i:02d}", content=f"Memory {i}").id for i in range(25)}
    seen, cursor, pages = [], "", 0
    while True:
        body = agent.get(f"/memory/diff?limit=10&since={cursor}").json()
        seen += [m["id"] for m in body["added"]]
        cursor, pages = body["cursor"], pages + 1
        if not body["has_more"]:
            break
    assert pages == 3
    assert sorted(seen) == sorted(ids)


@pytest.mark.django_db
@pytest.mark.parametrize("since", ["yesterday", "tx", "tx12:bob", "tx-1", "2026-13-01T00:00Z"])
def test_diff_with_a_malformed_cursor_is_400(agent, since):
    response = agent.get(f"/memory/diff?since={since}")
    assert response.status_code == 400
    assert "since" in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_diff_accepts_a_timestamp(agent, remember):
    remember(key="a", content="Alpha")
    future = agent.get("/memory/diff?since=2999-01-01T00:00:00Z").json()
    assert future["added"] == [] and future["cursor"].startswith("tx")
    assert len(agent.get("/memory/diff?since=0").json()["added"]) == 1


@pytest.mark.django_db
def test_diff_never_shows_another_minds_memories(agent, bob_agent, remember):
    remember(key="a", content="Alpha")
    assert bob_agent.get("/memory/diff").json()["added"] == []


@pytest.mark.django_db
def test_diff_redacts_credentials_unless_a_human_asks(agent, human, alice_mind):
    agent.post("/memory", {"category": "credentials", "key": "db", "content": "hunter2"},
               format="json")
    body = agent.get("/memory/diff").json()
    assert body["added"][0]["content"] == REDACTED
    assert body["added"][0]["content_redacted"] is True
    assert "hunter2" not in str(body)
    assert agent.get("/memory/diff?include_credentials=true").status_code == 403
    revealed = human.get(f"/memory/diff?mind={alice_mind.id}&include_credentials=true").json()
    assert revealed["added"][0]["content"] == "hunter2"


# -- Sync -------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_sync_accepts_the_diff_shape_and_returns_counts(agent, alice_mind):
    body = {"added": [item("a", "Alpha", 1), item("b", "Beta", 1)],
            "updated": [item("c", "Gamma", 2)],
            "deleted": [{"category": "fact", "key": "zzz", "deleted_at": at(3)}],
            "cursor": "tx1", "has_more": False}
    response = agent.post("/memory/sync", body, format="json")
    assert response.status_code == 200
    assert response.json() == {"added": 3, "updated": 0, "deleted": 0, "unchanged": 1,
                               "stale": 0, "skipped_redacted": 0, "conflicts": 0} | {
        "conflicts": []}
    memories = live(alice_mind)
    assert memories["fact", "c"].content == "Gamma"
    assert memories["fact", "a"].updated_at == T0 + timedelta(minutes=1)


@pytest.mark.django_db
def test_sync_accepts_the_memories_shape_with_deletions_inside(agent, alice_mind, remember):
    remember(key="old", content="Old")
    body = {"memories": [item("a", "Alpha", 1),
                         {"category": "fact", "key": "old", "updated_at": at(99_999_999),
                          "deleted_at": at(99_999_999)}]}
    response = agent.post("/memory/sync", body, format="json")
    assert (response.json()["added"], response.json()["deleted"]) == (1, 1)
    assert set(live(alice_mind)) == {("fact", "a")}


@pytest.mark.django_db
def test_sync_is_idempotent(agent, alice_mind):
    body = {"memories": [item("a", "Alpha", 1), item("b", "Beta", 2)]}
    agent.post("/memory/sync", body, format="json")
    versions = {key: m.version for key, m in live(alice_mind).items()}
    second = agent.post("/memory/sync", body, format="json").json()
    assert (second["added"], second["updated"], second["unchanged"]) == (0, 0, 2)
    assert {key: m.version for key, m in live(alice_mind).items()} == versions


@pytest.mark.django_db
def test_later_update_wins_and_earlier_one_is_ignored(agent, alice_mind):
    agent.post("/memory/sync", {"memories": [item("a", "Middle", 5)]}, format="json")
    older = agent.post("/memory/sync", {"memories": [item("a", "Older", 4)]}, format="json")
    assert older.json()["stale"] == 1
    newer = agent.post("/memory/sync", {"memories": [item("a", "Newer", 6)]}, format="json")
    assert newer.json()["updated"] == 1
    assert live(alice_mind)["fact", "a"].content == "Newer"


@pytest.mark.django_db
def test_equal_timestamps_are_broken_the_same_way_in_either_order(agent, bob_agent,
                                                                  alice_mind, bob_mind):
    one, two = item("a", "One", 5), item("a", "Two", 5)
    agent.post("/memory/sync", {"memories": [one]}, format="json")
    agent.post("/memory/sync", {"memories": [two]}, format="json")
    bob_agent.post("/memory/sync", {"memories": [two]}, format="json")
    bob_agent.post("/memory/sync", {"memories": [one]}, format="json")
    assert live(alice_mind)["fact", "a"].content == live(bob_mind)["fact", "a"].content


@pytest.mark.django_db
def test_delete_wins_over_an_older_update(agent, alice_mind):
    agent.post("/memory/sync", {"memories": [item("a", "Alpha", 1)]}, format="json")
    agent.post("/memory/sync", {"deleted": [{"category": "fact", "key": "a",
                                             "deleted_at": at(5)}]}, format="json")
    late_copy = agent.post("/memory/sync", {"updated": [item("a", "Alpha edited", 3)]},
                           format="json").json()
    assert late_copy["stale"] == 1
    assert ("fact", "a") not in live(alice_mind)


@pytest.mark.django_db
def test_delete_wins_a_tie_with_an_update(agent, alice_mind):
    agent.post("/memory/sync", {"memories": [item("a", "Alpha", 5)]}, format="json")
    agent.post("/memory/sync", {"deleted": [{"category": "fact", "key": "a",
                                             "deleted_at": at(5)}]}, format="json")
    assert ("fact", "a") not in live(alice_mind)


@pytest.mark.django_db
def test_an_older_copy_never_resurrects_a_deleted_memory(agent, remember, alice_mind):
    memory = remember(key="a", content="Alpha")
    agent.delete(f"/memory/{memory.id}")
    stale = {"memories": [item("a", "Alpha", -60 * 24 * 365, id=memory.id)]}
    assert agent.post("/memory/sync", stale, format="json").json()["stale"] == 1
    assert ("fact", "a") not in live(alice_mind)


@pytest.mark.django_db
def test_an_update_newer_than_the_delete_brings_the_memory_back(agent, remember, alice_mind):
    memory = remember(key="a", content="Alpha")
    agent.delete(f"/memory/{memory.id}")
    newer = {"memories": [item("a", "Alpha again", 60 * 24 * 365 * 50, id=memory.id)]}
    assert agent.post("/memory/sync", newer, format="json").json()["added"] == 1
    restored = live(alice_mind)["fact", "a"]
    assert (restored.id, restored.content) == (memory.id, "Alpha again")


@pytest.mark.django_db
def test_agent_sync_never_makes_a_memory_verified(agent, alice_mind):
    body = {"memories": [item("a", "Alpha", 1, verified=True, source="user")]}
    agent.post("/memory/sync", body, format="json")
    memory = live(alice_mind)["fact", "a"]
    assert (memory.verified, memory.source) == (False, "agent")


@pytest.mark.django_db
def test_human_sync_keeps_the_verified_flag(human, alice_mind, alice):
    body = {"memories": [item("a", "Alpha", 1, verified=True, source="user")]}
    human.post(f"/memory/sync?mind={alice_mind.id}", body, format="json")
    memory = live(alice_mind)["fact", "a"]
    assert (memory.verified, memory.source, memory.verified_by) == (True, "user", alice)


@pytest.mark.django_db
def test_agent_sync_over_a_verified_memory_leaves_it_unverified(agent, human, alice_mind):
    human.post(f"/memory?mind={alice_mind.id}", {"category": "fact", "key": "a",
                                                  "content": "Alpha"}, format="json")
    agent.post("/memory/sync", {"memories": [item("a", "Changed", 60 * 24 * 365 * 50,
                                                  verified=True)]}, format="json")
    memory = live(alice_mind)["fact", "a"]
    assert (memory.content, memory.verified) == ("Changed", False)


@pytest.mark.django_db
def test_sync_never_touches_another_minds_memory_with_the_same_id(agent, bob_agent,
                                                                  bob_mind, alice_mind):
    bobs = bob_agent.post("/memory", {"category": "fact", "key": "a", "content": "Bob's"},
                          format="json").json()["id"]
    agent.post("/memory/sync", {"memories": [item("a", "Alice's", 60 * 24 * 365 * 50,
                                                  id=bobs)]}, format="json")
    assert Memory.objects.get(pk=bobs).content == "Bob's"
    assert live(alice_mind)["fact", "a"].id != bobs
    agent.post("/memory/sync", {"deleted": [{"id": bobs, "category": "fact", "key": "zz",
                                             "deleted_at": at(60 * 24 * 365 * 50)}]},
               format="json")
    assert Memory.objects.get(pk=bobs).deleted_at is None


@pytest.mark.django_db
def test_sync_skips_redacted_credentials(agent, alice_mind):
    body = {"memories": [{"category": "credentials", "key": "db", "content": REDACTED,
                          "content_redacted": True, "updated_at": at(1)}]}
    assert agent.post("/memory/sync", body, format="json").json()["skipped_redacted"] == 1
    assert live(alice_mind) == {}


@pytest.mark.django_db
def test_sync_is_one_audit_event_naming_the_memories(agent, alice_mind):
    agent.post("/memory/sync", {"memories": [item("a", "Alpha", 1)]}, format="json")
    event = AuditEvent.objects.get(action="sync")
    assert event.details["added"] == 1
    assert event.details["memory_ids"] == [live(alice_mind)["fact", "a"].id]


@pytest.mark.django_db
@pytest.mark.parametrize("body, field", [
    ({}, "non_field_errors"),
    ({"memories": [{"category": "fact", "key": "a", "content": "x"}]}, "memories[0].updated_at"),
    ({"memories": [{"category": "fact", "key": "a", "updated_at": at(1)}]},
     "memories[0].content"),
    ({"memories": [item("a", "x", 1, colour="red")]}, "memories"),
    ({"memories": [item("a", "x", 1, category="gossip")]}, "memories"),
    ({"memories": [item("a", "x", 1, updated_at="last week")]}, "memories"),
    ({"memories": "all of them"}, "memories"),
    ({"memories": [], "extra": 1}, "extra"),
])
def test_malformed_sync_is_400_and_writes_nothing(agent, alice_mind, body, field):
    response = agent.post("/memory/sync", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in (error.get("fields") or {}) or field == "non_field_errors"
    assert not Memory.objects.for_mind(alice_mind).exists()


@pytest.mark.django_db
def test_sync_over_the_cap_is_413_saying_how_to_split_it(agent, alice_mind):
    body = {"memories": [item(f"k{i}", "x", 1) for i in range(5001)]}
    response = agent.post("/memory/sync", body, format="json")
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large" and "at most 5000" in error["message"]
    assert not Memory.objects.for_mind(alice_mind).exists()


@pytest.mark.django_db
def test_sync_stops_reading_at_the_first_change_over_the_cap(agent, alice_mind, monkeypatch):
    # The body breaks off after the fourth change: read whole it would be a 400 (bad JSON).
    # Read as it arrives, the fourth change is over a cap of 3 and the answer is a 413.
    monkeypatch.setattr("memories.api.serializers.transfer.SYNC_MAX_CHANGES", 3)
    changes = ",".join(json.dumps(item(f"k{i}", "x", 1)) for i in range(4))
    response = agent.post("/memory/sync", '{"memories": [' + changes + ', {"broken',
                          content_type="application/json")
    assert response.status_code == 413
    assert not Memory.objects.for_mind(alice_mind).exists()


@pytest.mark.django_db
def test_sync_body_is_read_in_pieces_and_applied_in_batches(agent, alice_mind, monkeypatch):
    from memories import staging
    from memories.services import transfer
    from synapse import parsers

    monkeypatch.setattr(staging, "BATCH_SIZE", 2)
    monkeypatch.setattr(parsers, "READ_SIZE", 256)
    batches, reads = [], []
    apply_changes, read = transfer._apply_changes, parsers._CappedReader.read
    monkeypatch.setattr(transfer, "_apply_changes", lambda **kw: (
        batches.append(len(kw["changes"])), apply_changes(**kw))[1])
    monkeypatch.setattr(parsers._CappedReader, "read", lambda self, size=256: (
        reads.append(size), read(self, size))[1])
    body = {"memories": [item(f"k{i}", "x" * 100, i) for i in range(5)]}
    assert agent.post("/memory/sync", body, format="json").status_code == 200
    assert batches == [2, 2, 1]
    assert len(reads) > 3 and max(reads) <= 256
    assert sorted(live(alice_mind)) == [("fact", f"k{i}") for i in range(5)]


@pytest.mark.django_db
def test_sync_broken_off_half_way_writes_nothing(agent, alice_mind, monkeypatch):
    from memories import staging

    monkeypatch.setattr(staging, "BATCH_SIZE", 2)
    changes = ",".join(json.dumps(item(f"k{i}", "x", 1)) for i in range(5))
    response = agent.post("/memory/sync", '{"memories": [' + changes + ', {"broken',
                          content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert not Memory.objects.for_mind(alice_mind).exists()
    assert not AuditEvent.objects.filter(mind=alice_mind, action="sync").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("extra", [{"cursor": ["tx1"]}, {"has_more": "perhaps"},
                                   {"cursor": None}, {"colour": "blue"},
                                   {"memories": {"a": 1}}])
def test_sync_members_besides_the_changes_are_checked_too(agent, alice_mind, extra):
    body = {"memories": [item("a", "x", 1)], **extra}
    response = agent.post("/memory/sync", body, format="json")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == list(extra)
    assert not Memory.objects.for_mind(alice_mind).exists()


@pytest.mark.django_db
def test_sync_with_a_bad_change_after_good_ones_names_it_and_writes_nothing(agent,
                                                                            alice_mind):
    body = {"memories": [item("a", "x", 1), item("b", "y", 2),
                         {"category": "nonsense", "key": "c", "content": "z",
                          "updated_at": at(3)}]}
    response = agent.post("/memory/sync", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "memories": {"2": {"category": ['"nonsense" is not a valid choice.']}}}
    assert not Memory.objects.for_mind(alice_mind).exists()


@pytest.mark.django_db
def test_read_only_key_cannot_sync(reader):
    response = reader.post("/memory/sync", {"memories": [item("a", "x", 1)]}, format="json")
    assert response.status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_diff_posted_as_is_to_another_instance_makes_it_a_copy(agent, bob_agent, remember,
                                                                 alice_mind, bob_mind):
    remember(key="a", content="Alpha", tags=["x"], priority="high")
    remember(key="b", content="Beta")
    gone = remember(key="gone", content="Gone")
    agent.delete(f"/memory/{gone.id}")
    first = agent.get("/memory/diff").json()
    assert bob_agent.post("/memory/sync", first, format="json").json()["added"] == 2
    remember(key="a", content="Alpha 2", tags=["x"], priority="high")
    second = agent.get(f"/memory/diff?since={first['cursor']}").json()
    assert bob_agent.post("/memory/sync", second, format="json").json()["updated"] == 1

    def view(mind):
        return {key: (m.content, m.tags, m.priority, m.updated_at)
                for key, m in live(mind).items()}

    assert view(bob_mind) == view(alice_mind)
