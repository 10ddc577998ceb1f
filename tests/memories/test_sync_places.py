"""Diff and sync with memory types, paths and episodes (docs/lifecycle.md, "Type, path and
moment"): a change that carries them applies them, one that leaves them out keeps what is
here, bad ones are refused naming the item with nothing written, ties break the same way
on both sides, and ``GET /memory/diff?path=`` keeps a diff to one part of the mind — its
tombstones and, after a cursor, the memories that moved out — with every change once."""

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memories import sync
from memories.models import AuditEvent, Memory, MemoryVersion
from memories.services import memory_delete, memory_purge_trash, memory_update
from synapse.timestamps import format_timestamp

T0 = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
WIRE_T0 = "2026-05-01T12:00:00.123456Z"


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def item(key: str, minutes: int, content: str = "Something", **fields) -> dict:
    return {"category": "note", "key": key, "content": content, "updated_at": at(minutes),
            **fields}


def place(memory: Memory) -> tuple:
    memory.refresh_from_db()
    return memory.memory_type, memory.path, memory.occurred_at


def version_places(memory: Memory) -> list[tuple]:
    return list(MemoryVersion.objects.filter(memory=memory).order_by("version")
                .values_list("version", "memory_type", "path", "occurred_at"))


def sync_ok(client, body: dict) -> dict:
    response = client.post("/memory/sync", body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def by_key(mind) -> dict:
    return {memory.key: memory for memory in Memory.objects.for_mind(mind).alive()}


# -- A change with a place applies it --------------------------------------------------------

@pytest.mark.django_db
def test_new_memories_take_the_type_path_and_moment_they_carry(agent, alice_mind):
    body = sync_ok(agent, {"memories": [
        item("turn", 1, memory_type="episodic", path="talks/one", occurred_at=WIRE_T0),
        item("deploy", 1, memory_type="procedural", path="projects/a"),
        item("task", 1, memory_type="working", path="projects/a", expires_at=None),
        item("old_peer", 1),  # an instance older than types sends none of them
        {**item("me", 1), "category": "identity"},
    ]})
    assert body["added"] == 5
    memories = by_key(alice_mind)
    assert {key: place(memory) for key, memory in memories.items()} == {
        "turn": ("episodic", "talks/one", T0),
        "deploy": ("procedural", "projects/a", None),
        "task": ("working", "projects/a", None),
        "old_peer": ("semantic", "", None),
        "me": ("identity", "", None),
    }
    # A sync writes the expiry it is sent: no default expiry of working memories.
    assert memories["task"].expires_at is None
    assert version_places(memories["turn"]) == [(1, "episodic", "talks/one", T0)]


@pytest.mark.django_db
def test_paths_in_a_sync_are_taken_in_their_normal_form(agent, alice_mind):
    sync_ok(agent, {"memories": [item("a", 1, path=" /Projects/A/ "), item("root", 1, path="/")]})
    assert {key: m.path for key, m in by_key(alice_mind).items()} == {"a": "projects/a",
                                                                     "root": ""}


@pytest.fixture
def episode(remember):
    """An episode on talks/one, written at T0 (a sync change of it at T0 + n minutes wins)."""
    memory = remember(category="note", key="turn", content="Asked about the launch",
                      memory_type="episodic", path="talks/one", occurred_at=T0)
    Memory.objects.filter(pk=memory.pk).update(updated_at=T0)
    return memory


T1 = T0 + timedelta(hours=1)


@pytest.mark.django_db
@pytest.mark.parametrize(("fields", "expected"), [
    pytest.param({}, ("episodic", "talks/one", T0), id="none: all kept"),
    pytest.param({"path": "talks/two"}, ("episodic", "talks/two", T0),
                 id="path only: type and moment kept"),
    pytest.param({"path": ""}, ("episodic", "", T0), id="to the root"),
    pytest.param({"memory_type": "semantic"}, ("semantic", "talks/one", None),
                 id="type only: path kept, moment gone with the type"),
    pytest.param({"memory_type": "episodic", "occurred_at": "2026-05-01T13:00:00.123456Z"},
                 ("episodic", "talks/one", T1), id="a new moment"),
    pytest.param({"memory_type": "procedural", "path": "projects/a", "occurred_at": None},
                 ("procedural", "projects/a", None), id="all three"),
])
def test_an_update_applies_the_place_fields_it_carries_and_keeps_the_others(
        agent, episode, fields, expected):
    body = sync_ok(agent, {"memories": [item("turn", 5, content="Asked about the launch "
                                             "date", id=episode.id, **fields)]})
    assert (body["updated"], body["added"]) == (1, 0)
    assert place(episode) == expected
    assert episode.content == "Asked about the launch date"
    assert version_places(episode) == [(1, "episodic", "talks/one", T0), (2, *expected)]


@pytest.mark.django_db
def test_a_change_of_place_alone_is_an_update_with_a_version(agent, episode):
    same_words = item("turn", 5, content="Asked about the launch", id=episode.id)
    # Same words and place, later: only the clock catches up.
    assert sync_ok(agent, {"memories": [same_words]})["unchanged"] == 1
    assert episode.version == 1 and version_places(episode) == [
        (1, "episodic", "talks/one", T0)]
    # Same words, another path: a change a peer made, with its version.
    body = sync_ok(agent, {"memories": [{**same_words, "updated_at": at(6),
                                         "path": "talks/archive"}]})
    assert body["updated"] == 1
    assert place(episode) == ("episodic", "talks/archive", T0)
    assert version_places(episode) == [(1, "episodic", "talks/one", T0),
                                       (2, "episodic", "talks/archive", T0)]


@pytest.mark.django_db
def test_the_path_is_not_part_of_the_match_and_a_losing_change_moves_nothing(agent, episode):
    older = item("turn", -5, content="Older words", path="talks/elsewhere",
                 memory_type="semantic")
    assert sync_ok(agent, {"memories": [older]})["stale"] == 1
    assert place(episode) == ("episodic", "talks/one", T0)
    assert episode.content == "Asked about the launch"
    # Matched by (category, key) whatever its path, the later change moves it.
    newer = {**older, "updated_at": at(5)}
    assert sync_ok(agent, {"memories": [newer]})["updated"] == 1
    assert place(episode) == ("semantic", "talks/elsewhere", None)
    assert Memory.objects.filter(key="turn").count() == 1


# -- Refusals, per item, nothing written ----------------------------------------------------

PATH_RULE = "A path has no empty segments (no '//')."
SEGMENT_RULE = ("Path segments use a-z, 0-9, '.', '_' and '-', and start with a letter or a "
                "digit.")
ONLY_EPISODES = "Only episodic memories have occurred_at: send memory_type=episodic with it."
EPISODES_CARRY = "An episodic memory carries its occurred_at."


def diff_body(*, added=(), updated=(), deleted=()) -> dict:
    return {"added": list(added), "updated": list(updated), "deleted": list(deleted),
            "cursor": "tx1", "has_more": False}


GOOD = item("good", 5, content="Would be new")


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "fields"), [
    pytest.param({"memories": [GOOD, item("bad", 5, path="talks//one")]},
                 {"memories": {"1": {"path": [PATH_RULE]}}}, id="empty segment"),
    pytest.param({"memories": [GOOD, item("bad", 5, path="talks/../secrets")]},
                 {"memories": {"1": {"path": ["A path has no '.' or '..' segments."]}}},
                 id="dot-dot"),
    pytest.param({"memories": [GOOD, item("bad", 5, path="Talks/One Two")]},
                 {"memories": {"1": {"path": [SEGMENT_RULE]}}}, id="space"),
    pytest.param({"memories": [GOOD, item("bad", 5, path=["talks"])]},
                 {"memories": {"1": {"path": ["Not a valid string."]}}}, id="not a string"),
    pytest.param({"memories": [GOOD, item("bad", 5, memory_type="dream")]},
                 {"memories": {"1": {"memory_type": ['"dream" is not a valid choice.']}}},
                 id="unknown type"),
    pytest.param({"memories": [GOOD, item("bad", 5, memory_type="semantic",
                                          occurred_at=WIRE_T0)]},
                 {"memories[1].occurred_at": [ONLY_EPISODES]}, id="moment on semantic"),
    pytest.param({"memories": [GOOD, item("bad", 5, occurred_at=WIRE_T0)]},
                 {"memories[1].occurred_at": [ONLY_EPISODES]}, id="moment without a type"),
    pytest.param({"memories": [GOOD, item("bad", 5, memory_type="episodic")]},
                 {"memories[1].occurred_at": [EPISODES_CARRY]}, id="episode without moment"),
    pytest.param({"memories": [GOOD, item("bad", 5, memory_type="episodic",
                                          occurred_at=None)]},
                 {"memories[1].occurred_at": [EPISODES_CARRY]}, id="episode, null moment"),
    pytest.param(diff_body(added=[GOOD], updated=[item("turn", 5, memory_type="procedural",
                                                       occurred_at=WIRE_T0)]),
                 {"updated[0].occurred_at": [ONLY_EPISODES]}, id="diff shape, moment"),
    pytest.param(diff_body(added=[GOOD, item("bad", 5, path="a" * 65)]),
                 {"added": {"1": {"path": ["A path segment has at most 64 characters."]}}},
                 id="diff shape, long segment"),
    pytest.param(diff_body(added=[GOOD], deleted=[{"category": "note", "key": "turn",
                                                   "path": "talks//one",
                                                   "deleted_at": at(5)}]),
                 {"deleted": {"0": {"path": [PATH_RULE]}}}, id="tombstone path"),
])
def test_a_bad_type_path_or_moment_is_400_naming_the_item_and_writes_nothing(
        agent, alice_mind, episode, body, fields):
    before = (place(episode), episode.content, episode.version, version_places(episode))
    response = agent.post("/memory/sync", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (400, "invalid")
    assert error["fields"] == fields
    assert set(by_key(alice_mind)) == {"turn"}  # the good change before it is not written
    assert (place(episode), episode.content, episode.version,
            version_places(episode)) == before
    assert not AuditEvent.objects.filter(mind=alice_mind, action="sync").exists()


# -- The conflict order with places ----------------------------------------------------------

FIELDS = {"content": "Lives in Lisbon", "tags": ["home"], "priority": "normal",
          "confidence": 0.7, "expires_at": None, "superseded_at": None}


def test_a_memory_of_its_default_type_at_the_root_hashes_as_before_types():
    before_types = hashlib.sha256(json.dumps(
        ["fact", "home", "Lives in Lisbon", ["home"], "normal", 0.7, None, None],
        ensure_ascii=False).encode()).hexdigest()
    assert sync.fingerprint("fact", "home", dict(FIELDS)) == before_types
    assert sync.fingerprint("fact", "home", {**FIELDS, "memory_type": "semantic", "path": "",
                                             "occurred_at": None}) == before_types
    for moved in ({"path": "projects/a"}, {"memory_type": "procedural"},
                  {"memory_type": "episodic", "occurred_at": T0}):
        assert sync.fingerprint("fact", "home", {**FIELDS, **moved}) != before_types, moved
    identity = {**FIELDS, "memory_type": "identity"}
    assert sync.fingerprint("identity", "home", identity) == sync.fingerprint(
        "identity", "home", dict(FIELDS))


@pytest.mark.django_db
def test_updates_at_one_instant_on_two_paths_end_the_same_in_either_order(agent, bob_agent,
                                                                          alice_mind,
                                                                          bob_mind):
    one = item("launch", 5, content="Launch on the 3rd", path="projects/a")
    other = {**one, "path": "projects/b"}
    sync_ok(agent, {"memories": [one]})
    sync_ok(agent, {"memories": [other]})
    sync_ok(bob_agent, {"memories": [other]})
    sync_ok(bob_agent, {"memories": [one]})
    alice_path = by_key(alice_mind)["launch"].path
    assert alice_path == by_key(bob_mind)["launch"].path
    winner = max((one, other), key=lambda change: sync.fingerprint(
        "note", "launch", {**FIELDS, "content": change["content"], "tags": [],
                           "path": change["path"]}))
    assert alice_path == winner["path"]


# -- Round trip: a diff posted as is ------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_diff_posted_to_another_mind_keeps_every_place_exactly_and_echoes_unchanged(
        agent, bob_agent, remember, alice_mind, bob_mind):
    remember(category="identity", key="user_name", content="Alice")
    remember(category="context", key="turn", content="Hi", memory_type="episodic",
             path="talks/one", occurred_at=T0)
    remember(category="project", key="deploy", content="make deploy",
             memory_type="procedural", path="projects/a")
    remember(category="context", key="now", content="Reviewing", memory_type="working",
             path="projects/a")
    diff = agent.get("/memory/diff").json()
    sent = {m["key"]: (m["memory_type"], m["path"], m["occurred_at"]) for m in diff["added"]}
    assert sent == {"user_name": ("identity", "", None),
                    "turn": ("episodic", "talks/one", WIRE_T0),
                    "deploy": ("procedural", "projects/a", None),
                    "now": ("working", "projects/a", None)}
    assert sync_ok(bob_agent, diff)["added"] == 4
    copied = {key: place(m) for key, m in by_key(bob_mind).items()}
    assert copied == {key: place(m) for key, m in by_key(alice_mind).items()}
    assert copied["turn"] == ("episodic", "talks/one", T0)  # to the microsecond
    # The working memory keeps the expiry it was sent (its default one, set by alice's store).
    assert by_key(bob_mind)["now"].expires_at == by_key(alice_mind)["now"].expires_at
    echo = sync_ok(agent, bob_agent.get("/memory/diff").json())
    assert (echo["unchanged"], echo["added"], echo["updated"]) == (4, 0, 0)


