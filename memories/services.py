"""Every write to memories. Keyword-only, one transaction each, audited.

API views, the web UI, admin actions, sync, MCP and management commands all call these,
so the invariants hold everywhere: a version snapshot for every version, an audit event
for every state change, the embedding mark for every change of meaning, and provenance
(``source``, ``verified``) that follows who wrote, never what the body claims.
"""

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone
from django.utils.crypto import salted_hmac

from memories import sync
from memories.audit import describe_actor, record_event
from memories.compaction import AGENT_SOURCES, SUMMARY_CONFIDENCE, CompactionPlan
from memories.crypto import CredentialsUnreadable, rotate_token, seal_content
from memories.export import backup_change
from memories.models import (
    VERSIONED_FIELDS,
    Category,
    IdempotentRequest,
    Memory,
    MemoryTombstone,
    MemoryVersion,
    Source,
)
from memories.naming import derive_key, normalize_tags
from memories.quotas import Ledger, StoredBytes, charging, content_bytes, ledger_for
from memories.staging import Stage, temporary_table
from minds.authentication import is_agent
from minds.models import Mind
from synapse.ids import new_memory_id

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

AGENT_DEFAULT_CONFIDENCE = 0.7
USER_DEFAULT_CONFIDENCE = 1.0
# Fields whose change alters what a memory means, and so its embedding.
EMBEDDED_FIELDS = ("category", "key", "content", "tags")


class MemoryConflict(Exception):
    """A write would give two memories outside the trash the same (category, key)."""


class CredentialsContentRequired(ValidationError):
    """A credentials memory moved to another category without its content re-sent: that
    would silently decrypt the secret into search, embeddings and recall."""

    def __init__(self):
        super().__init__({"content": [
            "Moving a credentials memory to another category puts its content in plain "
            "text into search, embeddings and recall: send the content again with the new "
            "category to confirm."]}, code="credentials_content_required")


@dataclass(frozen=True)
class StoreResult:
    memory: Memory
    status: str  # "stored", "updated" or "unchanged"


class VersionConflict(Exception):
    """The memory changed since the version the caller saw (``stale`` lists which)."""

    def __init__(self, message: str, stale: list[dict]):
        super().__init__(message)
        self.stale = stale

    def naming_each(self) -> str:
        """The message, naming each memory that changed (or left) and how."""
        details = [f"{item['id']} (you saw version {item['version']}, "
                   + (f"it is now version {item['current_version']})"
                      if item.get("current_version") else "it is gone)")
                   for item in self.stale]
        return f"{self} Changed: {', '.join(details)}."


# What an agent may say a memory came from; never ``user``.
AGENT_WRITABLE_SOURCES = (Source.AGENT, Source.TOOL, Source.SYSTEM)


def agent_source(source: str | None) -> str:
    """The source an agent may give a memory: never ``user``, whatever it sends or copies."""
    return source if source in AGENT_WRITABLE_SOURCES else Source.AGENT


def _provenance(actor, source: str | None) -> dict:
    """``source``/``verified`` from who writes: humans write verified user memories."""
    if is_agent(actor):
        return {"source": agent_source(source), "verified": False}
    return {"source": Source.USER, "verified": True}


def recorded_by(actor) -> dict:
    """The trusted writer of a version, from the credentials (never from a body)."""
    actor_type, actor_id, label = describe_actor(actor)
    return {"recorded_by_type": actor_type, "recorded_by_id": actor_id, "recorded_by": label}


def _snapshot(memory: Memory, actor, claimed_source: str = "") -> None:
    ledger_for(memory.mind_id).charge(versions=1, content_bytes=content_bytes(memory.content))
    MemoryVersion.objects.create(
        memory=memory, version=memory.version, created_at=memory.updated_at,
        claimed_source=claimed_source, **recorded_by(actor),
        **{name: getattr(memory, name) for name in VERSIONED_FIELDS})


def _mark_for_embedding(memory: Memory) -> None:
    # Credentials never reach the model; everything else waits for the worker.
    memory.embedding = None
    memory.embedding_model = ""
    memory.embedding_pending = not memory.is_credentials


def _locked_current(mind: Mind, category: str, key: str) -> Memory | None:
    return (Memory.objects.select_for_update().for_mind(mind).alive()
            .filter(category=category, key=key).first())


