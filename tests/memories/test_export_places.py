"""Export and import with memory types, paths and episodes: the round trip keeps them
exactly (versions and the timeline's order included), exports made before them still
import, bad values are refused like any bad row, and ``path=`` exports part of a mind."""

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from memories import staging
from memories.models import Memory, MemoryTombstone, MemoryVersion
from memories.services import memory_delete, memory_purge_trash, memory_update
from memories.timeline import timeline
from minds.services import mind_create
from tests.memories.test_export_import import comparable, export_document

pytestmark = pytest.mark.django_db

OLD_EXPORT = Path(__file__).parent / "data" / "mind_export_before_types.json"
T0 = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def placed_mind(alice_mind, alice, remember):
    """Memories of every type on several paths: an episode that became a fact on another
    path (its versions hold both places), episodes in the trash and purged."""
    remember(category="identity", key="user_name", content="Alice")
    remember(category="context", key="turn_1", content="Asked about the launch",
             memory_type="episodic", path="projects/memory-os/chat", occurred_at=T0)
    remember(category="project", key="deploy", content="make deploy, then smoke tests",
             memory_type="procedural", path="projects/memory-os")
    remember(category="context", key="now", content="Reviewing PR 12", memory_type="working",
             path="projects/memory-os", expires_at=T0 + timedelta(days=400))
    moved = remember(category="fact", key="launch", content="Launch on the 3rd",
                     memory_type="episodic", path="projects/memory-os/chat",
                     occurred_at=T0 + timedelta(seconds=1))
    memory_update(memory=moved, actor=alice, memory_type="semantic",
                  path="projects/memory-os/decisions")
    trashed = remember(category="context", key="turn_2", content="Said hello",
                       memory_type="episodic", path="projects/memory-os/chat", occurred_at=T0)
    memory_delete(memory=trashed, actor=alice)
    purged = remember(category="note", key="old_chat", content="Gone",
                      memory_type="episodic", path="projects/memory-os/chat", occurred_at=T0)
    memory_delete(memory=purged, actor=alice)
    Memory.objects.filter(pk=purged.pk).update(deleted_at=timezone.now() - timedelta(days=60))
    memory_purge_trash(older_than=timezone.now() - timedelta(days=30))
    return alice_mind


def places(document: dict) -> dict:
    """(type, path, moment) of every memory and of each of its versions, by key."""
    return {item["key"]: ((item["memory_type"], item["path"], item["occurred_at"]),
                          [(v["memory_type"], v["path"], v["occurred_at"])
                           for v in item["versions"]])
            for item in document["memories"]}


def test_the_export_carries_type_path_and_moment_of_memories_versions_and_tombstones(
        placed_mind, human):
    document = export_document(human, placed_mind)
    found = places(document)
    assert found["turn_1"] == (("episodic", "projects/memory-os/chat",
                                "2026-05-01T12:00:00.123456Z"),
                               [("episodic", "projects/memory-os/chat",
                                 "2026-05-01T12:00:00.123456Z")])
    assert found["launch"] == (("semantic", "projects/memory-os/decisions", None), [
        ("episodic", "projects/memory-os/chat", "2026-05-01T12:00:01.123456Z"),
        ("semantic", "projects/memory-os/decisions", None)])
    assert found["user_name"] == (("identity", "", None), [("identity", "", None)])
    assert found["now"][0] == ("working", "projects/memory-os", None)
    assert [(t["key"], t["path"]) for t in document["tombstones"]] == [
        ("old_chat", "projects/memory-os/chat")]
    assert document["path"] == ""


def test_round_trip_into_an_empty_mind_keeps_type_path_and_moment_exactly(placed_mind, human,
                                                                         alice):
    original = export_document(human, placed_mind, include_credentials="true")
    copy = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={copy.id}", original, format="json")
    assert response.status_code == 200, response.json()
    restored = export_document(human, copy, include_credentials="true")
    assert places(restored) == places(original)
    assert comparable(restored) == comparable(original)
    assert MemoryTombstone.objects.get(mind=copy).path == "projects/memory-os/chat"


