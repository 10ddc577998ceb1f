"""Diff and sync between instances: the change cursor, the wire format, the conflict rules.

The guarantees, with their tests: docs/lifecycle.md, "Diff and sync between instances"."""

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import connection
from django.db.models import Exists, OuterRef, Q

from memories.models import (
    Category,
    Memory,
    MemoryTombstone,
    MemoryType,
    MemoryVersion,
    default_memory_type,
    under_any,
)
from memories.recall import REDACTED
from minds.models import Mind
from synapse.timestamps import format_timestamp, parse_timestamp

# What travels between instances and decides whether two copies hold the same memory.
SYNCED_FIELDS = ("content", "tags", "priority", "confidence", "expires_at", "superseded_at")
# Where a memory lives and how it behaves. A peer older than these fields sends none of them,
# and a change that leaves one out keeps what is here (:func:`settled_place`).
PLACE_FIELDS = ("memory_type", "path", "occurred_at")
_CURSOR = re.compile(r"^tx(\d{1,19})(?::(mem_[A-Za-z0-9]{1,36}))?$")


# -- Credentials: the one place that reads their content for output -----------------------

def output_content(record: Memory | MemoryVersion, *, reveal: bool) -> str:
    """Content for diff and export: credentials redacted unless a human asked to reveal.

    Every read of credentials content for diff, export and versions goes through here,
    so the encryption at rest (memories.crypto) is handled in one place.
    """
    if record.category != Category.CREDENTIALS:
        return record.content
    if not reveal:
        return REDACTED
    return record.plaintext_content()


# -- The cursor ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Since:
    """Where a diff starts: a cursor position, or (less safely) a point in time."""

    txid: int = 0
    after_id: str | None = None
    timestamp: datetime | None = None


def parse_since(raw: str | None) -> Since:
    """``tx<n>`` or ``tx<n>:<memory id>`` (a cursor), or an RFC 3339 / epoch timestamp.

    Raises ValueError with a message for the client."""
    if raw is None or raw == "":
        return Since()
    match = _CURSOR.match(raw.strip())
    if match:
        return Since(txid=int(match.group(1)), after_id=match.group(2))
    try:
        return Since(timestamp=parse_timestamp(raw))
    except ValueError:
        raise ValueError("Pass the cursor of a previous diff (tx…) or a timestamp (RFC 3339 "
                         "or Unix epoch seconds).") from None


def format_cursor(txid: int, after_id: str | None = None) -> str:
    return f"tx{txid}:{after_id}" if after_id else f"tx{txid}"