# -- Diff filtered by path ---------------------------------------------------------------

def keys_of(items: list) -> set:
    return {(item["key"], item["path"]) for item in items}


@pytest.fixture
def paths_mind(alice_mind, alice, remember):
    """Memories on several paths; some in the trash, some purged (tombstones), in
    projects/a and in the look-alike projects/ab."""
    for key, path in [("root", ""), ("a", "projects/a"), ("a_x", "projects/a/x"),
                      ("ab", "projects/ab"), ("other", "other")]:
        remember(key=key, content=f"At {path or 'the root'}", path=path)
    for key, path in [("purged_a_x", "projects/a/x"), ("purged_ab", "projects/ab")]:
        memory = remember(key=key, content="Purged", path=path)
        memory_delete(memory=memory, actor=alice)
        Memory.objects.filter(pk=memory.pk).update(deleted_at=T0)
    memory_purge_trash(older_than=timezone.now() - timedelta(days=30))
    for key, path in [("trashed_a", "projects/a"), ("trashed_ab", "projects/ab")]:
        memory_delete(memory=remember(key=key, content="In the trash", path=path), actor=alice)
    return alice_mind


@pytest.mark.django_db(transaction=True)
def test_a_diff_of_a_path_holds_that_path_and_below_with_its_tombstones(agent, paths_mind):
    body = agent.get("/memory/diff?path=projects/a").json()
    assert keys_of(body["added"]) == {("a", "projects/a"), ("a_x", "projects/a/x")}
    assert body["updated"] == []
    assert keys_of(body["deleted"]) == {("trashed_a", "projects/a"),
                                        ("purged_a_x", "projects/a/x")}
    assert keys_of(agent.get("/memory/diff?path=/Projects/AB/").json()["deleted"]) == {
        ("trashed_ab", "projects/ab"), ("purged_ab", "projects/ab")}
    whole = agent.get("/memory/diff").json()
    assert len(whole["added"]) == 5 and len(whole["deleted"]) == 4
    nothing = agent.get("/memory/diff?path=projects/c").json()
    assert (nothing["added"], nothing["updated"], nothing["deleted"]) == ([], [], [])