def memory_store(*, mind: Mind, actor, category: str, content: str, key: str | None = None,
                 tags: list[str] | None = None, priority: str | None = None,
                 confidence: float | None = None, expires_at: datetime | None = None,
                 expires_given: bool = False, source: str | None = None) -> StoreResult:
    """Create a memory, or update the one with the same (category, key) in the mind.

    Fields left out (None) keep their stored values on update. An identical payload
    changes nothing and answers ``unchanged``. Concurrent stores of one key serialise on
    the row lock, or on the unique index when the row does not exist yet.
    """
    key = key or derive_key(content, category)
    provenance = _provenance(actor, source)
    changes: dict = {"content": content}
    if tags is not None:
        changes["tags"] = normalize_tags(tags)
    if priority is not None:
        changes["priority"] = priority
    if confidence is not None:
        changes["confidence"] = confidence
    if expires_given:
        changes["expires_at"] = expires_at

    with transaction.atomic(), charging(mind):
        existing = _locked_current(mind, category, key)
        if existing is None:
            try:
                with transaction.atomic():
                    memory = _create(mind=mind, actor=actor, category=category, key=key,
                                     changes={**changes, **provenance})
                return StoreResult(memory, "stored")
            except IntegrityError:
                # Another writer created this key between our lookup and insert.
                existing = _locked_current(mind, category, key)
                if existing is None:
                    raise
        memory, changed = _apply(memory=existing, actor=actor, changes=changes,
                                 provenance=provenance, action="update")
        return StoreResult(memory, "updated" if changed else "unchanged")


class IdempotencyConflict(Exception):
    """An Idempotency-Key reused with another request body, or still in progress."""


@dataclass(frozen=True)
class IdempotentAnswer:
    status_code: int
    body: dict
    replayed: bool  # the first answer to this key, given again


def memory_store_once(*, mind: Mind, actor, idempotency_key: str, request_body,
                      answer: "Callable[[StoreResult], tuple[int, dict]]",
                      **fields) -> IdempotentAnswer:
    """:func:`memory_store` (``fields``) under an Idempotency-Key: the first answer
    (``answer(result)``: status code and body) is kept IDEMPOTENCY_TTL_SECONDS and given
    again to a retry with the same body; the same key with another body, or while the
    first request is still running, is an IdempotencyConflict."""
    # Keyed with SECRET_KEY: the body may hold a credential, and a bare hash of a
    # short secret kept in the database could be reversed by guessing.
    fingerprint = salted_hmac("synapse.idempotency", json.dumps(
        request_body, sort_keys=True, default=str), algorithm="sha256").hexdigest()
    ttl = settings.SYNAPSE["IDEMPOTENCY_TTL_SECONDS"]
    cutoff = timezone.now() - timezone.timedelta(seconds=ttl)
    for _attempt in range(2):
        previous = IdempotentRequest.objects.filter(mind=mind, key=idempotency_key,
                                                    created_at__gte=cutoff).first()
        if previous is not None:
            if previous.fingerprint != fingerprint:
                raise IdempotencyConflict(
                    "This Idempotency-Key was used with a different request.")
            return IdempotentAnswer(previous.status_code, previous.body, replayed=True)
        try:
            with transaction.atomic():
                IdempotentRequest.objects.filter(mind=mind, key=idempotency_key,
                                                 created_at__lt=cutoff).delete()
                status_code, body = answer(memory_store(mind=mind, actor=actor, **fields))
                # The unique (mind, key) index makes a concurrent retry wait here,
                # then fail and roll its store back; it replays our answer instead.
                IdempotentRequest.objects.create(mind=mind, key=idempotency_key,
                                                 fingerprint=fingerprint,
                                                 status_code=status_code, body=body)
            return IdempotentAnswer(status_code, body, replayed=False)
        except IntegrityError:
            continue
    raise IdempotencyConflict("A request with this Idempotency-Key is in progress; retry.")


def _create(*, mind: Mind, actor, category: str, key: str, changes: dict) -> Memory:
    now = timezone.now()
    default_confidence = (AGENT_DEFAULT_CONFIDENCE if is_agent(actor)
                          else USER_DEFAULT_CONFIDENCE)
    memory = Memory(mind=mind, category=category, key=key, created_at=now, updated_at=now,
                    confidence=default_confidence, version=1)
    for name, value in changes.items():
        setattr(memory, name, value)
    if memory.verified and not is_agent(actor):
        memory.verified_by = actor
        memory.verified_at = now
    memory.content = seal_content(memory.category, memory.content)
    _mark_for_embedding(memory)
    memory.save(force_insert=True)
    ledger_for(mind.pk).charge(memories=1)
    _snapshot(memory, actor)
    record_event(mind=mind, actor=actor, action="store", memory_id=memory.id,
                 details={"category": category, "key": key, "version": 1})
    return memory


