"""Writes over many memories at once: bulk delete, purging the trash, rotating credentials."""

from datetime import datetime

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from memories.audit import record_event
from memories.crypto import CredentialsUnreadable, rotate_token
from memories.models import (
    Category,
    Memory,
    MemoryTombstone,
    MemoryVersion,
)
from memories.quotas import Ledger, StoredBytes
from minds.models import Mind
from synapse.provenance import NO_PROVENANCE, Provenance


def memory_bulk_delete(*, mind: Mind, actor, ids: list[str],
                       provenance: Provenance = NO_PROVENANCE) -> tuple[list[str], list[str]]:
    """Move the listed memories of ``mind`` to the trash; returns (deleted, not found).

    Ids of other minds, unknown ids and memories already in the trash are not found and
    stay untouched. One transaction, one ``bulk_delete`` audit event."""
    wanted = list(dict.fromkeys(ids))
    with transaction.atomic():
        found = list(Memory.objects.select_for_update().for_mind(mind).alive()
                     .filter(pk__in=wanted).order_by("id").values_list("id", flat=True))
        if found:
            now = timezone.now()
            Memory.objects.filter(pk__in=found).update(deleted_at=now, updated_at=now)
            record_event(mind=mind, actor=actor, action="bulk_delete",
                         details={"count": len(found), "memory_ids": found},
                         provenance=provenance)
    deleted = set(found)
    return found, [memory_id for memory_id in wanted if memory_id not in deleted]


def memory_purge_trash(*, older_than: datetime, actor=None, batch_size: int = 1000) -> int:
    """Delete for good what has been in the trash since before ``older_than``.

    Each purged memory leaves a tombstone, so sync still knows it was deleted. Works in
    batches (one transaction and one ``purge`` audit event per mind each); rows another
    purge holds are skipped. Returns how many memories were purged."""
    purged = 0
    while True:
        with transaction.atomic():
            batch = list(Memory.objects.in_trash().filter(deleted_at__lt=older_than)
                         .select_for_update(skip_locked=True)
                         .only("id", "mind_id", "category", "key", "path", "deleted_at",
                               "updated_at")
                         .order_by("deleted_at", "id")[:batch_size])
            if not batch:
                return purged
            MemoryTombstone.objects.bulk_create([
                MemoryTombstone(id=memory.id, mind_id=memory.mind_id, category=memory.category,
                                key=memory.key, path=memory.path, deleted_at=memory.deleted_at,
                                updated_at=memory.updated_at) for memory in batch])
            freed = _stored_versions([memory.id for memory in batch])
            Memory.objects.filter(pk__in=[memory.id for memory in batch]).delete()
            by_mind: dict[str, list[str]] = {}
            for memory in batch:
                by_mind.setdefault(memory.mind_id, []).append(memory.id)
            for mind in Mind.objects.filter(pk__in=by_mind).order_by("pk"):
                ledger = Ledger(mind)
                versions, stored = freed.get(mind.pk, (0, 0))
                ledger.release(memories=len(by_mind[mind.pk]), versions=versions,
                               content_bytes=stored)
                ledger.write()
                record_event(mind=mind, actor=actor, action="purge",
                             details={"count": len(by_mind[mind.pk]),
                                      "memory_ids": by_mind[mind.pk],
                                      "deleted_before": older_than.isoformat()})
            purged += len(batch)


def _stored_versions(memory_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Per mind: how many versions the listed memories hold, and their content bytes."""
    rows = (MemoryVersion.objects.filter(memory_id__in=memory_ids)
            .values("memory__mind_id")
            .annotate(count=Count("id"), stored=Sum(StoredBytes("content"))))
    return {row["memory__mind_id"]: (row["count"], row["stored"] or 0) for row in rows}


class CredentialsNotRotated(Exception):
    """A credentials row that no configured key opens: rotation stopped there."""

    def __init__(self, row: Memory | MemoryVersion):
        super().__init__(f"{type(row).__name__} {row.pk}")
        self.row = row


def credentials_rotate(*, batch_size: int = 500) -> dict[str, int]:
    """Re-encrypt the content of every credentials memory and version (all minds, trash
    included) with the newest key; return how many of each.

    Batches in primary-key order, one transaction each with its rows locked, so writers
    wait for at most one batch (one transaction for the whole run would hold every secret
    locked until the end). Only the content changes: no version, no timestamp, no audit
    event. Raises CredentialsNotRotated at the first row no key opens; the rows before
    it stay rotated, none after it is touched."""
    return {"memories": _rotate(Memory, batch_size=batch_size),
            "versions": _rotate(MemoryVersion, batch_size=batch_size)}


def _rotate(model: type[Memory] | type[MemoryVersion], *, batch_size: int) -> int:
    done, after = 0, None
    while True:
        with transaction.atomic():
            rows = model.objects.select_for_update().filter(category=Category.CREDENTIALS)
            if after is not None:
                rows = rows.filter(pk__gt=after)
            batch = list(rows.order_by("pk").only("pk", "content")[:batch_size])
            if not batch:
                return done
            for row in batch:
                try:
                    row.content = rotate_token(row.content)
                except CredentialsUnreadable:
                    raise CredentialsNotRotated(row) from None
            model.objects.bulk_update(batch, ["content"])
        done += len(batch)
        after = batch[-1].pk
