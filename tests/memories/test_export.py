"""memories/export.py called directly: the JSON and CSV exports, and reading an export
back (read_backup, backup_change) with the faulty field named."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from memories.export import (
    CSV_COLUMNS,
    FORMAT,
    BackupInvalid,
    backup_change,
    csv_cell,
    export_csv,
    export_json,
    read_backup,
)
from memories.models import Memory
from memories.recall import REDACTED
from memories.services import memory_delete, memory_purge_trash, memory_store, memory_update
from synapse.parsers import JSONStream

pytestmark = pytest.mark.django_db


@pytest.fixture
def filled(alice_mind, alice, remember):
    """alice's mind: an edited memory, a credentials one, one in the trash, one purged."""
    edited = remember(key="edited", content="First", tags=["a"])
    memory_update(memory=edited, actor=alice, content="Second")
    secret = memory_store(mind=alice_mind, actor=alice, category="credentials", key="token",
                          content="ghp_secret").memory
    trashed = remember(key="trashed", content="Gone soon")
    memory_delete(memory=trashed, actor=alice)
    purged = remember(key="purged")
    memory_delete(memory=purged, actor=alice)
    Memory.objects.filter(pk=purged.pk).update(deleted_at=timezone.now() - timedelta(days=60))
    memory_purge_trash(older_than=timezone.now() - timedelta(days=30))
    return {"edited": edited, "secret": secret, "trashed": trashed, "purged": purged}


def exported(mind, *, reveal: bool = False) -> dict:
    return json.loads("".join(export_json(mind=mind, reveal=reveal)))


def stream(document) -> JSONStream:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return JSONStream(io.BytesIO(body), limit=10_000_000)


def test_the_json_export_holds_every_memory_with_its_versions_and_the_tombstones(alice_mind,
                                                                                filled):
    document = exported(alice_mind)
    assert (document["format"], document["format_version"]) == (FORMAT, 1)
    assert document["mind"]["id"] == alice_mind.id and document["credentials"] == "redacted"
    memories = {item["key"]: item for item in document["memories"]}
    assert set(memories) == {"edited", "token", "trashed"}
    assert [(v["version"], v["content"]) for v in memories["edited"]["versions"]] == [
        (1, "First"), (2, "Second")]
    assert memories["trashed"]["deleted_at"] is not None
    assert [item["id"] for item in document["tombstones"]] == [filled["purged"].id]


def test_the_json_export_redacts_credentials_unless_asked_to_reveal(alice_mind, filled):
    redacted = {item["key"]: item for item in exported(alice_mind)["memories"]}["token"]
    assert redacted["content"] == REDACTED and redacted["content_redacted"] is True
    assert redacted["versions"][0]["content"] == REDACTED
    revealed = {item["key"]: item for item in exported(alice_mind, reveal=True)["memories"]}
    assert revealed["token"]["content"] == "ghp_secret"
    assert "content_redacted" not in revealed["token"]


def test_the_json_export_comes_in_pieces_of_chunk_size_memories(alice_mind, remember,
                                                                monkeypatch):
    monkeypatch.setattr("memories.export.CHUNK_SIZE", 2)
    for number in range(5):
        remember(key=f"m{number}")
    pieces = list(export_json(mind=alice_mind, reveal=False))
    assert len(pieces) > 3
    assert len(json.loads("".join(pieces))["memories"]) == 5


def test_the_csv_export_lists_current_memories_only(alice_mind, filled, remember):
    superseded = remember(key="superseded")
    Memory.objects.filter(pk=superseded.pk).update(superseded_at=timezone.now())
    rows = list(csv.reader(io.StringIO("".join(export_csv(mind=alice_mind, reveal=False)))))
    assert rows[0] == CSV_COLUMNS
    by_key = {row[2]: dict(zip(CSV_COLUMNS, row, strict=True)) for row in rows[1:]}
    assert set(by_key) == {"edited", "token"}
    assert by_key["edited"]["content"] == "Second" and by_key["edited"]["version"] == "2"
    assert by_key["token"]["content"] == REDACTED


@pytest.mark.parametrize("value, expected", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
    ("+1", "'+1"), ("-1", "'-1"), ("@SUM(A1)", "'@SUM(A1)"), ("\tTab", "'\tTab"),
    ("plain text", "plain text"), (0.7, 0.7), (3, 3),
])
def test_csv_cells_that_start_like_a_formula_get_an_apostrophe(value, expected):
    assert csv_cell(value) == expected


def test_an_export_reads_back_item_by_item(alice_mind, filled):
    items = list(read_backup(stream(exported(alice_mind, reveal=True))))
    kinds = [kind for kind, _item in items]
    assert kinds == ["memory", "memory", "memory", "tombstone"]
    memories = {item["key"]: item for kind, item in items if kind == "memory"}
    edited = memories["edited"]
    assert edited["id"] == filled["edited"].id and edited["content"] == "Second"
    assert edited["updated_at"] == Memory.objects.get(pk=filled["edited"].pk).updated_at
    assert [snapshot["version"] for snapshot in edited["versions"]] == [1, 2]
    assert memories["token"]["content"] == "ghp_secret"
    assert memories["token"]["content_redacted"] is False
    assert items[-1][1]["id"] == filled["purged"].id


def test_read_items_become_sync_changes(alice_mind, filled):
    items = list(read_backup(stream(exported(alice_mind))))
    changes = {item["key"]: backup_change(kind, item) for kind, item in items}
    assert changes["edited"].fields["content"] == "Second" and not changes["edited"].deleted
    assert changes["token"].redacted is True
    assert changes["trashed"].deleted and changes["trashed"].fields == {}
    assert changes["purged"].deleted and changes["purged"].deleted_at is not None


@pytest.mark.parametrize("change, path", [
    ({"format": "something-else"}, "export.format"),
    ({"format_version": 2}, "export.format_version"),
    ({"memories": {}}, "export.memories"),
    ({"memories": [{"category": "fact"}]}, "memories[0].id"),
    ({"memories": [{"id": "mem_a1", "category": "gossip"}]}, "memories[0].category"),
])
def test_a_faulty_export_names_the_field(change, path):
    document = {"format": FORMAT, "format_version": 1, "memories": [], **change}
    with pytest.raises(BackupInvalid) as refused:
        list(read_backup(stream(document)))
    assert refused.value.path == path


def test_an_export_without_memories_is_refused():
    with pytest.raises(BackupInvalid) as refused:
        list(read_backup(stream({"format": FORMAT, "format_version": 1})))
    assert refused.value.path == "export.memories"


def test_members_it_does_not_know_are_skipped():
    document = {"format": FORMAT, "format_version": 1, "mind": {"anything": [1, 2]},
                "memories": [], "tombstones": []}
    assert list(read_backup(stream(document))) == []