def _apply(*, memory: Memory, actor, changes: dict, provenance: dict,
           action: str) -> tuple[Memory, bool]:
    """Apply field changes to a locked row; a new version when anything changed.

    Provenance (source, verified) follows the writer, but only when the write changes
    something: an agent repeating a verified memory word for word leaves it verified.
    """
    # Compare plaintext: a credentials token differs on every encryption (random IV).
    plaintext = _readable_content(memory)
    current = {name: plaintext if name == "content" else getattr(memory, name)
               for name in {*changes, *provenance}}
    if not any(current[name] != value for name, value in changes.items()):
        return memory, False
    changes = {**changes, **provenance}
    changed_fields = [name for name, value in changes.items() if current[name] != value]
    versioned = [name for name in changed_fields if name in VERSIONED_FIELDS]
    now = timezone.now()
    for name in changed_fields:
        setattr(memory, name, changes[name])
    if "content" in changed_fields or "category" in changed_fields:
        if plaintext is None and "content" not in changed_fields:
            raise CredentialsUnreadable(f"Memory {memory.id} cannot be re-categorised: its "
                                        "credentials key is no longer configured.")
        memory.content = seal_content(memory.category, changes.get("content", plaintext))
    if "verified" in changed_fields:
        memory.verified_by = None if is_agent(actor) else actor
        memory.verified_at = None if is_agent(actor) else now
    if any(name in EMBEDDED_FIELDS for name in versioned):
        _mark_for_embedding(memory)
    memory.version += 1
    memory.updated_at = now
    try:
        with transaction.atomic():
            memory.save()
    except IntegrityError as error:
        raise MemoryConflict(
            f"A memory with category {memory.category!r} and key {memory.key!r} already "
            "exists in this mind.") from error
    _snapshot(memory, actor)
    record_event(mind=memory.mind, actor=actor, action=action, memory_id=memory.id,
                 details={"version": memory.version, "fields": sorted(versioned)})
    return memory, True


def _readable_content(memory: Memory) -> str | None:
    """The stored plaintext, or None when no configured key opens it (a write replaces it)."""
    try:
        return memory.plaintext_content()
    except CredentialsUnreadable:
        return None


def memory_update(*, memory: Memory, actor, **fields) -> tuple[Memory, bool]:
    """Partial update (content, tags, priority, confidence, expires_at, key, category).

    Returns the memory and whether anything changed. Raises MemoryConflict when the new
    (category, key) is taken, CredentialsContentRequired when a credentials memory would
    leave its category without the content sent again.
    """
    with transaction.atomic(), charging(memory.mind):
        locked = Memory.objects.select_for_update().select_related("mind").get(pk=memory.pk)
        if (locked.is_credentials and "content" not in fields
                and fields.get("category", Category.CREDENTIALS) != Category.CREDENTIALS):
            raise CredentialsContentRequired()
        changes = dict(fields)
        if "tags" in changes:
            changes["tags"] = normalize_tags(changes["tags"])
        provenance = _provenance(actor, changes.pop("source", None))
        return _apply(memory=locked, actor=actor, changes=changes, provenance=provenance,
                      action="update")


def memory_delete(*, memory: Memory, actor) -> Memory:
    """Move a memory to the trash (restorable until purged)."""
    with transaction.atomic():
        locked = Memory.objects.select_for_update().get(pk=memory.pk)
        if locked.deleted_at is None:
            now = timezone.now()
            locked.deleted_at = now
            locked.updated_at = now
            locked.save(update_fields=["deleted_at", "updated_at"])
            record_event(mind=locked.mind, actor=actor, action="delete", memory_id=locked.id,
                         details={"category": locked.category, "key": locked.key})
        return locked


def memory_restore(*, memory: Memory, actor) -> Memory:
    """Take a memory out of the trash. Raises MemoryConflict when its (category, key) was
    reused meanwhile by a memory outside the trash."""
    with transaction.atomic():
        locked = Memory.objects.select_for_update().select_related("mind").get(pk=memory.pk)
        if locked.deleted_at is None:
            return locked
        locked.deleted_at = None
        locked.updated_at = timezone.now()
        try:
            with transaction.atomic():
                locked.save(update_fields=["deleted_at", "updated_at"])
        except IntegrityError as error:
            raise MemoryConflict(
                f"The key {locked.key!r} ({locked.category}) was reused by another memory "
                "while this one was in the trash; delete or rename that one first.") from error
        record_event(mind=locked.mind, actor=actor, action="restore", memory_id=locked.id,
                     details={"category": locked.category, "key": locked.key})
        return locked


