"""Memories from elsewhere: a sync from another instance, a mind import from an export."""

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from memories import sync
from memories.audit import record_event
from memories.crypto import seal_content
from memories.export import backup_change, restored_place
from memories.models import (
    Category,
    Memory,
    MemoryTombstone,
    MemoryVersion,
    Source,
    live_memory_by_key,
)
from memories.quotas import charging, content_bytes, ledger_for
from memories.reset import key_hash
from memories.services.memory import (
    MemoryConflict,
    PathOutOfScope,
    agent_source,
    check_reach,
    default_path,
    mark_for_embedding,
    recorded_by,
    snapshot_version,
)
from memories.staging import Stage, temporary_table
from minds.authentication import is_agent
from minds.models import Mind
from synapse.ids import new_memory_id
from synapse.provenance import NO_PROVENANCE, Provenance

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass
class SyncResult:
    """What a sync or a merging import did, change by change."""

    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    stale: int = 0  # older than what this instance holds: ignored
    skipped_redacted: int = 0  # credentials sent without their content
    conflicts: list[dict] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)

    def counts(self) -> dict:
        return {"added": self.added, "updated": self.updated, "deleted": self.deleted,
                "unchanged": self.unchanged, "stale": self.stale,
                "skipped_redacted": self.skipped_redacted, "conflicts": len(self.conflicts)}


def memory_sync(*, mind: Mind, actor, changes: "Iterable[sync.Change]",
                provenance: Provenance = NO_PROVENANCE) -> SyncResult:
    """Apply changes from another instance (memories.sync has the rules). Idempotent.

    Whatever arrives from an agent's sync is unverified; a human's sync keeps the
    ``verified`` flag it carries. ``changes`` may be read lazily from the request body:
    they are all read and staged (memories.staging) before the first is applied, so a
    body that fails half way writes nothing. One transaction, one ``sync`` audit event.
    ``provenance`` (the request's claims, never the body's) goes on every version written.
    """
    with transaction.atomic(), charging(mind):
        stage = Stage()
        for change in changes:
            stage.add("change", asdict(change), updated_at=change.updated_at,
                      deleted=change.deleted)
        _lock_mind(mind)
        result = SyncResult()
        for batch in stage.batches(order="change"):
            _apply_changes(mind=mind, actor=actor, result=result, provenance=provenance,
                           changes=[sync.Change(**item) for _kind, item in batch])
        record_event(mind=mind, actor=actor, action="sync",
                     details={**result.counts(), "memory_ids": result.memory_ids[:1000]},
                     provenance=provenance)
        return result


def _lock_mind(mind: Mind) -> None:
    # Syncs and imports of one mind run one at a time: each sees the others' result.
    Mind.objects.select_for_update().filter(pk=mind.pk).first()


def _apply_changes(*, mind: Mind, actor, changes: list[sync.Change], result: SyncResult,
                   provenance: Provenance) -> None:
    """Apply ``changes``, which come in change order (memories.staging.Stage)."""
    ledger = ledger_for(mind.pk)
    reset = _reset_matches(mind, changes)
    for change in changes:
        if change.redacted:
            result.skipped_redacted += 1
            continue
        if not change.deleted and (change.id in reset or _hash_of(mind, change) in reset):
            # A memory purged by a scope reset never comes back (docs/api.md).
            result.conflicts.append({
                "id": change.id, "category": change.category, "key": change.key,
                "reason": "reset",
                "message": "This memory was purged by a scope reset here."})
            continue
        try:
            with ledger.savepoint():
                _apply_change(mind=mind, actor=actor, change=change, result=result,
                              provenance=provenance)
        except (IntegrityError, MemoryConflict):
            result.conflicts.append({
                "id": change.id, "category": change.category, "key": change.key,
                "reason": "Another memory of this mind holds this category and key."})
        except PathOutOfScope as refusal:
            # A path-scoped key syncs only memories under its prefixes (docs/api.md).
            result.conflicts.append({"id": change.id, "category": change.category,
                                     "key": change.key, "reason": str(refusal)})


def _hash_of(mind: Mind, change: sync.Change) -> str:
    return key_hash(mind, change.category, change.key)