@pytest.mark.django_db(transaction=True)
def test_after_a_cursor_a_diff_of_a_path_sends_what_changed_there_and_what_moved_out(
        agent, alice, paths_mind, remember):
    cursor = agent.get("/memory/diff?path=projects/a").json()["cursor"]
    memories = by_key(paths_mind)
    remember(key="a", content="Changed at projects/a", path="projects/a")
    memory_update(memory=memories["a_x"], actor=alice, path="archive/x")  # moved out
    memory_update(memory=memories["root"], actor=alice, path="projects/a/in")  # moved in
    memory_update(memory=memories["ab"], actor=alice, content="Changed next door")
    memory_delete(memory=memories["a"], actor=alice)
    gone = remember(key="new_then_purged", content="Brief", path="projects/a/x")
    memory_delete(memory=gone, actor=alice)
    Memory.objects.filter(pk=gone.pk).update(deleted_at=T0)
    memory_purge_trash(older_than=timezone.now() - timedelta(days=30))
    new = remember(key="new", content="New here", path="projects/a/y")

    body = agent.get(f"/memory/diff?since={cursor}&path=projects/a").json()
    assert keys_of(body["added"]) == {("new", "projects/a/y")}
    # The one that moved out comes once more, with its new path: drop it.
    assert keys_of(body["updated"]) == {("a_x", "archive/x"), ("root", "projects/a/in")}
    assert keys_of(body["deleted"]) == {("a", "projects/a"),
                                        ("new_then_purged", "projects/a/x")}
    assert [m["id"] for m in body["added"]] == [new.id]
    again = agent.get(f"/memory/diff?since={body['cursor']}&path=projects/a").json()
    assert (again["added"], again["updated"], again["deleted"]) == ([], [], [])
    # Without the path, the change next door is there too.
    whole = agent.get(f"/memory/diff?since={cursor}").json()
    assert ("ab", "projects/ab") in keys_of(whole["updated"])