def memory_revert(*, memory: Memory, actor, version: int) -> Memory:
    """Make a new version equal to an earlier one (``version``); history is kept."""
    with transaction.atomic(), charging(memory.mind):
        locked = Memory.objects.select_for_update().select_related("mind").get(pk=memory.pk)
        snapshot = MemoryVersion.objects.filter(memory=locked, version=version).first()
        if snapshot is None:
            raise MemoryVersion.DoesNotExist(f"Memory {locked.id} has no version {version}.")
        changes = {name: getattr(snapshot, name) for name in VERSIONED_FIELDS
                   if name != "source"}
        changes["content"] = snapshot.plaintext_content()
        # An agent reverting to a human's version writes it as an agent (never source=user,
        # never verified): the version's source is copied only when an agent may claim it.
        provenance = _provenance(actor, snapshot.source if is_agent(actor) else None)
        reverted, _changed = _apply(memory=locked, actor=actor, changes=changes,
                                    provenance=provenance, action="revert")
        return reverted


def memory_set_verified(*, memory: Memory, user, verified: bool,
                        version: int | None = None) -> Memory:
    """Verify or unverify a memory. Humans only: callers must have checked that ``user``
    is a human (API: HumanOnly permission); agents are refused here too.

    ``version`` pins what the human saw: when the memory has another version now (an
    edit since the page loaded), VersionConflict is raised and nothing changes."""
    if is_agent(user) or user is None:
        raise PermissionError("Only a human may verify or unverify a memory.")
    with transaction.atomic():
        locked = Memory.objects.select_for_update().select_related("mind").get(pk=memory.pk)
        if version is not None and locked.version != version:
            raise VersionConflict(
                f"Memory {locked.id} changed since you saw it (you saw version {version}, "
                f"it is now version {locked.version}); read it again before verifying.",
                stale=[_stale(locked.id, seen=version, current=locked.version)])
        _set_verified(locked, user=user, verified=verified)
        return locked


def _stale(memory_id: str, *, seen: int, current: int | None) -> dict:
    return {"id": memory_id, "version": seen, "current_version": current}


def _set_verified(locked: Memory, *, user, verified: bool) -> None:
    if locked.verified == verified:
        return
    locked.verified = verified
    locked.verified_by = user if verified else None
    locked.verified_at = timezone.now() if verified else None
    locked.save(update_fields=["verified", "verified_by", "verified_at"])
    record_event(mind=locked.mind, actor=user, action="verify" if verified else "unverify",
                 memory_id=locked.id, details={"version": locked.version})


def memory_verify_many(*, mind: Mind, user, seen: dict[str, int]) -> list[Memory]:
    """Verify several memories of ``mind``, each at the version the human saw
    (``seen``: id → version). All or nothing: when any of them is gone (deleted, of
    another mind) or has another version now, VersionConflict lists every such one and
    none is verified. Already verified memories at the seen version stay as they are."""
    if is_agent(user) or user is None:
        raise PermissionError("Only a human may verify or unverify a memory.")
    with transaction.atomic():
        locked = {memory.id: memory for memory in
                  Memory.objects.select_for_update().select_related("mind").for_mind(mind)
                  .alive().filter(pk__in=list(seen)).order_by("id")}
        stale = [_stale(memory_id, seen=version,
                        current=locked[memory_id].version if memory_id in locked else None)
                 for memory_id, version in seen.items()
                 if memory_id not in locked or locked[memory_id].version != version]
        if stale:
            raise VersionConflict(
                f"{len(stale)} of the {len(seen)} selected memories changed or left since "
                "you saw them; nothing was verified. Reload and check them again.",
                stale=stale)
        for memory in locked.values():
            _set_verified(memory, user=user, verified=True)
        return list(locked.values())


# -- Lifecycle: sync, import, bulk delete, purge -------------------------------------------


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


