"""Migrations 0008 (types, paths, episodes) and 0009 (tombstone paths) on a database filled
by the code before them: every memory, version and tombstone is kept with every old column
unchanged; memories and versions get the type a store without one gives (``identity`` for
the identity category, else ``semantic``), the root path and no ``occurred_at``; the
derivation is no change for peers to pull; and the memories read as before.

The test changes the schema, so it runs alone (``serial``, after the parallel run: make
test), on committed rows (``transaction=True``), and leaves the database migrated to the
latest migration whatever happens (the ``finally``)."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memories.crypto import encrypt
from memories.models import Memory, MemoryTombstone, MemoryVersion
from memories.sync import snapshot_floor

pytestmark = [pytest.mark.serial, pytest.mark.django_db(transaction=True)]

# minds before memberships too: the old code's Mind has its single owner column.
BEFORE = [("memories", "0007_quota_counters"), ("minds", "0005_oauth_connection")]
NEW_MEMORY_COLUMNS = {"memory_type", "path", "occurred_at", "seq"}
NEW_VERSION_COLUMNS = {"memory_type", "path", "occurred_at"}
NEW_TOMBSTONE_COLUMNS = {"path"}
T0 = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)


def migrate(targets=None):
    """Migrate to ``targets`` (None: the latest of every app); the state's apps there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()  # it records what was applied
    return executor.loader.project_state(targets).apps


def kept(rows_before: dict, rows_after: dict, new_columns: set):
    """Each row of ``rows_before`` with its row of ``rows_after``, after checking that
    every old column is as it was and ``new_columns`` were added (later migrations may add
    more): (before, after) pairs for the checks of the new columns."""
    for row_id, before in rows_before.items():
        after = rows_after[row_id]
        assert set(after) - set(before) >= new_columns
        assert {name: after[name] for name in before} == before, before.get("key", row_id)
        yield before, after


def applied(app: str) -> set[str]:
    executor = MigrationExecutor(connection)
    return {name for label, name in executor.loader.applied_migrations if label == app}