@pytest.mark.django_db(transaction=True)
def test_a_diff_of_a_path_pages_through_it_once_in_order(agent, remember):
    for number in range(5):
        remember(key=f"in_{number}", content="In", path=f"projects/p{number % 2}")
        remember(key=f"out_{number}", content="Out", path=f"projectsx/p{number}")
    seen, cursor, pages = [], "", 0
    while True:
        body = agent.get(f"/memory/diff?path=projects&limit=2&since={cursor}").json()
        seen += [m["key"] for m in body["added"] + body["updated"]]
        cursor, pages = body["cursor"], pages + 1
        if not body["has_more"]:
            break
    assert sorted(seen) == [f"in_{n}" for n in range(5)]
    assert len(seen) == 5 and pages >= 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", [
    pytest.param({"path": "projects/z"}, id="path"),
    pytest.param({"memory_type": "procedural"}, id="type"),
    pytest.param({"occurred_at": T1}, id="moment"),
])
def test_a_raw_write_of_the_place_alone_reaches_the_next_diff(agent, episode, change):
    if "memory_type" in change:  # an episode keeps its moment; another type has none
        change = {**change, "occurred_at": None}
    cursor = agent.get("/memory/diff").json()["cursor"]
    assert Memory.objects.filter(pk=episode.pk).update(**change) == 1
    body = agent.get(f"/memory/diff?since={cursor}").json()
    assert [m["id"] for m in body["updated"]] == [episode.id]
    sent = body["updated"][0]
    assert {name: sent[name] for name in change} == {
        name: format_timestamp(value) if name == "occurred_at" else value
        for name, value in change.items()}