def memory_sync(*, mind: Mind, actor, changes: "Iterable[sync.Change]") -> SyncResult:
    """Apply changes from another instance (memories.sync has the rules). Idempotent.

    Whatever arrives from an agent's sync is unverified; a human's sync keeps the
    ``verified`` flag it carries. ``changes`` may be read lazily from the request body:
    they are all read and staged (memories.staging) before the first is applied, so a
    body that fails half way writes nothing. One transaction, one ``sync`` audit event.
    """
    with transaction.atomic(), charging(mind):
        stage = Stage()
        for change in changes:
            stage.add("change", asdict(change), updated_at=change.updated_at,
                      deleted=change.deleted)
        _lock_mind(mind)
        result = SyncResult()
        for batch in stage.batches(order="change"):
            _apply_changes(mind=mind, actor=actor, result=result,
                           changes=[sync.Change(**item) for _kind, item in batch])
        record_event(mind=mind, actor=actor, action="sync",
                     details={**result.counts(), "memory_ids": result.memory_ids[:1000]})
        return result


def _lock_mind(mind: Mind) -> None:
    # Syncs and imports of one mind run one at a time: each sees the others' result.
    Mind.objects.select_for_update().filter(pk=mind.pk).first()


def _apply_changes(*, mind: Mind, actor, changes: list[sync.Change],
                   result: SyncResult) -> None:
    """Apply ``changes``, which come in change order (memories.staging.Stage)."""
    ledger = ledger_for(mind.pk)
    for change in changes:
        if change.redacted:
            result.skipped_redacted += 1
            continue
        try:
            with ledger.savepoint():
                _apply_change(mind=mind, actor=actor, change=change, result=result)
        except (IntegrityError, MemoryConflict):
            result.conflicts.append({
                "id": change.id, "category": change.category, "key": change.key,
                "reason": "Another memory of this mind holds this category and key."})


def _apply_change(*, mind: Mind, actor, change: sync.Change, result: SyncResult) -> None:
    alive = None
    if change.id:
        alive = (Memory.objects.select_for_update().for_mind(mind).alive()
                 .filter(pk=change.id).first())
    if alive is None:
        alive = _locked_current(mind, change.category, change.key)
    if alive is not None:
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
            _write_synced(mind=mind, actor=actor, change=change, target=alive)
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
    memory = _write_synced(mind=mind, actor=actor, change=change, target=trashed)
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
        MemoryTombstone.objects.filter(mind=mind).filter(same)
        .order_by("-updated_at").values_list("updated_at", flat=True).first(),
    ) if time is not None]
    if not times:
        return None
    return sync.rank(updated_at=max(times), deleted=True, fingerprint="")


def _synced_provenance(actor, change: sync.Change) -> dict:
    if is_agent(actor):
        return {"source": agent_source(change.source), "verified": False}
    return {"source": change.source or Source.USER, "verified": change.verified}


def _id_is_free(memory_id: str) -> bool:
    return not (Memory.objects.filter(pk=memory_id).exists()
                or MemoryTombstone.objects.filter(pk=memory_id).exists())


def _write_synced(*, mind: Mind, actor, change: sync.Change, target: Memory | None) -> Memory:
    """Write an incoming live state into ``target`` (None: a new memory), keeping the
    incoming timestamps; a new version snapshot records it."""
    if target is None:
        memory_id = change.id if change.id and _id_is_free(change.id) else new_memory_id()
        target = Memory(id=memory_id, mind=mind, version=0,
                        created_at=change.created_at or change.updated_at)
        insert = True
    else:
        insert = False
    memory = target
    memory.category, memory.key = change.category, change.key
    for name in sync.SYNCED_FIELDS:
        setattr(memory, name, change.fields[name])
    memory.content = seal_content(memory.category, change.fields["content"])
    provenance = _synced_provenance(actor, change)
    memory.source, memory.verified = provenance["source"], provenance["verified"]
    memory.verified_by = actor if memory.verified else None
    memory.verified_at = (change.verified_at or change.updated_at) if memory.verified else None
    memory.version += 1
    memory.updated_at = change.updated_at
    memory.deleted_at = None
    _mark_for_embedding(memory)
    memory.save(force_insert=insert)
    if insert:
        ledger_for(mind.pk).charge(memories=1)
    # The sender's word for the source is kept on the version as a claim, never trusted.
    _snapshot(memory, actor, claimed_source=change.source or "")
    return memory


