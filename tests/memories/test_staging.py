"""memories/staging.py on its own: what a stage gives back, and in which order, whether it
stayed in memory or went to its temporary table."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from memories import staging
from memories.staging import Stage, decode, encode

pytestmark = pytest.mark.django_db

AT = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
# (kind, key, minutes after AT or None, deleted), in the order they are sent.
SENT = [("memory", "b", 5, False), ("tombstone", "a", 5, True), ("memory", "c", 1, False),
        ("memory", "d", None, False), ("memory", "e", 5, False), ("tombstone", "f", 0, True)]


def staged(batch_size: int, monkeypatch) -> Stage:
    monkeypatch.setattr(staging, "BATCH_SIZE", batch_size)
    stage = Stage()
    for kind, key, minutes, deleted in SENT:
        at = None if minutes is None else AT + timedelta(minutes=minutes)
        stage.add(kind, {"key": key, "updated_at": at}, updated_at=at, deleted=deleted)
    return stage


def keys(stage: Stage, **options) -> list[list[str]]:
    return [[item["key"] for _kind, item in batch] for batch in stage.batches(**options)]


def test_an_item_comes_back_as_it_went_in_timestamps_included():
    item = {"key": "k", "tags": ["a", "ü"], "confidence": 0.7, "updated_at": AT,
            "expires_at": None, "note": "2026-01-31T12:00:00Z"}
    assert decode(encode(item)) == {**item, "note": "2026-01-31T12:00:00Z"}
    assert decode(encode(item))["updated_at"] == AT


@pytest.mark.parametrize("batch_size", [1000, 2], ids=["in memory", "in a table"])
def test_items_come_back_as_sent_or_in_change_order(batch_size, monkeypatch):
    stage = staged(batch_size, monkeypatch)
    assert (stage.table is None) == (batch_size == 1000)
    flat = lambda batches: [key for batch in batches for key in batch]  # noqa: E731
    assert flat(keys(stage)) == ["b", "a", "c", "d", "e", "f"]
    # Later last; at one instant an update before a deletion, then as sent; no time last.
    assert flat(keys(stage, order="change")) == ["f", "c", "b", "e", "a", "d"]
    assert flat(keys(stage, kind="tombstone")) == ["a", "f"]
    assert all(len(batch) <= batch_size for batch in keys(stage))


def test_a_full_batch_goes_to_a_temporary_table(monkeypatch):
    stage = staged(2, monkeypatch)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class WHERE relname = %s AND relpersistence = 't'",
                       [stage.table])
        assert cursor.fetchone()[0] == 1
