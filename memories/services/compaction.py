"""Compaction: summaries that supersede clusters of memories, and undoing them."""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from memories.audit import record_event
from memories.compaction import AGENT_SOURCES, SUMMARY_CONFIDENCE, CompactionPlan
from memories.models import (
    Memory,
    Source,
)
from memories.quotas import charging
from memories.services.memory import create_memory
from minds.models import Mind
from synapse.provenance import NO_PROVENANCE, Provenance


@dataclass(frozen=True)
class CompactedCluster:
    summary: Memory
    superseded: list[str]


def memory_compact(*, mind: Mind, actor, plan: CompactionPlan,
                   provenance: Provenance = NO_PROVENANCE) -> list[CompactedCluster]:
    """Apply a compaction plan (memories.compaction) in one transaction.

    For each cluster: one summary memory on the cluster's path, of its type
    (``source=system``, unverified, confidence 0.7)
    and the originals marked superseded by it — out of recall, still readable by id, and
    back with ``memory_uncompact``. A cluster whose members changed since it was planned
    (edited, verified, deleted, superseded) is skipped whole, so a summary never says
    something its originals no longer say and a verified memory is never touched.
    """
    done = []
    with transaction.atomic(), charging(mind):
        for cluster in plan.clusters:
            planned = {member.id: member.version for member in cluster.members}
            locked = list(Memory.objects.select_for_update().for_mind(mind).current()
                          .filter(pk__in=planned, verified=False, source__in=AGENT_SOURCES)
                          .order_by("id"))
            if len(locked) != len(planned) or any(
                    planned[member.id] != member.version for member in locked):
                continue
            summary = create_memory(
                mind=mind, actor=actor, category=cluster.category,
                key=_free_key(mind, cluster.category, cluster.key), changes={
                    "content": cluster.content, "tags": cluster.tags,
                    "priority": cluster.priority, "path": cluster.path,
                    "memory_type": cluster.memory_type,
                    "expires_at": cluster.expires_at, "source": Source.SYSTEM,
                    "verified": False, "confidence": SUMMARY_CONFIDENCE},
                provenance=provenance)
            now = timezone.now()
            for member in locked:
                member.superseded_at = now
                member.superseded_by = summary
                member.updated_at = now
            Memory.objects.bulk_update(locked, ["superseded_at", "superseded_by",
                                                "updated_at"])
            for member in locked:
                record_event(mind=mind, actor=actor, action="compact", memory_id=member.id,
                             details={"superseded_by": summary.id,
                                      "cluster": sorted(planned)}, provenance=provenance)
            done.append(CompactedCluster(summary=summary, superseded=sorted(planned)))
    return done


def _free_key(mind: Mind, category: str, key: str) -> str:
    """``key``, or ``key_2``, ``key_3``… when a memory outside the trash holds it."""
    taken = set(Memory.objects.for_mind(mind).alive().filter(
        category=category, key__startswith=key).values_list("key", flat=True))
    candidate, number = key, 1
    while candidate in taken:
        number += 1
        candidate = f"{key}_{number}"
    return candidate


def memory_uncompact(*, summary: Memory, actor,
                     provenance: Provenance = NO_PROVENANCE) -> list[Memory]:
    """Undo a compaction: the originals superseded by ``summary`` come back into recall
    and the summary goes to the trash. Returns the originals."""
    with transaction.atomic():
        locked = Memory.objects.locked(summary.pk)
        originals = list(Memory.objects.select_for_update().filter(superseded_by=locked)
                         .order_by("id"))
        if not originals:
            raise ValueError(f"Memory {locked.id} is not a compaction summary with "
                             "superseded originals.")
        now = timezone.now()
        for original in originals:
            original.superseded_at = None
            original.superseded_by = None
            original.updated_at = now
        Memory.objects.bulk_update(originals, ["superseded_at", "superseded_by", "updated_at"])
        for original in originals:
            record_event(mind=locked.mind, actor=actor, action="uncompact",
                         memory_id=original.id, details={"summary": locked.id},
                         provenance=provenance)
        if locked.deleted_at is None:
            locked.deleted_at = now
            locked.updated_at = now
            locked.save(update_fields=["deleted_at", "updated_at"])
            record_event(mind=locked.mind, actor=actor, action="delete", memory_id=locked.id,
                         details={"category": locked.category, "key": locked.key,
                                  "reason": "uncompact"}, provenance=provenance)
        return originals