def memory_bulk_delete(*, mind: Mind, actor, ids: list[str]) -> tuple[list[str], list[str]]:
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
                         details={"count": len(found), "memory_ids": found})
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
                         .only("id", "mind_id", "category", "key", "deleted_at", "updated_at")
                         .order_by("deleted_at", "id")[:batch_size])
            if not batch:
                return purged
            MemoryTombstone.objects.bulk_create([
                MemoryTombstone(id=memory.id, mind_id=memory.mind_id, category=memory.category,
                                key=memory.key, deleted_at=memory.deleted_at,
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


class ImportRejected(Exception):
    """An export that cannot be restored as it stands (the message says why)."""


def mind_import(*, mind: Mind, actor, backup: "Iterable[tuple[str, dict]]") -> dict:
    """Restore a JSON export (the ``("memory" | "tombstone", item)`` pairs of
    memories.export.read_backup, read lazily from the body) into ``mind``.

    Into an empty mind (no memories, not even in the trash) it is restored exactly:
    every version, tombstone, timestamp and provenance, ids kept where no other memory
    holds them. Into a non-empty mind the current states are merged with the sync rules.
    Agents import unverified memories. The whole export is read and staged
    (memories.staging) before anything is written, then applied in batches: memory
    holds a batch, never the export. One transaction, one ``import`` audit event.
    Raises ImportRejected."""
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
                              **_restore_backup(mind=mind, actor=actor, stage=stage)}
            except IntegrityError as error:
                raise ImportRejected(DUPLICATES_IN_EXPORT) from error
        else:
            result = SyncResult()
            for batch in stage.batches(order="change"):
                _apply_changes(mind=mind, actor=actor, result=result,
                               changes=[backup_change(kind, item) for kind, item in batch])
            counts = {"mode": "merge", **result.counts()}
        record_event(mind=mind, actor=actor, action="import", details=counts)
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


def _restore_backup(*, mind: Mind, actor, stage: Stage) -> dict:
    agent = is_agent(actor)
    writer = recorded_by(actor)
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
                superseded_at=item["superseded_at"],
                embedding_pending=item["category"] != Category.CREDENTIALS))
            versions += [MemoryVersion(
                memory_id=new_id[item["id"]], version=snapshot["version"],
                category=snapshot["category"], key=snapshot["key"],
                content=seal_content(snapshot["category"], snapshot["content"]),
                tags=snapshot["tags"], priority=snapshot["priority"],
                source=agent_source(snapshot["source"]) if agent else snapshot["source"],
                confidence=snapshot["confidence"], expires_at=snapshot["expires_at"],
                created_at=snapshot["created_at"], **writer,
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
                            key=item["key"], deleted_at=item["deleted_at"],
                            updated_at=item["updated_at"]) for _kind, item in batch])
        tombstones += len(batch)
    return {"memories": restored, "versions": versions_restored, "tombstones": tombstones,
            "skipped_redacted": skipped_redacted, "ids_reassigned": reassigned}


# -- Insight: compaction ---------------------------------------------------------------------


@dataclass(frozen=True)
class CompactedCluster:
    summary: Memory
    superseded: list[str]


def memory_compact(*, mind: Mind, actor, plan: CompactionPlan) -> list[CompactedCluster]:
    """Apply a compaction plan (memories.compaction) in one transaction.

    For each cluster: one summary memory (``source=system``, unverified, confidence 0.7)
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
            summary = _create(mind=mind, actor=actor, category=cluster.category,
                              key=_free_key(mind, cluster.category, cluster.key), changes={
                                  "content": cluster.content, "tags": cluster.tags,
                                  "priority": cluster.priority,
                                  "expires_at": cluster.expires_at, "source": Source.SYSTEM,
                                  "verified": False, "confidence": SUMMARY_CONFIDENCE})
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
                                      "cluster": sorted(planned)})
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


def memory_uncompact(*, summary: Memory, actor) -> list[Memory]:
    """Undo a compaction: the originals superseded by ``summary`` come back into recall
    and the summary goes to the trash. Returns the originals."""
    with transaction.atomic():
        locked = Memory.objects.select_for_update().select_related("mind").get(pk=summary.pk)
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
                         memory_id=original.id, details={"summary": locked.id})
        if locked.deleted_at is None:
            locked.deleted_at = now
            locked.updated_at = now
            locked.save(update_fields=["deleted_at", "updated_at"])
            record_event(mind=locked.mind, actor=actor, action="delete", memory_id=locked.id,
                         details={"category": locked.category, "key": locked.key,
                                  "reason": "uncompact"})
        return originals
