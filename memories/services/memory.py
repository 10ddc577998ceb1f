"""Writes to one memory: store (once, under an Idempotency-Key), update, delete, restore, revert."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from memories.audit import describe_actor, record_event
from memories.crypto import CredentialsUnreadable, seal_content
from memories.embeddings import model_name, write_time_vector
from memories.models import (
    VERSIONED_FIELDS,
    Category,
    IdempotentRequest,
    Memory,
    MemoryType,
    MemoryVersion,
    Source,
    default_memory_type,
    live_memory_by_key,
)
from memories.naming import derive_key, normalize_tags
from memories.paths import within_any
from memories.quotas import charging, content_bytes, ledger_for
from minds.authentication import is_agent, reach_of
from minds.models import Mind
from synapse.provenance import NO_PROVENANCE, Provenance
from synapse.refusals import Refusal

if TYPE_CHECKING:
    from collections.abc import Callable

AGENT_DEFAULT_CONFIDENCE = 0.7
USER_DEFAULT_CONFIDENCE = 1.0
# Fields whose change alters what a memory means, and so its embedding.
# What the model reads (memories.embeddings.embedding_text): a change re-embeds.
EMBEDDED_FIELDS = ("category", "key", "content", "tags", "memory_type", "occurred_at")


class MemoryConflict(Exception):
    """A write would give two memories outside the trash the same (category, key)."""


class OccurredAtNotEpisodic(ValidationError):
    """``occurred_at`` given to a memory that is not episodic: only events have a moment."""

    def __init__(self):
        super().__init__({"occurred_at": [
            "Only episodic memories have occurred_at: send memory_type=episodic with it."]},
            code="occurred_at_not_episodic")


class CredentialsContentRequired(ValidationError):
    """A credentials memory moved to another category without its content re-sent: that
    would silently decrypt the secret into search, embeddings and recall."""

    def __init__(self):
        super().__init__({"content": [
            "Moving a credentials memory to another category puts its content in plain "
            "text into search, embeddings and recall: send the content again with the new "
            "category to confirm."]}, code="credentials_content_required")


class PathOutOfScope(Refusal):
    """A path-scoped Mind Key writing a memory to a path outside its prefixes (a store,
    an update or a revert that would move it there). 403; the message names no path."""

    status_code = 403
    code = "path_out_of_scope"

    def __init__(self):
        super().__init__("This Mind Key is limited to some paths, and this path is not "
                         "under any of them.")


class KeyOutOfScope(Refusal):
    """A path-scoped Mind Key storing a (category, key) that a memory outside its paths
    holds: that memory is neither overwritten nor described. 409."""

    status_code = 409
    code = "key_out_of_scope"

    def __init__(self):
        super().__init__("This category and key are taken by a memory this Mind Key cannot "
                         "reach; store under another key.")


def check_reach(actor, path: str) -> None:
    """Refuse (PathOutOfScope) a write by ``actor`` that leaves a memory at ``path``
    outside the paths its Mind Key reaches (none for humans and unscoped keys)."""
    if not within_any(path, reach_of(actor)):
        raise PathOutOfScope()


def default_path(actor) -> str:
    """Where a new memory stored without a path goes: the root, or the first prefix of a
    path-scoped key."""
    reach = reach_of(actor)
    return reach[0] if reach else ""


@dataclass(frozen=True)
class StoreResult:
    memory: Memory
    status: str  # "stored", "updated" or "unchanged"


# What an agent may say a memory came from; never ``user``.
AGENT_WRITABLE_SOURCES = (Source.AGENT, Source.TOOL, Source.SYSTEM)


def agent_source(source: str | None) -> str:
    """The source an agent may give a memory: never ``user``, whatever it sends or copies."""
    return source if source in AGENT_WRITABLE_SOURCES else Source.AGENT


def _authorship(actor, source: str | None) -> dict:
    """``source``/``verified`` from who writes: humans write verified user memories."""
    if is_agent(actor):
        return {"source": agent_source(source), "verified": False}
    return {"source": Source.USER, "verified": True}


def recorded_by(actor) -> dict:
    """The trusted writer of a version, from the credentials (never from a body)."""
    actor_type, actor_id, label = describe_actor(actor)
    return {"recorded_by_type": actor_type, "recorded_by_id": actor_id, "recorded_by": label}


def snapshot_version(memory: Memory, actor, *, provenance: Provenance,
                     claimed_source: str = "", reverted_from: int | None = None) -> None:
    """Record the memory as it now is as its version ``memory.version``, derived from the
    version before it (the current one until this write): who wrote it from the
    credentials (``recorded_by``), what the request claimed (``provenance``)."""
    ledger_for(memory.mind_id).charge(versions=1, content_bytes=content_bytes(memory.content))
    MemoryVersion.objects.create(
        memory=memory, version=memory.version, created_at=memory.updated_at,
        parent=memory.version - 1 if memory.version > 1 else None, reverted_from=reverted_from,
        claimed_source=claimed_source, **recorded_by(actor), **provenance.as_fields(),
        **{name: getattr(memory, name) for name in VERSIONED_FIELDS})


def mark_for_embedding(memory: Memory) -> None:
    # Credentials never reach the model; everything else waits for the worker.
    memory.embedding = None
    memory.embedding_model = ""
    memory.embedding_pending = not memory.is_credentials


def embed_for_search(memory: Memory) -> None:
    """Read your writes (docs/search.md): :func:`mark_for_embedding`, then a vector of the
    memory made now (embeddings.write_time_vector: the int8 query encoder's, with the
    bundled model) in its place, so that the next search finds it by meaning with no
    worker running. The memory stays pending: the worker puts the model's own vector
    there. Called on the memory before its INSERT or UPDATE, so the vector travels in that
    statement (no extra one). An encoder failure leaves it without a vector, as before,
    and never fails the write. The bulk paths (sync, import) only mark: the worker embeds
    what they write."""
    mark_for_embedding(memory)
    vector = write_time_vector(memory)
    if vector is not None:
        memory.embedding, memory.embedding_model = vector, model_name()


def memory_store(*, mind: Mind, actor, category: str, content: str, key: str | None = None,
                 tags: list[str] | None = None, priority: str | None = None,
                 confidence: float | None = None, expires_at: datetime | None = None,
                 expires_given: bool = False, source: str | None = None,
                 memory_type: str | None = None, path: str | None = None,
                 occurred_at: datetime | None = None,
                 provenance: Provenance = NO_PROVENANCE) -> StoreResult:
    """Create a memory, or update the one with the same (category, key) in the mind.

    Fields left out (None) keep their stored values on update. An identical payload
    changes nothing and answers ``unchanged``. Concurrent stores of one key serialise on
    the row lock, or on the unique index when the row does not exist yet. ``path`` (in
    normal form, memories.paths) is not part of the identity: a key given explicitly
    moves the memory to the path sent; a key derived from the content includes the path.
    ``provenance`` (what the request claims about its agent) is recorded on the version
    and the audit event written.

    A path-scoped Mind Key (``actor``) finds only memories under its prefixes, stores a
    new memory without a path under its first prefix, and is refused a path outside them
    (PathOutOfScope) or a (category, key) held outside them (KeyOutOfScope).
    """
    if path is not None:
        check_reach(actor, path)
    key = key or derive_key(content, category, path if path is not None
                            else default_path(actor))
    authorship = _authorship(actor, source)
    changes: dict = {"content": content}
    if tags is not None:
        changes["tags"] = normalize_tags(tags)
    for name, value in (("priority", priority), ("confidence", confidence),
                        ("memory_type", memory_type), ("path", path),
                        ("occurred_at", occurred_at)):
        if value is not None:
            changes[name] = value
    if expires_given:
        changes["expires_at"] = expires_at

    with transaction.atomic(), charging(mind):
        existing = live_memory_by_key(mind, category, key)
        if existing is None:
            try:
                with transaction.atomic():
                    memory = create_memory(mind=mind, actor=actor, category=category, key=key,
                                           changes={"path": default_path(actor), **changes,
                                                    **authorship},
                                           provenance=provenance)
                return StoreResult(memory, "stored")
            except IntegrityError:
                # Another writer created this key between our lookup and insert, or a
                # memory the key cannot reach holds it.
                existing = live_memory_by_key(mind, category, key)
                if existing is None and reach_of(actor):
                    raise KeyOutOfScope() from None
                if existing is None:
                    raise
        memory, changed = _apply(memory=existing, actor=actor, changes=changes,
                                 authorship=authorship, action="update",
                                 provenance=provenance)
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
    # A path-scoped key's answers are its own: its reach is part of the fingerprint, so
    # it never replays an answer given to a key that reaches more.
    reach = reach_of(actor)
    fingerprint = salted_hmac("synapse.idempotency", json.dumps(
        {"body": request_body, "paths": list(reach)} if reach else request_body,
        sort_keys=True, default=str), algorithm="sha256").hexdigest()
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


def with_type_rules(changes: dict, *, memory_type: str, occurred_at: datetime | None,
                    now: datetime) -> dict:
    """``changes`` completed so the memory they leave behind follows the type rules: an
    episodic memory has ``occurred_at`` (the time of the write unless given), no other
    type has one (giving it one is refused; becoming another type drops it)."""
    memory_type = changes.get("memory_type", memory_type)
    if memory_type == MemoryType.EPISODIC:
        if changes.get("occurred_at", occurred_at) is None:
            return {**changes, "occurred_at": now}
        return changes
    if changes.get("occurred_at") is not None:
        raise OccurredAtNotEpisodic()
    return {**changes, "occurred_at": None} if occurred_at is not None else changes


def create_memory(*, mind: Mind, actor, category: str, key: str, changes: dict,
                  provenance: Provenance = NO_PROVENANCE) -> Memory:
    """Insert a new memory (its first version). Without a type it gets its category's
    default (models.default_memory_type); a ``working`` memory without an expiry expires
    after SYNAPSE["WORKING_MEMORY_TTL_SECONDS"]."""
    now = timezone.now()
    default_confidence = (AGENT_DEFAULT_CONFIDENCE if is_agent(actor)
                          else USER_DEFAULT_CONFIDENCE)
    memory = Memory(mind=mind, category=category, key=key, created_at=now, updated_at=now,
                    confidence=default_confidence, version=1)
    changes = with_type_rules(
        {"memory_type": default_memory_type(category), **changes},
        memory_type=MemoryType.SEMANTIC, occurred_at=None, now=now)
    if changes["memory_type"] == MemoryType.WORKING and "expires_at" not in changes:
        changes["expires_at"] = now + timezone.timedelta(
            seconds=settings.SYNAPSE["WORKING_MEMORY_TTL_SECONDS"])
    for name, value in changes.items():
        setattr(memory, name, value)
    check_reach(actor, memory.path)
    if memory.verified and not is_agent(actor):
        memory.verified_by = actor
        memory.verified_at = now
    memory.content = seal_content(memory.category, memory.content)
    embed_for_search(memory)
    memory.save(force_insert=True)
    ledger_for(mind.pk).charge(memories=1)
    snapshot_version(memory, actor, provenance=provenance)
    record_event(mind=mind, actor=actor, action="store", memory_id=memory.id,
                 details={"category": category, "key": key, "version": 1},
                 provenance=provenance)
    return memory


def _apply(*, memory: Memory, actor, changes: dict, authorship: dict, action: str,
           provenance: Provenance, reverted_from: int | None = None) -> tuple[Memory, bool]:
    """Apply field changes to a locked row; a new version when anything changed.

    Authorship (source, verified) follows the writer, but only when the write changes
    something: an agent repeating a verified memory word for word leaves it verified.
    """
    now = timezone.now()
    changes = with_type_rules(changes, memory_type=memory.memory_type,
                              occurred_at=memory.occurred_at, now=now)
    # Compare plaintext: a credentials token differs on every encryption (random IV).
    plaintext = _readable_content(memory)
    current = {name: plaintext if name == "content" else getattr(memory, name)
               for name in {*changes, *authorship}}
    if not any(current[name] != value for name, value in changes.items()):
        return memory, False
    changes = {**changes, **authorship}
    changed_fields = [name for name, value in changes.items() if current[name] != value]
    if "path" in changed_fields:
        check_reach(actor, changes["path"])
    versioned = [name for name in changed_fields if name in VERSIONED_FIELDS]
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
        embed_for_search(memory)
    memory.version += 1
    memory.updated_at = now
    try:
        with transaction.atomic():
            memory.save()
    except IntegrityError as error:
        raise MemoryConflict(
            f"A memory with category {memory.category!r} and key {memory.key!r} already "
            "exists in this mind.") from error
    snapshot_version(memory, actor, provenance=provenance, reverted_from=reverted_from)
    details = {"version": memory.version, "fields": sorted(versioned)}
    if reverted_from is not None:
        details["reverted_from"] = reverted_from
    record_event(mind=memory.mind, actor=actor, action=action, memory_id=memory.id,
                 details=details, provenance=provenance)
    return memory, True


def _readable_content(memory: Memory) -> str | None:
    """The stored plaintext, or None when no configured key opens it (a write replaces it)."""
    try:
        return memory.plaintext_content()
    except CredentialsUnreadable:
        return None


def memory_update(*, memory: Memory, actor, provenance: Provenance = NO_PROVENANCE,
                  **fields) -> tuple[Memory, bool]:
    """Partial update (content, tags, priority, confidence, expires_at, key, category,
    memory_type, path, occurred_at).

    Returns the memory and whether anything changed. Raises MemoryConflict when the new
    (category, key) is taken, CredentialsContentRequired when a credentials memory would
    leave its category without the content sent again.
    """
    with transaction.atomic(), charging(memory.mind):
        locked = Memory.objects.locked(memory.pk)
        if (locked.is_credentials and "content" not in fields
                and fields.get("category", Category.CREDENTIALS) != Category.CREDENTIALS):
            raise CredentialsContentRequired()
        changes = dict(fields)
        if "tags" in changes:
            changes["tags"] = normalize_tags(changes["tags"])
        authorship = _authorship(actor, changes.pop("source", None))
        return _apply(memory=locked, actor=actor, changes=changes, authorship=authorship,
                      action="update", provenance=provenance)


def memory_delete(*, memory: Memory, actor,
                  provenance: Provenance = NO_PROVENANCE) -> Memory:
    """Move a memory to the trash (restorable until purged)."""
    with transaction.atomic():
        locked = Memory.objects.select_for_update().get(pk=memory.pk)
        if locked.deleted_at is None:
            now = timezone.now()
            locked.deleted_at = now
            locked.updated_at = now
            locked.save(update_fields=["deleted_at", "updated_at"])
            record_event(mind=locked.mind, actor=actor, action="delete", memory_id=locked.id,
                         details={"category": locked.category, "key": locked.key},
                         provenance=provenance)
        return locked


def memory_restore(*, memory: Memory, actor,
                   provenance: Provenance = NO_PROVENANCE) -> Memory:
    """Take a memory out of the trash. Raises MemoryConflict when its (category, key) was
    reused meanwhile by a memory outside the trash."""
    with transaction.atomic():
        locked = Memory.objects.locked(memory.pk)
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
                     details={"category": locked.category, "key": locked.key},
                     provenance=provenance)
        return locked


def memory_revert(*, memory: Memory, actor, version: int,
                  provenance: Provenance = NO_PROVENANCE) -> Memory:
    """Make a new version equal to an earlier one (``version``); history is kept. The new
    version's parent is the version that was current, ``reverted_from`` is ``version``."""
    with transaction.atomic(), charging(memory.mind):
        locked = Memory.objects.locked(memory.pk)
        snapshot = MemoryVersion.objects.filter(memory=locked, version=version).first()
        if snapshot is None:
            raise MemoryVersion.DoesNotExist(f"Memory {locked.id} has no version {version}.")
        changes = {name: getattr(snapshot, name) for name in VERSIONED_FIELDS
                   if name != "source"}
        changes["content"] = snapshot.plaintext_content()
        # An agent reverting to a human's version writes it as an agent (never source=user,
        # never verified): the version's source is copied only when an agent may claim it.
        authorship = _authorship(actor, snapshot.source if is_agent(actor) else None)
        reverted, _changed = _apply(memory=locked, actor=actor, changes=changes,
                                    authorship=authorship, action="revert",
                                    provenance=provenance, reverted_from=version)
        return reverted