def test_merge_import_of_a_new_export_moves_memories_to_the_exported_place(placed_mind, human,
                                                                          bob, bob_mind,
                                                                          remember):
    document = export_document(human, placed_mind)
    older = remember(mind=bob_mind, category="fact", key="launch", content="Launch in June")
    Memory.objects.filter(pk=older.pk).update(updated_at=T0 - timedelta(days=30))
    from tests.conftest import jwt_client

    body = jwt_client(bob).post(f"/memory/mind-import?mind={bob_mind.id}", document,
                                format="json").json()
    assert body["mode"] == "merge"
    merged = {m.key: (m.memory_type, m.path, m.occurred_at)
              for m in Memory.objects.for_mind(bob_mind).current()}
    assert merged["launch"] == ("semantic", "projects/memory-os/decisions", None)
    assert merged["turn_1"] == ("episodic", "projects/memory-os/chat", T0)


# -- The timeline's order ---------------------------------------------------------------------

@pytest.fixture
def conversation(alice_mind, remember):
    """Turns of one conversation, most of them at one moment, written in turn order; the
    first one's created_at is then made the latest (an order other than the write order)."""
    path = "talks/planning"
    turns = [remember(category="context", key=f"turn_{n}", content=f"Turn {n}",
                      memory_type="episodic", path=path,
                      occurred_at=T0 if n != 0 else T0 - timedelta(minutes=5))
             for n in range(6)]
    Memory.objects.filter(pk=turns[1].pk).update(created_at=timezone.now() + timedelta(hours=1))
    return path


def timeline_keys(mind, path) -> list[str]:
    return [memory.key for memory in timeline(mind, path).timeline_order()]


def test_the_export_lists_memories_in_write_order(alice_mind, conversation, human):
    document = export_document(human, alice_mind)
    assert [item["key"] for item in document["memories"]] == [f"turn_{n}" for n in range(6)]


def test_an_import_keeps_the_order_of_episodes_that_share_a_moment(alice_mind, conversation,
                                                                  human, alice, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_SIZE", 2)  # written in three batches
    expected = timeline_keys(alice_mind, conversation)
    assert expected == [f"turn_{n}" for n in range(6)]
    copy = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={copy.id}",
                          export_document(human, alice_mind), format="json")
    # The original still holds its ids, so the copy's are new: compare keys.
    assert response.json()["ids_reassigned"] == 6
    assert timeline_keys(copy, conversation) == expected
    seqs = list(Memory.objects.for_mind(copy).order_by("seq").values_list("key", flat=True))
    assert seqs == expected


# -- Exports made before types and paths -----------------------------------------------------

def old_export() -> dict:
    return json.loads(OLD_EXPORT.read_text())


def test_an_export_made_before_types_has_none_of_the_new_fields():
    text = OLD_EXPORT.read_text()
    assert '"memory_type"' not in text and '"path"' not in text and "occurred_at" not in text


def test_an_export_made_before_types_restores_with_derived_types_at_the_root(human, alice):
    document = old_export()
    copy = mind_create(owner=alice, name="From an old backup")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"mode": "restore", "memories": 7, "versions": 8,
                               "tombstones": 1, "skipped_redacted": 0, "ids_reassigned": 0}
    memories = Memory.objects.for_mind(copy)
    assert {(m.key, m.memory_type) for m in memories} == {
        ("user_name", "identity"), ("editor", "semantic"), ("launch", "semantic"),
        ("db_password", "semantic"), ("scratch", "semantic"), ("office_old", "semantic"),
        ("office", "semantic")}
    assert {(m.path, m.occurred_at) for m in memories} == {("", None)}
    versions = MemoryVersion.objects.filter(memory__mind=copy)
    assert {(v.key, v.memory_type) for v in versions} == {
        (m.key, m.memory_type) for m in memories}
    assert {(v.path, v.occurred_at) for v in versions} == {("", None)}
    assert MemoryTombstone.objects.get(mind=copy).path == ""
    # Everything the old export said is kept as it was.
    restored = export_document(human, copy, include_credentials="true")
    for item in restored["memories"]:
        for record in (item, *item["versions"]):
            for name in ("memory_type", "path", "occurred_at"):
                record.pop(name)
        # Newer than this export too (migration 0012): blank claims, each version's parent
        # the one before it.
        for version in item["versions"]:
            assert version.pop("parent") == (version["version"] - 1 or None)
            assert [version.pop(name) for name in ("agent", "agent_instance", "device",
                                                   "reverted_from")] == ["", "", "", None]
    for tombstone in restored["tombstones"]:
        tombstone.pop("path")
    assert comparable(restored) == comparable(document)