def snapshot_floor() -> int:
    """The oldest transaction id still running now; everything below it has finished.

    This is the cursor a diff returns. Every write stamps the row with the id of its
    transaction (``change_txid``, set by a trigger: migration 0003), so a write that
    commits later carries a stamp at or above the floor and the next diff sees it, however
    out of order transactions commit. The price: a change may be sent twice (sync is
    idempotent); a change is never skipped.

    Taken before the rows are read: a later statement sees at least every transaction
    below it, so the floor stays safe under READ COMMITTED."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
        return cursor.fetchone()[0]


# -- The wire format ----------------------------------------------------------------------

def memory_payload(memory: Memory, *, reveal: bool) -> dict:
    """A memory as diff and export send it (content redacted per :func:`output_content`)."""
    content = output_content(memory, reveal=reveal)
    payload = {
        "id": memory.id, "category": memory.category, "key": memory.key,
        "content": content, "tags": list(memory.tags), "priority": memory.priority,
        "source": memory.source, "verified": memory.verified,
        "verified_at": format_timestamp(memory.verified_at),
        "confidence": memory.confidence, "expires_at": format_timestamp(memory.expires_at),
        "memory_type": memory.memory_type, "path": memory.path,
        "occurred_at": format_timestamp(memory.occurred_at),
        "version": memory.version, "created_at": format_timestamp(memory.created_at),
        "updated_at": format_timestamp(memory.updated_at),
        "deleted_at": format_timestamp(memory.deleted_at),
        "superseded_at": format_timestamp(memory.superseded_at),
        "superseded_by": memory.superseded_by_id,
    }
    if memory.category == Category.CREDENTIALS and not reveal:
        payload["content_redacted"] = True
    return payload


def tombstone_payload(record: Memory | MemoryTombstone) -> dict:
    if isinstance(record, MemoryTombstone) and record.is_reset:
        # A scope reset's tombstone: the id, no text (docs/api.md, "Scope reset").
        return {"id": record.id, "category": "", "key": "", "path": record.path,
                "deleted_at": format_timestamp(record.deleted_at),
                "updated_at": format_timestamp(record.updated_at), "reset": True}
    return {"id": record.id, "category": record.category, "key": record.key,
            "path": record.path, "deleted_at": format_timestamp(record.deleted_at),
            "updated_at": format_timestamp(record.updated_at)}


@dataclass
class Diff:
    added: list[dict] = field(default_factory=list)
    updated: list[dict] = field(default_factory=list)
    deleted: list[dict] = field(default_factory=list)
    cursor: str = ""
    has_more: bool = False

    def as_dict(self) -> dict:
        return {"added": self.added, "updated": self.updated, "deleted": self.deleted,
                "cursor": self.cursor, "has_more": self.has_more}


def _after(position_txid: int, after_id: str | None) -> Q:
    if after_id is None:
        return Q(change_txid__gte=position_txid)
    return Q(change_txid__gt=position_txid) | Q(change_txid=position_txid, id__gt=after_id)


def under(path: str) -> Q:
    """At ``path`` or below it, as a condition (MemoryQuerySet.under's, for any model with
    a ``path``: memories, versions, tombstones); the root (``""``) is everything."""
    return under_any([path])


def _in_place(path: str, since: Since) -> Q:
    """The memories a diff filtered by ``path`` sends: those under it and, after the very
    beginning, those that were (a version under it) — a memory moved out of the path comes
    once more, with its new path, so a client that keeps one path knows to drop it."""
    if since == Since():
        return under(path)
    was_there = Exists(MemoryVersion.objects.filter(under(path), memory=OuterRef("pk")))
    return under(path) | Q(was_there)


def diff(*, mind: Mind, since: Since, limit: int, reveal: bool = False,
         path: str = "") -> Diff:
    """Changes of ``mind`` since a cursor: added, updated, deleted (tombstones), a cursor.

    Pages hold at most ``limit`` memories of finished transactions, in stamp order; the
    memories of transactions still running when the diff began are all sent on the last
    page (they are few), whose cursor is the snapshot floor. ``has_more`` says to call
    again with the returned cursor at once. With ``path`` (normal form), only that part of
    the mind: see :func:`_in_place`; tombstones of purged memories by the path they had.
    """
    floor = snapshot_floor()
    memories = (Memory.objects.for_mind(mind).without_vectors()
                .filter(_after(since.txid, since.after_id)))
    if since.timestamp is not None:
        memories = memories.filter(updated_at__gte=since.timestamp)
    if path:
        memories = memories.filter(_in_place(path, since))
    settled = list(memories.filter(change_txid__lt=floor)
                   .order_by("change_txid", "id")[:limit + 1])
    result = Diff()
    if len(settled) > limit:
        rows = settled[:limit]
        result.cursor = format_cursor(rows[-1].change_txid, rows[-1].id)
        result.has_more = True
    else:
        rows = settled + list(memories.filter(change_txid__gte=floor).order_by("change_txid",
                                                                               "id"))
        result.cursor = format_cursor(max(floor, since.txid))
    for memory in rows:
        if memory.deleted_at is not None:
            result.deleted.append(tombstone_payload(memory))
        elif memory.created_txid is not None and memory.created_txid >= since.txid and (
                since.timestamp is None or memory.created_at >= since.timestamp):
            result.added.append(memory_payload(memory, reveal=reveal))
        else:
            result.updated.append(memory_payload(memory, reveal=reveal))
    # Purged memories are rare: their tombstones come with every page from its position.
    purged = MemoryTombstone.objects.for_mind(mind).filter(under(path),
                                                          change_txid__gte=since.txid)
    if since.timestamp is not None:
        purged = purged.filter(updated_at__gte=since.timestamp)
    result.deleted += [tombstone_payload(tombstone) for tombstone in purged.order_by("id")]
    return result


# -- Incoming changes and the conflict rules ----------------------------------------------

@dataclass(frozen=True)
class Change:
    """One incoming memory state: a live copy (``fields``) or a deletion."""

    category: str
    key: str
    updated_at: datetime
    id: str | None = None
    deleted: bool = False
    deleted_at: datetime | None = None
    # SYNCED_FIELDS, content in plaintext, and the PLACE_FIELDS the sender gave
    fields: dict = field(default_factory=dict)
    source: str | None = None
    verified: bool = False
    verified_at: datetime | None = None
    created_at: datetime | None = None
    redacted: bool = False  # credentials sent without their content: never applied

    @property
    def fingerprint(self) -> str:
        return "" if self.deleted else fingerprint(self.category, self.key, self.fields)


def fingerprint(category: str, key: str, fields: dict) -> str:
    """A stable hash of what a memory says: the tie-break between equal timestamps.

    ``fields`` holds the place fields settled (:func:`settled_place`). A memory at the root
    with its category's type hashes as it did before memories had a place, so instances
    older than these fields break ties the same way on every memory that does not use them.
    """
    canonical = [category, key] + [
        format_timestamp(fields.get(name)) if name in ("expires_at", "superseded_at")
        else fields.get(name) for name in SYNCED_FIELDS]
    place = [fields.get("memory_type", default_memory_type(category)), fields.get("path", ""),
             format_timestamp(fields.get("occurred_at"))]
    if place != [default_memory_type(category), "", None]:
        canonical.append(place)
    return hashlib.sha256(json.dumps(canonical, ensure_ascii=False).encode()).hexdigest()


def settled_place(change: Change, local: Memory | None) -> Change:
    """``change`` with the place fields it leaves out taken from ``local``, the memory it
    applies to here (None: it is new here, and gets its category's type, the root and no
    ``occurred_at``, as a store without them would).

    A peer older than these fields sends none of them: its update keeps where the memory
    lives and what type it is. ``occurred_at`` goes with ``memory_type`` (the sync body is
    checked so: memories.api.serializers.transfer), so a change that gives a type gives
    the moment with it and one that keeps the type keeps the moment."""
    if change.deleted:
        return change
    fields = dict(change.fields)
    if "memory_type" in fields:
        if fields["memory_type"] != MemoryType.EPISODIC:
            fields["occurred_at"] = None
    elif local is not None:
        fields["memory_type"], fields["occurred_at"] = local.memory_type, local.occurred_at
    else:
        fields["memory_type"] = default_memory_type(change.category)
        fields["occurred_at"] = None
    if "path" not in fields:
        fields["path"] = local.path if local is not None else ""
    return replace(change, fields=fields)


def memory_fingerprint(memory: Memory) -> str:
    """The fingerprint of a stored memory (credentials compared in plaintext)."""
    fields = {name: getattr(memory, name) for name in (*SYNCED_FIELDS, *PLACE_FIELDS)}
    fields["content"] = output_content(memory, reveal=True)
    return fingerprint(memory.category, memory.key, fields)


def rank(*, updated_at: datetime, deleted: bool, fingerprint: str) -> tuple:
    """The order of memory states: later wins; at one instant a delete wins; then the hash."""
    return (updated_at, deleted, fingerprint)


def incoming_wins(change: Change, local: tuple | None) -> bool:
    """Whether ``change`` replaces the local state ranked ``local`` (None: nothing local).

    One total order over the states of a memory (:func:`rank`): the later ``updated_at``
    wins; at the same instant a delete beats an update, and between two updates the larger
    content fingerprint wins. Two instances that exchange their changes end in the same
    state, and a deleted memory never comes back through an older copy.
    """
    if local is None:
        return True
    return rank(updated_at=change.updated_at, deleted=change.deleted,
                fingerprint=change.fingerprint) > local