def _reset_matches(mind: Mind, changes: list[sync.Change]) -> set[str]:
    """The ids and key hashes among ``changes`` that a scope reset's tombstone holds,
    except a (category, key) a live memory here holds again since (stored after the
    reset: a peer's copy of that one is an ordinary change)."""
    ids = {change.id for change in changes if change.id and not change.deleted}
    hashes = {_hash_of(mind, change): change for change in changes if not change.deleted}
    found = set()
    for tomb_id, tomb_hash in (MemoryTombstone.objects.filter(mind=mind, reset=True)
                               .filter(Q(pk__in=ids) | Q(key_hash__in=hashes))
                               .values_list("pk", "key_hash")):
        if tomb_id in ids:
            found.add(tomb_id)
        if tomb_hash and tomb_hash in hashes:
            change = hashes[tomb_hash]
            if not Memory.objects.filter(mind=mind, category=change.category, key=change.key,
                                         deleted_at__isnull=True).exists():
                found.add(tomb_hash)
    return found


def _apply_change(*, mind: Mind, actor, change: sync.Change, result: SyncResult,
                  provenance: Provenance) -> None:
    alive = None
    if change.id:
        alive = (Memory.objects.select_for_update().for_mind(mind).alive()
                 .filter(pk=change.id).first())
    if alive is None:
        alive = live_memory_by_key(mind, change.category, change.key)
    if alive is not None:
        change = sync.settled_place(change, alive)
        local = sync.rank(updated_at=alive.updated_at, deleted=False,
                          fingerprint=sync.memory_fingerprint(alive))
        if not sync.incoming_wins(change, local):
            if sync.rank(updated_at=change.updated_at, deleted=change.deleted,
                         fingerprint=change.fingerprint) == local:
                result.unchanged += 1
            else:
                result.stale += 1
            return
        if change.deleted:
            alive.deleted_at = change.deleted_at or change.updated_at
            alive.updated_at = change.updated_at
            alive.save(update_fields=["deleted_at", "updated_at"])
            result.deleted += 1
        elif sync.memory_fingerprint(alive) == change.fingerprint:
            # Same words, later time: only the clock catches up (no new version).
            alive.updated_at = change.updated_at
            alive.save(update_fields=["updated_at"])
            result.unchanged += 1
            return
        else:
            _write_synced(mind=mind, actor=actor, change=change, target=alive,
                          provenance=provenance)
            result.updated += 1
        result.memory_ids.append(alive.id)
        return
    if change.deleted:
        result.unchanged += 1
        return
    deletion = _newest_deletion(mind, change)
    if deletion is not None and not sync.incoming_wins(change, deletion):
        # Never bring a deleted memory back with a copy older than its deletion.
        result.stale += 1
        return
    trashed = (Memory.objects.select_for_update().for_mind(mind).in_trash()
               .filter(pk=change.id).first()) if change.id else None
    if trashed is None and "path" not in change.fields:
        # New here and placed nowhere: where a store without a path would put it.
        change = replace(change, fields={**change.fields, "path": default_path(actor)})
    change = sync.settled_place(change, trashed)
    memory = _write_synced(mind=mind, actor=actor, change=change, target=trashed,
                           provenance=provenance)
    result.added += 1
    result.memory_ids.append(memory.id)


def _newest_deletion(mind: Mind, change: sync.Change) -> tuple | None:
    """The rank of the latest deletion here of the memory ``change`` describes."""
    same = Q(category=change.category, key=change.key)
    if change.id:
        same |= Q(pk=change.id)
    times = [time for time in (
        Memory.objects.for_mind(mind).in_trash().filter(same)
        .order_by("-updated_at").values_list("updated_at", flat=True).first(),
        MemoryTombstone.objects.for_mind(mind).filter(same)
        .order_by("-updated_at").values_list("updated_at", flat=True).first(),
    ) if time is not None]
    if not times:
        return None
    return sync.rank(updated_at=max(times), deleted=True, fingerprint="")


def _synced_authorship(actor, change: sync.Change) -> dict:
    if is_agent(actor):
        return {"source": agent_source(change.source), "verified": False}
    return {"source": change.source or Source.USER, "verified": change.verified}


def _id_is_free(memory_id: str) -> bool:
    return not (Memory.objects.filter(pk=memory_id).exists()
                or MemoryTombstone.objects.filter(pk=memory_id).exists())