def test_an_export_made_before_types_merges_without_moving_what_is_here(human, alice_mind,
                                                                       alice, remember):
    here = remember(category="preference", key="editor", content="Nano",
                    memory_type="procedural", path="tools/editors")
    Memory.objects.filter(pk=here.pk).update(updated_at=T0 - timedelta(days=400))
    body = human.post(f"/memory/mind-import?mind={alice_mind.id}", old_export(),
                      format="json").json()
    assert (body["mode"], body["updated"]) == ("merge", 1)
    editor = Memory.objects.for_mind(alice_mind).get(key="editor")
    assert (editor.content, editor.memory_type, editor.path) == ("Helix", "procedural",
                                                                 "tools/editors")
    new = Memory.objects.for_mind(alice_mind).get(key="user_name")
    assert (new.memory_type, new.path, new.occurred_at) == ("identity", "", None)


# -- Refusals -------------------------------------------------------------------------------

def document_with(**fields) -> dict:
    memory = {"id": "mem_placed000000000001", "category": "context", "key": "turn",
              "content": "Hello", "tags": [], "priority": "normal", "source": "user",
              "verified": True, "confidence": 1.0, "version": 1,
              "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
              "memory_type": "episodic", "path": "talks/one",
              "occurred_at": "2026-01-01T00:00:00Z"}
    version = {key: memory[key] for key in ("category", "key", "content", "tags", "priority",
                                            "source", "confidence", "memory_type", "path",
                                            "occurred_at", "created_at")}
    version.update(version=1, actor="user:alice")
    memory["versions"] = [version]
    document = {"format": "synapse.mind-export", "format_version": 1,
                "memories": [memory],
                "tombstones": [{"id": "mem_placed000000000002", "category": "note",
                                "key": "gone", "path": "talks",
                                "deleted_at": "2026-01-01T00:00:00Z",
                                "updated_at": "2026-01-01T00:00:00Z"}]}
    for place, value in fields.items():
        target, _, name = place.rpartition(".")
        record = {"memory": memory, "version": version,
                  "tombstone": document["tombstones"][0]}[target]
        if value is ...:
            record.pop(name)
        else:
            record[name] = value
    return document


@pytest.mark.parametrize("change, field", [
    ({"memory.path": "talks//one"}, "memories[0].path"),
    ({"memory.path": "talks/../secrets"}, "memories[0].path"),
    ({"memory.path": "Talks/One Two"}, "memories[0].path"),
    ({"memory.path": 7}, "memories[0].path"),
    ({"memory.memory_type": "dream"}, "memories[0].memory_type"),
    ({"memory.occurred_at": ...}, "memories[0].occurred_at"),
    ({"memory.occurred_at": None}, "memories[0].occurred_at"),
    ({"memory.occurred_at": "soon"}, "memories[0].occurred_at"),
    ({"memory.memory_type": "semantic"}, "memories[0].occurred_at"),
    ({"memory.memory_type": ...}, "memories[0].occurred_at"),
    ({"version.path": "/a/./b"}, "memories[0].versions[0].path"),
    ({"version.memory_type": "procedural"}, "memories[0].versions[0].occurred_at"),
    ({"tombstone.path": "x" * 300}, "tombstones[0].path"),
])
def test_a_bad_type_path_or_moment_in_an_import_is_400_naming_it_and_writes_nothing(
        human, alice, change, field):
    copy = mind_create(owner=alice, name="Refused")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document_with(**change),
                          format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Memory.objects.for_mind(copy).exists()
    assert not MemoryTombstone.objects.filter(mind=copy).exists()