def rows(table: str) -> dict:
    """Every row of ``table`` by id, every column as the database returns it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 - the table names are ours
        names = [column.name for column in cursor.description]
        return {row[names.index("id")]: dict(zip(names, row, strict=True))
                for row in cursor.fetchall()}


def columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return {column.name for column in
                connection.introspection.get_table_description(cursor, table)}


# Every category, as the code before 0008 wrote them: (category, key, contents of each
# version oldest first, other fields of the memory).
OLD_MEMORIES = [
    ("identity", "user_name", ["Ally", "Alice"],
     {"priority": "critical", "tags": ["person"], "source": "user", "confidence": 1.0,
      "verified": True}),
    ("identity", "agent_name", ["Synapse helper"], {"source": "agent", "confidence": 0.7}),
    ("preference", "editor", ["Vim", "Helix"],
     {"tags": ["tools", "editor"], "expires_at": T0 + timedelta(days=3650), "verified": True}),
    ("fact", "launch", ["Launch on the 3rd"],
     {"priority": "high", "expires_at": T0 - timedelta(days=1)}),  # expired
    ("project", "deploy", ["make deploy"], {"deleted_at": T0}),  # in the trash
    ("skill", "python", ["Python 3.11"], {"superseded_at": T0}),  # superseded (below)
    ("skill", "python_now", ["Python 3.12"], {"priority": "low"}),
    ("mistake", "rm_rf", ["Ran rm -rf in the wrong folder"], {"source": "tool"}),
    ("context", "turn_1", ["Asked about the launch"], {"source": "system"}),
    ("note", "todo", ["Write the changelog"], {"tags": ["todo"]}),
    ("credentials", "db_password", ["hunter1", "hunter2"], {"tags": ["infra"]}),
]
OLD_TOMBSTONES = [("note", "purged_note"), ("identity", "old_identity")]


def fill_before_types(old, mind, user) -> dict:
    """The OLD_MEMORIES and OLD_TOMBSTONES in ``mind`` through the historical models of
    0007; their ids by key."""
    Memory_, Version_, Tombstone_ = (old.get_model("memories", name) for name in
                                     ("Memory", "MemoryVersion", "MemoryTombstone"))
    mind = old.get_model("minds", "Mind").objects.get(pk=mind.pk)
    user = old.get_model(*user._meta.label.split(".")).objects.get(pk=user.pk)
    ids = {}
    for number, (category, key, contents, fields) in enumerate(OLD_MEMORIES):
        fields = dict(fields)
        seal = encrypt if category == "credentials" else str
        created = T0 - timedelta(days=30 - number)
        verified = fields.pop("verified", False)
        memory = Memory_.objects.create(
            mind=mind, category=category, key=key, content=seal(contents[-1]),
            source=fields.pop("source", "agent"), confidence=fields.pop("confidence", 0.7),
            version=len(contents), created_at=created,
            updated_at=created + timedelta(hours=len(contents)), verified=verified,
            verified_by=user if verified else None,
            verified_at=created + timedelta(hours=5) if verified else None,
            embedding_pending=category != "credentials", **fields)
        for version, content in enumerate(contents, start=1):
            Version_.objects.create(
                memory=memory, version=version, category=category, key=key,
                content=seal(content), tags=memory.tags, priority=memory.priority,
                source=memory.source, confidence=memory.confidence,
                expires_at=memory.expires_at, recorded_by_type="key", recorded_by_id="7",
                recorded_by="alice agent", created_at=created + timedelta(hours=version))
        ids[key] = memory.pk
    Memory_.objects.filter(pk=ids["python"]).update(superseded_by_id=ids["python_now"])
    for number, (category, key) in enumerate(OLD_TOMBSTONES):
        Tombstone_.objects.create(id=f"mem_tombstone{number}", mind=mind, category=category,
                                  key=key, deleted_at=T0, updated_at=T0)
    return ids


def test_migration_0008_keeps_every_memory_and_derives_types_from_the_category(
        alice, alice_mind, agent, human):
    latest = set(applied("memories"))
    try:
        old = migrate(BEFORE)
        assert "0008_types_paths_episodes" not in applied("memories")
        assert "memory_type" not in columns("memories_memory")
        ids = fill_before_types(old, alice_mind, alice)
        memories_before = rows("memories_memory")
        versions_before = rows("memories_memoryversion")
        tombstones_before = rows("memories_memorytombstone")
        cursor_before = f"tx{snapshot_floor()}"
        assert len(memories_before) == len(OLD_MEMORIES)
        assert len(versions_before) == sum(len(contents) for _c, _k, contents, _f
                                           in OLD_MEMORIES)
    finally:
        migrate()
    assert applied("memories") == latest

    # Every old column of every row as it was; the new ones as derived.
    memories_after = rows("memories_memory")
    assert memories_after.keys() == memories_before.keys()
    for before, after in kept(memories_before, memories_after, NEW_MEMORY_COLUMNS):
        expected_type = "identity" if before["category"] == "identity" else "semantic"
        assert (after["memory_type"], after["path"], after["occurred_at"]) == (
            expected_type, "", None), before["key"]
    seqs = [row["seq"] for row in memories_after.values()]
    assert None not in seqs and len(set(seqs)) == len(seqs)

    versions_after = rows("memories_memoryversion")
    assert versions_after.keys() == versions_before.keys()
    for before, after in kept(versions_before, versions_after, NEW_VERSION_COLUMNS):
        expected_type = "identity" if before["category"] == "identity" else "semantic"
        assert (after["memory_type"], after["path"], after["occurred_at"]) == (
            expected_type, "", None)

    tombstones_after = rows("memories_memorytombstone")
    assert tombstones_after.keys() == tombstones_before.keys()
    for _before, after in kept(tombstones_before, tombstones_after, NEW_TOMBSTONE_COLUMNS):
        assert after["path"] == ""

    # Through today's models: the types by category (the context memory is no episode).
    by_key = {m.key: m for m in Memory.objects.for_mind(alice_mind)}
    assert {key: m.memory_type for key, m in by_key.items()} == {
        key: "identity" if category == "identity" else "semantic"
        for category, key, _contents, _fields in OLD_MEMORIES}
    assert not Memory.objects.for_mind(alice_mind).episodes().exists()
    assert {(v.memory.key, v.version, v.memory_type) for v in
            MemoryVersion.objects.filter(memory__mind=alice_mind)} == {
        (key, number, "identity" if category == "identity" else "semantic")
        for category, key, contents, _fields in OLD_MEMORIES
        for number in range(1, len(contents) + 1)}
    assert set(MemoryTombstone.objects.filter(mind=alice_mind).values_list("path", flat=True)
               ) == {""}

    # Deriving the types was no change for peers to pull: nothing since the cursor taken
    # before the migration.
    diff = agent.get(f"/memory/diff?since={cursor_before}").json()
    assert (diff["added"], diff["updated"], diff["deleted"]) == ([], [], [])
    # From the beginning, every memory and tombstone, with the derived type at the root.
    whole = agent.get("/memory/diff").json()
    sent = {item["key"]: (item["memory_type"], item["path"], item["occurred_at"])
            for item in whole["added"] + whole["updated"]}
    assert sent == {key: ("identity" if category == "identity" else "semantic", "", None)
                    for category, key, _contents, fields in OLD_MEMORIES
                    if "deleted_at" not in fields}
    assert {(item["key"], item["path"]) for item in whole["deleted"]} == {
        ("deploy", ""), ("purged_note", ""), ("old_identity", "")}

    # Read as before: credentials still open with the key, recall headers as they were
    # (a memory of its category's type at the root shows no place).
    secret = agent.get(f"/memory/{ids['db_password']}").json()
    assert (secret["content"], secret["memory_type"], secret["path"]) == (
        "hunter2", "semantic", "")
    versions = human.get(f"/memory/{ids['db_password']}/versions?mind={alice_mind.id}").json()
    assert [v["content"] for v in versions["versions"]] == ["hunter1", "hunter2"]
    recall = agent.get("/memory/recall").content.decode()
    user_name = Memory.objects.get(pk=ids["user_name"])
    assert f"[001] identity (CRITICAL) [verified] {user_name.citation}\n  user_name\n  Alice\n" \
        in recall
    headers = [line for line in recall.splitlines() if line.startswith("[")]
    assert len(headers) == len(by_key) - 3  # not the trashed, superseded and expired ones
    header = re.compile(r"\[\d{3}\] [a-z]+ \([A-Z]+\) \[(un)?verified\] mem_[A-Za-z0-9]+@v\d+")
    assert all(header.fullmatch(line) for line in headers), headers

    # The next memory written comes after them in write order, and old ones update as any.
    response = agent.post("/memory", {"category": "context", "key": "turn_2",
                                      "content": "Said hello", "memory_type": "episodic",
                                      "path": "talks/one"}, format="json")
    assert response.status_code == 201, response.json()
    new = Memory.objects.get(pk=response.json()["id"])
    assert new.seq > max(seqs) and new.occurred_at is not None
    moved = agent.put(f"/memory/{ids['todo']}", {"path": "projects/docs"}, format="json")
    assert moved.status_code == 200, moved.json()
    assert (moved.json()["version"], moved.json()["memory_type"]) == (2, "semantic")
