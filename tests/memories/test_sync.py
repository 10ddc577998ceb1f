"""memories/sync.py called directly: the cursor, the wire format, the conflict order and
diff() over the rows of one mind."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memories import sync
from memories.models import Memory
from memories.recall import REDACTED
from memories.services import memory_delete, memory_store

AT = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
FIELDS = {"content": "Lives in Lisbon", "tags": ["home"], "priority": "normal",
          "confidence": 0.7, "expires_at": None, "superseded_at": None}


def change(**overrides) -> sync.Change:
    values = {"category": "fact", "key": "home", "updated_at": AT, "fields": dict(FIELDS)}
    return sync.Change(**{**values, **overrides})


# -- The cursor ------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    (None, sync.Since()),
    ("", sync.Since()),
    ("tx42", sync.Since(txid=42)),
    (" tx42:mem_abc123 ", sync.Since(txid=42, after_id="mem_abc123")),
    ("2026-01-31T12:00:00Z", sync.Since(timestamp=AT)),
    ("2026-01-31T13:00:00+01:00", sync.Since(timestamp=AT)),
    (str(int(AT.timestamp())), sync.Since(timestamp=AT)),
])
def test_since_reads_a_cursor_or_a_timestamp(raw, expected):
    assert sync.parse_since(raw) == expected


@pytest.mark.parametrize("raw", ["tx", "tx-1", "tx1:abc", "tx12345678901234567890", "yesterday",
                                 "2026-01-31T12:00:00"])
def test_since_refuses_anything_else_saying_what_it_takes(raw):
    with pytest.raises(ValueError, match="cursor of a previous diff"):
        sync.parse_since(raw)


@pytest.mark.parametrize("txid, after_id", [(7, None), (7, "mem_x9")])
def test_a_formatted_cursor_reads_back_as_itself(txid, after_id):
    assert sync.parse_since(sync.format_cursor(txid, after_id)) == sync.Since(txid, after_id)


# -- The conflict order ----------------------------------------------------------------------

def test_the_fingerprint_follows_what_a_memory_says():
    same = sync.fingerprint("fact", "home", dict(FIELDS))
    assert same == sync.fingerprint("fact", "home", {**FIELDS})
    assert same != sync.fingerprint("fact", "home", {**FIELDS, "content": "Lives in Porto"})
    assert same != sync.fingerprint("fact", "house", dict(FIELDS))
    assert change(deleted=True).fingerprint == ""


def test_nothing_local_means_the_incoming_change_wins():
    assert sync.incoming_wins(change(), None)


def test_the_later_state_wins():
    local = sync.rank(updated_at=AT, deleted=False, fingerprint=change().fingerprint)
    assert sync.incoming_wins(change(updated_at=AT + timedelta(seconds=1)), local)
    assert not sync.incoming_wins(change(updated_at=AT - timedelta(seconds=1)), local)


def test_at_the_same_instant_a_delete_wins_and_then_the_larger_fingerprint():
    live = sync.rank(updated_at=AT, deleted=False, fingerprint=change().fingerprint)
    assert sync.incoming_wins(change(deleted=True), live)
    deleted = sync.rank(updated_at=AT, deleted=True, fingerprint="")
    assert not sync.incoming_wins(change(), deleted)
    other = change(fields={**FIELDS, "content": "Lives in Porto"})
    first_wins = other.fingerprint > change().fingerprint
    assert sync.incoming_wins(other, live) is first_wins
    assert not sync.incoming_wins(change(), live)  # the same state never replaces itself


# -- Rows: payloads and diff ------------------------------------------------------------------

@pytest.mark.django_db
def test_a_stored_memory_has_the_fingerprint_of_the_change_that_describes_it(alice_mind,
                                                                            alice):
    memory = memory_store(mind=alice_mind, actor=alice, category="credentials", key="wifi",
                          content="hunter2", tags=["home"]).memory
    described = change(category="credentials", key="wifi",
                       fields={**FIELDS, "content": "hunter2", "confidence": 1.0})
    assert sync.memory_fingerprint(memory) == described.fingerprint


@pytest.mark.django_db
def test_payloads_redact_credentials_unless_revealed(alice_mind, alice):
    memory = memory_store(mind=alice_mind, actor=alice, category="credentials", key="wifi",
                          content="hunter2").memory
    redacted = sync.memory_payload(memory, reveal=False)
    assert (redacted["content"], redacted["content_redacted"]) == (REDACTED, True)
    revealed = sync.memory_payload(memory, reveal=True)
    assert revealed["content"] == "hunter2" and "content_redacted" not in revealed
    assert revealed["created_at"].endswith("Z") and revealed["deleted_at"] is None


@pytest.mark.django_db
def test_diff_sorts_the_minds_rows_into_added_updated_and_deleted(alice_mind, alice, remember,
                                                                  bob_mind, bob):
    kept, edited, trashed = remember(key="kept"), remember(key="edited"), remember(key="gone")
    remember(key="edited", content="Edited")
    memory_delete(memory=trashed, actor=alice)
    memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's")
    result = sync.diff(mind=alice_mind, since=sync.Since(), limit=100)
    # One test transaction: every row was created at or after the cursor, so all are new.
    assert {item["id"] for item in result.added} == {kept.id, edited.id}
    assert result.updated == []
    assert [(item["id"], item["key"]) for item in result.deleted] == [(trashed.id, "gone")]
    assert result.cursor.startswith("tx") and result.has_more is False


@pytest.mark.django_db
def test_diff_since_a_time_sends_older_memories_as_updated_and_skips_unchanged(alice_mind,
                                                                               remember):
    old, untouched, recent = remember(key="old"), remember(key="untouched"), remember(key="new")
    long_ago, now = timezone.now() - timedelta(days=10), timezone.now()
    Memory.objects.filter(pk__in=[old.pk, untouched.pk]).update(created_at=long_ago,
                                                                  updated_at=long_ago)
    Memory.objects.filter(pk=old.pk).update(updated_at=now)
    since = sync.Since(timestamp=now - timedelta(days=1))
    result = sync.diff(mind=alice_mind, since=since, limit=100)
    assert [item["id"] for item in result.updated] == [old.id]
    assert [item["id"] for item in result.added] == [recent.id]
    assert result.deleted == []


@pytest.mark.django_db(transaction=True)
def test_paged_diff_hands_out_every_committed_memory_once_in_stamp_order(alice_mind, remember):
    stored = [remember(key=f"m{number}").id for number in range(5)]  # one transaction each
    since, pages, seen = sync.Since(), 0, []
    while True:
        page = sync.diff(mind=alice_mind, since=since, limit=2)
        seen += [item["id"] for item in page.added + page.updated]
        pages += 1
        if not page.has_more:
            break
        since = sync.parse_since(page.cursor)
    assert seen == stored and pages == 3
    again = sync.diff(mind=alice_mind, since=sync.parse_since(page.cursor), limit=2)
    assert again.added + again.updated + again.deleted == []