def _write_synced(*, mind: Mind, actor, change: sync.Change, target: Memory | None,
                  provenance: Provenance) -> Memory:
    """Write an incoming live state (its place settled: sync.settled_place) into
    ``target`` (None: a new memory), keeping the incoming timestamps; a new version
    snapshot records it. A path-scoped key's write stays under its prefixes."""
    check_reach(actor, change.fields["path"])
    if target is None:
        memory_id = change.id if change.id and _id_is_free(change.id) else new_memory_id()
        target = Memory(id=memory_id, mind=mind, version=0,
                        created_at=change.created_at or change.updated_at)
        insert = True
    else:
        insert = False
    memory = target
    memory.category, memory.key = change.category, change.key
    for name in (*sync.SYNCED_FIELDS, *sync.PLACE_FIELDS):
        setattr(memory, name, change.fields[name])
    memory.content = seal_content(memory.category, change.fields["content"])
    authorship = _synced_authorship(actor, change)
    memory.source, memory.verified = authorship["source"], authorship["verified"]
    memory.verified_by = actor if memory.verified else None
    memory.verified_at = (change.verified_at or change.updated_at) if memory.verified else None
    memory.version += 1
    memory.updated_at = change.updated_at
    memory.deleted_at = None
    mark_for_embedding(memory)
    memory.save(force_insert=insert)
    if insert:
        ledger_for(mind.pk).charge(memories=1)
    # The sender's word for the source is kept on the version as a claim, never trusted.
    snapshot_version(memory, actor, provenance=provenance, claimed_source=change.source or "")
    return memory


class ImportRejected(Exception):
    """An export that cannot be restored as it stands (the message says why)."""


def mind_import(*, mind: Mind, actor, backup: "Iterable[tuple[str, dict]]",
                provenance: Provenance = NO_PROVENANCE) -> dict:
    """Restore a JSON export (the ``("memory" | "tombstone", item)`` pairs of
    memories.export.read_backup, read lazily from the body) into ``mind``.

    Into an empty mind (no memories, not even in the trash) it is restored exactly:
    every version, tombstone, timestamp and provenance, ids kept where no other memory
    holds them, memories written in the export's order (so ``seq``, the timeline's
    tie-break, keeps their order). Into a non-empty mind the current states are merged
    with the sync rules. Agents import unverified memories. The whole export is read and staged
    (memories.staging) before anything is written, then applied in batches: memory
    holds a batch, never the export. One transaction, one ``import`` audit event. Every
    version written records the importing request's ``provenance`` (what the export says
    about its versions' agents is not taken). Raises ImportRejected."""
    with transaction.atomic(), charging(mind):
        stage = Stage()
        for kind, item in backup:
            stage.add(kind, item, updated_at=item["updated_at"],
                      deleted=kind == "tombstone" or item["deleted_at"] is not None)
        _lock_mind(mind)
        empty = not (Memory.objects.for_mind(mind).exists()
                     or MemoryTombstone.objects.filter(mind=mind).exists())
        if empty:
            try:
                with transaction.atomic():
                    counts = {"mode": "restore",
                              **_restore_backup(mind=mind, actor=actor, stage=stage,
                                                provenance=provenance)}
            except IntegrityError as error:
                raise ImportRejected(DUPLICATES_IN_EXPORT) from error
        else:
            result = SyncResult()
            for batch in stage.batches(order="change"):
                _apply_changes(mind=mind, actor=actor, result=result, provenance=provenance,
                               changes=[backup_change(kind, item) for kind, item in batch])
            counts = {"mode": "merge", **result.counts()}
        record_event(mind=mind, actor=actor, action="import", details=counts,
                     provenance=provenance)
        return counts


DUPLICATES_IN_EXPORT = ("The export holds two memories with the same id, two with the same "
                        "category and key outside the trash, or two versions with the same "
                        "number.")


def _free_ids(mind: Mind, wanted: list[str]) -> dict[str, str]:
    """The id each of ``wanted`` gets: its own, or a new one where another mind holds it.

    ``mind`` was empty when the restore began, so an id it holds now came earlier in
    the same export: a duplicate, refused."""
    taken: set[str] = set()
    for model in (Memory, MemoryTombstone):
        for pk, mind_id in model.objects.filter(pk__in=wanted).values_list("pk", "mind_id"):
            if mind_id == mind.pk:
                raise ImportRejected(DUPLICATES_IN_EXPORT)
            taken.add(pk)
    return {old: new_memory_id() if old in taken else old for old in wanted}


