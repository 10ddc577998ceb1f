"""Scope reset: the hard purge of every memory under a path (optionally of one type and/or
category), with everything that held their words or keys (docs/api.md, "Scope reset")."""

from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memories.audit import record_event
from memories.context import rebuild_now
from memories.models import (
    AuditEvent,
    ContextQueue,
    IdempotentRequest,
    Memory,
    MemoryTombstone,
    MemoryVersion,
    Source,
    under_any,
)
from memories.quotas import charging, ledger_for
from memories.reset import key_hash
from memories.services.bulk import _stored_versions
from memories.services.memory import check_reach
from minds.authentication import is_agent
from minds.models import Mind
from synapse.provenance import NO_PROVENANCE, Provenance
from synapse.refusals import Refusal


class RootReset(ValueError):
    """A reset of the root (the whole mind): not offered."""


class ResetNotAllowed(Refusal):
    """A Mind Key resetting a scope of a mind whose owner did not allow agents to."""

    status_code = 403
    code = "reset_not_allowed"

    def __init__(self):
        super().__init__("Mind Keys may reset a scope of this mind only when its owner "
                         "allows it (the mind's setting agents_may_reset).")


def memory_reset(*, mind: Mind, actor, path: str, memory_type: str | None = None,
                 category: str | None = None,
                 provenance: Provenance = NO_PROVENANCE) -> dict:
    """Purge for good every memory of ``mind`` at ``path`` (normal form, not the root) or
    below it — current, trashed, superseded and expired alike — of ``memory_type`` and
    ``category`` when given; returns the counts per table.

    One transaction: the memories and their versions (vectors and search rows are on
    them), the compaction summaries that folded any of them, their idempotency records,
    context queue rows and admin log entries; their tombstones and their audit entries
    are scrubbed; the episodes left beside them get their contexts rebuilt. Each purged
    memory leaves a tombstone without text (memories.reset). One ``reset`` audit event.
    Raises RootReset, ResetNotAllowed (a key, on a mind that does not allow it) and
    PathOutOfScope (a path-scoped key, outside its prefixes)."""
    if not path:
        raise RootReset("A reset needs a path below the root.")
    if is_agent(actor) and not mind.agents_may_reset:
        raise ResetNotAllowed()
    check_reach(actor, path)
    now = timezone.now()
    with transaction.atomic(), charging(mind):
        # One at a time with syncs and imports of the mind (memories.services.transfer).
        Mind.objects.select_for_update().filter(pk=mind.pk).first()
        scope = Q(under_any([path]))
        if memory_type:
            scope &= Q(memory_type=memory_type)
        if category:
            scope &= Q(category=category)
        mine = Memory.objects.for_mind(mind)
        rows = {row[0]: row for row in mine.filter(scope).select_for_update()
                .order_by("id").values_list("id", "category", "key", "superseded_by_id")}
        # Compaction summaries copied their originals' words: one that folded a purged
        # memory goes too (and a summary of summaries, and so on).
        summaries = {row[3] for row in rows.values() if row[3]} - set(rows)
        while summaries:
            found = {row[0]: row for row in mine.filter(pk__in=summaries, source=Source.SYSTEM)
                     .select_for_update().order_by("id")
                     .values_list("id", "category", "key", "superseded_by_id")}
            rows.update(found)
            summaries = {row[3] for row in found.values() if row[3]} - set(rows)
        ids = sorted(rows)
        counts = {"memories": len(ids)}
        # The originals outside the scope of a purged summary come back into recall, as
        # an uncompact would bring them (their summary is gone).
        counts["originals_restored"] = (
            Memory.objects.filter(mind=mind, superseded_by_id__in=ids)
            .exclude(pk__in=ids).update(superseded_at=None, superseded_by=None,
                                        updated_at=now))
        version_ids = list(MemoryVersion.objects.filter(memory_id__in=ids)
                           .values_list("pk", flat=True))
        counts["versions"] = len(version_ids)
        versions, stored = _stored_versions(ids).get(mind.pk, (0, 0))
        # Episodes left on the same timelines whose context holds a purged episode's words.
        neighbours = list(Memory.objects.filter(mind=mind, context_ids__overlap=ids)
                          .exclude(pk__in=ids).select_for_update().order_by("id")
                          .values_list("pk", flat=True)) if ids else []
        # Tombstones: the purged memories' own, and those of memories purged earlier from
        # the trash under the scope (they hold the key and path in clear), lose their text.
        old = MemoryTombstone.objects.for_mind(mind).filter(under_any([path]), reset=False)
        if category:
            old = old.filter(category=category)
        old = list(old.select_for_update().order_by("id"))
        for tombstone in old:
            tombstone.key_hash = key_hash(mind, tombstone.category, tombstone.key)
            tombstone.reset = True
            tombstone.category = tombstone.key = ""
            tombstone.path, tombstone.updated_at = path, now
        MemoryTombstone.objects.bulk_update(old, ["reset", "key_hash", "category", "key",
                                                  "path", "updated_at"])
        counts["tombstones_scrubbed"] = len(old)
        MemoryTombstone.objects.bulk_create([
            MemoryTombstone(id=memory_id, mind=mind, category="", key="", path=path, reset=True,
                            key_hash=key_hash(mind, rows[memory_id][1], rows[memory_id][2]),
                            deleted_at=now, updated_at=now) for memory_id in ids])
        counts["tombstones"] = len(ids)
        counts["idempotency_records"] = IdempotentRequest.objects.filter(
            mind=mind, body__id__in=ids).delete()[0] if ids else 0
        log_entry = apps.get_model("admin", "LogEntry")
        counts["admin_log_entries"] = log_entry.objects.filter(
            Q(content_type=ContentType.objects.get_for_model(Memory), object_id__in=ids)
            | Q(content_type=ContentType.objects.get_for_model(MemoryVersion),
                object_id__in=[str(pk) for pk in version_ids])).delete()[0] if ids else 0
        Memory.objects.filter(pk__in=ids).delete()
        # After the delete: its trigger queues the neighbours of a purged episode.
        counts["context_queue_rows"] = ContextQueue.objects.filter(
            memory_id__in=ids).delete()[0] if ids else 0
        counts["contexts_rebuilt"] = _rebuild(neighbours)
        # The audit entries of the purged memories, and of those purged earlier whose
        # tombstones were scrubbed: action, time and actor stay, the details go.
        scrubbed = ids + [tombstone.id for tombstone in old]
        counts["audit_events_scrubbed"] = AuditEvent.objects.filter(
            mind=mind, memory_id__in=scrubbed).update(
            details={"scrubbed": "reset"}) if scrubbed else 0
        ledger = ledger_for(mind.pk)
        ledger.release(memories=len(ids), versions=versions, content_bytes=stored)
        # The path is the owner's own parameter of the reset: it stays in this event.
        record_event(mind=mind, actor=actor, action="reset",
                     details={"path": path, "memory_type": memory_type or "",
                              "category": category or "", "counts": counts},
                     provenance=provenance)
        return counts


def _rebuild(ids: list[str]) -> int:
    """Rebuild (or clear) the contexts of ``ids``, locked by this transaction, now."""
    if not ids:
        return 0
    with connection.cursor() as cursor:
        done = rebuild_now(cursor, ids)
    missing = [memory_id for memory_id in ids if memory_id not in done]
    if missing:  # never: they are locked by this transaction; cleared to be sure
        Memory.objects.filter(pk__in=missing).update(context_vector=None, context_ids=[])
    return len(ids)
