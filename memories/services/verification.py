"""Verification: a human vouches for (or withdraws from) the version of a memory they saw,
one at a time or over a selection of the queue (which may also go to the trash)."""

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from memories.audit import record_event
from memories.models import (
    Memory,
)
from minds.authentication import is_agent
from minds.models import Mind
from synapse.provenance import NO_PROVENANCE, Provenance


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


def memory_set_verified(*, memory: Memory, user, verified: bool, version: int | None = None,
                        provenance: Provenance = NO_PROVENANCE) -> Memory:
    """Verify or unverify a memory. Humans only: callers must have checked that ``user``
    is a human (API: HumanOnly permission); agents are refused here too.

    ``version`` pins what the human saw: when the memory has another version now (an
    edit since the page loaded), VersionConflict is raised and nothing changes."""
    if is_agent(user) or user is None:
        raise PermissionError("Only a human may verify or unverify a memory.")
    with transaction.atomic():
        locked = Memory.objects.locked(memory.pk)
        if version is not None and locked.version != version:
            raise VersionConflict(
                f"Memory {locked.id} changed since you saw it (you saw version {version}, "
                f"it is now version {locked.version}); read it again before verifying.",
                stale=[_stale(locked.id, seen=version, current=locked.version)])
        _set_verified(locked, user=user, verified=verified, provenance=provenance)
        return locked


def _stale(memory_id: str, *, seen: int, current: int | None) -> dict:
    return {"id": memory_id, "version": seen, "current_version": current}


def _set_verified(locked: Memory, *, user, verified: bool, provenance: Provenance) -> None:
    if locked.verified == verified:
        return
    locked.verified = verified
    locked.verified_by = user if verified else None
    locked.verified_at = timezone.now() if verified else None
    locked.save(update_fields=["verified", "verified_by", "verified_at"])
    record_event(mind=locked.mind, actor=user, action="verify" if verified else "unverify",
                 memory_id=locked.id, details={"version": locked.version},
                 provenance=provenance)


def memory_verify_many(*, mind: Mind, user, seen: dict[str, int],
                       provenance: Provenance = NO_PROVENANCE) -> list[Memory]:
    """Verify several memories of ``mind``, each at the version the human saw
    (``seen``: id → version). All or nothing: when any of them is gone (deleted, of
    another mind) or has another version now, VersionConflict lists every such one and
    none is verified. Already verified memories at the seen version stay as they are."""
    return _review_many(mind=mind, user=user, seen=seen, verb="verified",
                        apply=lambda memory: _set_verified(memory, user=user, verified=True,
                                                           provenance=provenance))


def memory_unverify_many(*, mind: Mind, user, seen: dict[str, int],
                         provenance: Provenance = NO_PROVENANCE) -> list[Memory]:
    """Withdraw the verification of several memories of ``mind``, each at the version the
    human saw; all or nothing, as memory_verify_many. One ``unverify`` audit event per
    memory that was verified."""
    return _review_many(mind=mind, user=user, seen=seen, verb="unverified",
                        apply=lambda memory: _set_verified(memory, user=user, verified=False,
                                                           provenance=provenance))


def memory_trash_many(*, mind: Mind, user, seen: dict[str, int],
                      provenance: Provenance = NO_PROVENANCE) -> list[Memory]:
    """Move several memories of ``mind`` to the trash, each at the version the human saw
    (what a reviewer rejects from the queue); all or nothing, as memory_verify_many. One
    ``delete`` audit event per memory, as a single delete writes."""
    now = timezone.now()

    def trash(memory: Memory) -> None:
        memory.deleted_at = now
        memory.updated_at = now
        memory.save(update_fields=["deleted_at", "updated_at"])
        record_event(mind=memory.mind, actor=user, action="delete", memory_id=memory.id,
                     details={"category": memory.category, "key": memory.key},
                     provenance=provenance)

    return _review_many(mind=mind, user=user, seen=seen, verb="moved to the trash",
                        apply=trash)


def _review_many(*, mind: Mind, user, seen: dict[str, int], verb: str,
                 apply: Callable[[Memory], None]) -> list[Memory]:
    """Lock the memories of ``mind`` named in ``seen`` (not in the trash), refuse them all
    when any is gone or at another version, else ``apply`` to each, in one transaction."""
    if is_agent(user) or user is None:
        raise PermissionError("Only a human may review memories in bulk.")
    with transaction.atomic():
        locked = {memory.id: memory for memory in
                  Memory.objects.for_mind(mind).alive().filter(pk__in=list(seen))
                  .locking().order_by("id")}
        stale = [_stale(memory_id, seen=version,
                        current=locked[memory_id].version if memory_id in locked else None)
                 for memory_id, version in seen.items()
                 if memory_id not in locked or locked[memory_id].version != version]
        if stale:
            raise VersionConflict(
                f"{len(stale)} of the {len(seen)} selected memories changed or left since "
                f"you saw them; nothing was {verb}. Reload and check them again.",
                stale=stale)
        for memory in locked.values():
            apply(memory)
        return list(locked.values())