class _Supersessions:
    """Which restored memory is superseded by which, kept in temporary tables until
    every memory has been restored (the newer memory may come later in the export)."""

    def __init__(self):
        self.ids = temporary_table("old text PRIMARY KEY, new text NOT NULL")
        self.links = temporary_table("memory text NOT NULL, target text NOT NULL")

    def add(self, chunk: list[dict], new_id: dict[str, str]) -> None:
        with connection.cursor() as cursor:
            # Table names here and below are ours (memories.staging), never input.
            cursor.executemany(f"INSERT INTO {self.ids} VALUES (%s, %s)",  # noqa: S608
                               [(item["id"], new_id[item["id"]]) for item in chunk])
            links = [(new_id[item["id"]], item["superseded_by"]) for item in chunk
                     if item["superseded_by"] is not None]
            if links:
                cursor.executemany(f"INSERT INTO {self.links} VALUES (%s, %s)",  # noqa: S608
                                   links)

    def apply(self) -> None:
        table = Memory._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} AS memory SET superseded_by_id = ids.new "  # noqa: S608
                           f"FROM {self.links} AS link JOIN {self.ids} AS ids "
                           "ON ids.old = link.target WHERE memory.id = link.memory")


def _restore_backup(*, mind: Mind, actor, stage: Stage, provenance: Provenance) -> dict:
    agent = is_agent(actor)
    writer = {**recorded_by(actor), **provenance.as_fields()}
    supersessions = _Supersessions()
    restored = versions_restored = skipped_redacted = reassigned = tombstones = 0
    for batch in stage.batches(kind="memory"):
        chunk = [item for _kind, item in batch if not item["content_redacted"]]
        skipped_redacted += len(batch) - len(chunk)
        new_id = _free_ids(mind, [item["id"] for item in chunk])
        reassigned += sum(1 for old, new in new_id.items() if old != new)
        rows, versions = [], []
        for item in chunk:
            source = agent_source(item["source"]) if agent else item["source"]
            verified = item["verified"] and not agent
            rows.append(Memory(
                id=new_id[item["id"]], mind=mind, category=item["category"], key=item["key"],
                content=seal_content(item["category"], item["content"]), tags=item["tags"],
                priority=item["priority"], source=source, verified=verified,
                verified_by=actor if verified else None,
                verified_at=item["verified_at"] if verified else None,
                confidence=item["confidence"], expires_at=item["expires_at"],
                version=item["version"], created_at=item["created_at"],
                updated_at=item["updated_at"], deleted_at=item["deleted_at"],
                superseded_at=item["superseded_at"], **restored_place(item),
                embedding_pending=item["category"] != Category.CREDENTIALS))
            versions += [MemoryVersion(
                memory_id=new_id[item["id"]], version=snapshot["version"],
                category=snapshot["category"], key=snapshot["key"],
                content=seal_content(snapshot["category"], snapshot["content"]),
                tags=snapshot["tags"], priority=snapshot["priority"],
                source=agent_source(snapshot["source"]) if agent else snapshot["source"],
                confidence=snapshot["confidence"], expires_at=snapshot["expires_at"],
                **restored_place(snapshot), created_at=snapshot["created_at"], **writer,
                parent=snapshot["parent"], reverted_from=snapshot["reverted_from"],
                # What the backup says about the version is kept as a claim, shown as such.
                claimed_source=snapshot["claimed_source"] or snapshot["source"],
                claimed_actor=snapshot["claimed_actor"] or snapshot["actor"])
                for snapshot in item["versions"] if not snapshot["content_redacted"]]
        ledger_for(mind.pk).charge(
            memories=len(rows), versions=len(versions),
            content_bytes=sum(content_bytes(version.content) for version in versions))
        Memory.objects.bulk_create(rows)
        MemoryVersion.objects.bulk_create(versions)
        supersessions.add(chunk, new_id)
        restored += len(rows)
        versions_restored += len(versions)
    supersessions.apply()
    for batch in stage.batches(kind="tombstone"):
        new_id = _free_ids(mind, [item["id"] for _kind, item in batch])
        reassigned += sum(1 for old, new in new_id.items() if old != new)
        MemoryTombstone.objects.bulk_create([
            MemoryTombstone(id=new_id[item["id"]], mind=mind, category=item["category"],
                            key=item["key"], path=item["path"], deleted_at=item["deleted_at"],
                            updated_at=item["updated_at"], reset=item["reset"])
            for _kind, item in batch])
        tombstones += len(batch)
    return {"memories": restored, "versions": versions_restored, "tombstones": tombstones,
            "skipped_redacted": skipped_redacted, "ids_reassigned": reassigned}