def test_the_document_of_the_refusal_tests_imports_when_left_as_it_is(human, alice):
    copy = mind_create(owner=alice, name="Accepted")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document_with(),
                          format="json")
    assert response.status_code == 200, response.json()
    turn = Memory.objects.for_mind(copy).get()
    assert (turn.memory_type, turn.path, turn.occurred_at) == (
        "episodic", "talks/one", datetime(2026, 1, 1, tzinfo=UTC))


def test_paths_in_an_import_are_taken_in_their_normal_form(human, alice):
    document = document_with(**{"memory.path": " /Talks/One/ ", "version.path": "TALKS",
                                "tombstone.path": "Talks/"})
    copy = mind_create(owner=alice, name="Normalised")
    assert human.post(f"/memory/mind-import?mind={copy.id}", document,
                      format="json").status_code == 200
    assert Memory.objects.for_mind(copy).get().path == "talks/one"
    assert MemoryVersion.objects.get(memory__mind=copy).path == "talks"
    assert MemoryTombstone.objects.get(mind=copy).path == "talks"


# -- Part of a mind: ?path= -------------------------------------------------------------------

@pytest.fixture
def paths_mind(alice_mind, alice, remember):
    for key, path in [("root", ""), ("a", "projects/a"), ("a_b", "projects/a/b"),
                      ("ab", "projects/ab"), ("other", "other")]:
        remember(key=key, content=f"At {path or 'the root'}", path=path)
    for key, path in [("gone_a", "projects/a/b"), ("gone_ab", "projects/ab")]:
        memory = remember(key=key, content="Purged", path=path)
        memory_delete(memory=memory, actor=alice)
        Memory.objects.filter(pk=memory.pk).update(deleted_at=T0)
    memory_purge_trash(older_than=timezone.now() - timedelta(days=30))
    trashed = remember(key="trashed_a", content="In the trash", path="projects/a")
    memory_delete(memory=trashed, actor=alice)
    return alice_mind


def test_an_export_of_a_path_holds_that_path_and_below_it(paths_mind, human):
    document = export_document(human, paths_mind, path="projects/a")
    assert document["path"] == "projects/a"
    assert sorted(item["key"] for item in document["memories"]) == ["a", "a_b", "trashed_a"]
    assert [item["key"] for item in document["tombstones"]] == ["gone_a"]
    whole = export_document(human, paths_mind)
    assert len(whole["memories"]) == 6 and len(whole["tombstones"]) == 2


def test_a_path_is_taken_in_its_normal_form_and_a_bad_one_is_400(paths_mind, human):
    document = export_document(human, paths_mind, path="/Projects/A/")
    assert sorted(item["key"] for item in document["memories"]) == ["a", "a_b", "trashed_a"]
    response = human.get(f"/memory/mind-export?mind={paths_mind.id}&path=projects//a")
    assert response.status_code == 400
    assert "path" in response.json()["error"]["fields"]


def test_the_csv_export_has_type_path_and_moment_and_takes_a_path(paths_mind, agent,
                                                                   remember):
    remember(category="context", key="turn", content="Hi", memory_type="episodic",
             path="projects/a/chat", occurred_at=T0)
    response = agent.get("/mind/export?format=csv&path=projects/a")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert sorted((row["key"], row["memory_type"], row["path"], row["occurred_at"])
                  for row in rows) == [
        ("a", "semantic", "projects/a", ""), ("a_b", "semantic", "projects/a/b", ""),
        ("turn", "episodic", "projects/a/chat", "2026-05-01T12:00:00.123456Z")]
