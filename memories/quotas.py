"""Per-mind quotas: how many memories, versions and bytes of content a mind may hold."""

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Func

from memories.models import QuotaCounter
from minds.models import Mind
from synapse.refusals import Refusal

# How many counter rows each mind has: up to SLOTS writers of one mind hold one each at once;
# each slot holds 1/SLOTS of every limit.
SLOTS = 16  # migration 0007 spreads existing usage over 16 slots too
# What is counted: every memory row (in the trash too, until purged), every version
# snapshot, and the stored bytes of every snapshot's content (credentials: the encrypted
# token). Tombstones, audit events and idempotency records are not.
QUOTAS = ("memories", "versions", "content_bytes")
# Each quota's key in settings.SYNAPSE (from the environment variable SYNAPSE_<key>).
SETTINGS = {"memories": "QUOTA_MEMORIES", "versions": "QUOTA_VERSIONS",
            "content_bytes": "QUOTA_CONTENT_BYTES"}


class QuotaExceeded(Refusal):
    """A write would take a mind over one of its quotas; nothing was written.

    Versions are never pruned; a mind at its quota can still read, update in place what
    needs no new version, delete and purge, and the operator can raise the limits
    (SYNAPSE_QUOTA_*)."""

    def __init__(self, *, quota: str, limit: int, used: int, adding: int):
        self.quota, self.limit, self.used, self.adding = quota, limit, used, adding
        unit = {"memories": "memories (the trash included)", "versions": "versions",
                "content_bytes": "bytes of content"}[quota]
        super().__init__(
            f"Quota exceeded: this mind may hold {limit} {unit} (SYNAPSE_{SETTINGS[quota]}); it "
            f"holds {used} and this write adds {adding}. Nothing was written. Purge the "
            "trash, or ask the operator to raise the limit.")

    # 403: the request is understood and valid, but this mind may not grow further (not
    # 413, which is about the size of the request itself).
    status_code = 403
    code = "quota_exceeded"

    def as_dict(self) -> dict:
        return {"name": self.quota, "limit": self.limit, "used": self.used,
                "adding": self.adding}

    def error_fields(self) -> dict:
        return {"quota": self.as_dict()}


@dataclass
class Usage:
    memories: int = 0
    versions: int = 0
    content_bytes: int = 0

    def add(self, other: "Usage") -> None:
        for name in QUOTAS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in QUOTAS)


def limits() -> dict[str, int]:
    """The configured limit of each quota (settings.SYNAPSE, read at call time)."""
    return {name: settings.SYNAPSE[key] for name, key in SETTINGS.items()}


def mind_usage(mind: Mind) -> Usage:
    """What a mind holds, as its committed counters say (the sum of its slots)."""
    # Hand-written: it runs before every write, and the ORM's aggregate took longer to
    # build than the database takes to answer.
    with connection.cursor() as cursor:
        cursor.execute(_MIND_USAGE, [mind.pk])
        return Usage(*cursor.fetchone())


def recount(mind: Mind | None = None) -> None:
    """Set the counters of ``mind`` (of every mind: None) from the rows it holds, spread
    over its slots as ``share`` splits a limit. For rows loaded around the services (the
    benchmarks' bulk loads, a restore of some tables by hand), while nothing writes to the
    mind: the services keep the counters exact on their own. It reads every row of the
    mind (or of the table), so the request statement timeout does not apply."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 0")
        cursor.execute(_RECOUNT, {"mind": mind.pk if mind else None, "slots": SLOTS})


def content_bytes(stored: str) -> int:
    """Bytes of content as stored (UTF-8, as PostgreSQL's octet_length counts them)."""
    return len(stored.encode("utf-8"))


class StoredBytes(Func):
    """``octet_length(column)``: the database's count of ``content_bytes``."""

    function = "octet_length"
    output_field = BigIntegerField()


# The columns in the order of QUOTAS (and of Usage's fields).
_MIND_USAGE = """
    SELECT coalesce(sum(memories), 0), coalesce(sum(versions), 0),
           coalesce(sum(content_bytes), 0)
    FROM memories_quotacounter WHERE mind_id = %s
"""
_ENSURE_SLOTS = """
    INSERT INTO memories_quotacounter (mind_id, slot, memories, versions, content_bytes)
    SELECT %s, slot, 0, 0, 0 FROM generate_series(0, %s) AS slot
    ON CONFLICT (mind_id, slot) DO NOTHING
"""
# Every component spread as ``share`` splits a limit (migration 0007 filled the first
# counters the same way).
_RECOUNT = """
    WITH minds AS (SELECT id FROM minds_mind WHERE %(mind)s::text IS NULL OR id = %(mind)s),
    rows AS (
        SELECT mind_id, count(*) AS memories FROM memories_memory
        WHERE mind_id IN (SELECT id FROM minds) GROUP BY mind_id
    ),
    versions AS (
        SELECT m.mind_id, count(*) AS versions,
               coalesce(sum(octet_length(v.content)), 0)::bigint AS content_bytes
        FROM memories_memoryversion v JOIN memories_memory m ON m.id = v.memory_id
        WHERE m.mind_id IN (SELECT id FROM minds) GROUP BY m.mind_id
    ),
    totals AS (
        SELECT minds.id AS mind_id, coalesce(rows.memories, 0) AS memories,
               coalesce(versions.versions, 0) AS versions,
               coalesce(versions.content_bytes, 0) AS content_bytes
        FROM minds LEFT JOIN rows ON rows.mind_id = minds.id
        LEFT JOIN versions ON versions.mind_id = minds.id
    )
    INSERT INTO memories_quotacounter (mind_id, slot, memories, versions, content_bytes)
    SELECT totals.mind_id, slot,
           totals.memories / %(slots)s + (slot < totals.memories %% %(slots)s)::int,
           totals.versions / %(slots)s + (slot < totals.versions %% %(slots)s)::int,
           totals.content_bytes / %(slots)s + (slot < totals.content_bytes %% %(slots)s)::int
    FROM totals CROSS JOIN generate_series(0, %(slots)s - 1) AS slot
    ON CONFLICT (mind_id, slot) DO UPDATE SET memories = EXCLUDED.memories,
        versions = EXCLUDED.versions, content_bytes = EXCLUDED.content_bytes
"""
# Takes from one slot only what fits in its share (a component that adds nothing is not
# checked, so a slot over a lowered limit still takes what does not grow that quota).
_TAKE_FROM_SLOT = """
    UPDATE memories_quotacounter SET memories = memories + %(memories)s,
        versions = versions + %(versions)s, content_bytes = content_bytes + %(content_bytes)s
    WHERE mind_id = %(mind)s AND slot = %(slot)s
      AND (%(memories)s <= 0 OR memories + %(memories)s <= %(share_memories)s)
      AND (%(versions)s <= 0 OR versions + %(versions)s <= %(share_versions)s)
      AND (%(content_bytes)s <= 0
           OR content_bytes + %(content_bytes)s <= %(share_content_bytes)s)
"""

# The same, on whichever slot with room no other transaction holds (one picked at random):
# a writer never waits behind another writer's open transaction while a free slot has room.
_TAKE_FROM_A_FREE_SLOT = """
    UPDATE memories_quotacounter SET memories = memories + %(memories)s,
        versions = versions + %(versions)s, content_bytes = content_bytes + %(content_bytes)s
    WHERE id = (
        SELECT id FROM memories_quotacounter
        WHERE mind_id = %(mind)s
          AND (%(memories)s <= 0 OR memories + %(memories)s
               <= %(limit_memories)s / %(slots)s + (slot < %(limit_memories)s %% %(slots)s)::int)
          AND (%(versions)s <= 0 OR versions + %(versions)s
               <= %(limit_versions)s / %(slots)s + (slot < %(limit_versions)s %% %(slots)s)::int)
          AND (%(content_bytes)s <= 0 OR content_bytes + %(content_bytes)s
               <= %(limit_content_bytes)s / %(slots)s
                  + (slot < %(limit_content_bytes)s %% %(slots)s)::int)
        ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED)
"""


class _SlotFull(Exception):
    pass


def create_slots(mind: Mind) -> None:
    """Give a mind its counter slots (mind_create does, so that no write has to)."""
    with connection.cursor() as cursor:
        cursor.execute(_ENSURE_SLOTS, [mind.pk, SLOTS - 1])


def share(limit: int, slot: int) -> int:
    """A slot's share of a limit; the shares add up to the limit exactly."""
    return limit // SLOTS + (1 if slot < limit % SLOTS else 0)


class Ledger:
    """What one transaction adds to (or frees from) one mind's usage.

    The counters are an escrow over ``SLOTS`` rows per mind; how writers share them without
    queueing or overshooting: docs/internals.md, "memories/quotas.py"."""

    def __init__(self, mind: Mind):
        self.mind = mind
        self.pending = Usage()
        self._base: Usage | None = None

    def charge(self, *, memories: int = 0, versions: int = 0, content_bytes: int = 0) -> None:
        """Count a write about to be made; QuotaExceeded if the committed usage already
        leaves no room for it (``write`` makes the exact check)."""
        adding = Usage(memories, versions, content_bytes)
        if self._base is None:
            self._base = mind_usage(self.mind)
        for name, limit in limits().items():
            used = getattr(self._base, name) + getattr(self.pending, name)
            if getattr(adding, name) > 0 and used + getattr(adding, name) > limit:
                raise QuotaExceeded(quota=name, limit=limit, used=used,
                                    adding=getattr(adding, name))
        self.pending.add(adding)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """``transaction.atomic()`` for one write that may fail and be skipped: its
        charges are forgotten with its rows."""
        before = replace(self.pending)
        try:
            with transaction.atomic():
                yield
        except BaseException:
            self.pending = before
            raise

    def release(self, *, memories: int = 0, versions: int = 0, content_bytes: int = 0) -> None:
        """Count rows deleted for good (purge)."""
        self.pending.add(Usage(-memories, -versions, -content_bytes))

    def write(self) -> None:
        """Write the pending change into the mind's slots; QuotaExceeded when it does
        not fit (the caller's transaction then rolls back)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, Usage()
        if any(getattr(pending, name) < 0 for name in QUOTAS):
            self._spread(pending)
        elif not self._take_from_one_slot(pending):
            self._take_from_all_slots(pending)

    def _take_from_one_slot(self, adding: Usage) -> bool:
        """Take from a free slot with room; else try the slots one by one from a random
        one, waiting for those other writers hold; True when one had room."""
        shares = limits()
        with connection.cursor() as cursor:
            cursor.execute(_TAKE_FROM_A_FREE_SLOT, {
                "mind": self.mind.pk, "slots": SLOTS,
                **{name: getattr(adding, name) for name in QUOTAS},
                **{f"limit_{name}": limit for name, limit in shares.items()}})
            if cursor.rowcount == 1:
                return True
        first = random.randrange(SLOTS)
        for number in range(SLOTS):
            slot = (first + number) % SLOTS
            if self._take_from_slot(slot, adding, shares):
                return True
            if number == 0 and not QuotaCounter.objects.filter(
                    mind=self.mind, slot=slot).exists():
                # A mind made without memories.quotas.create_slots: make them now.
                create_slots(self.mind)
                return self._take_from_one_slot(adding)
        return False

    def _take_from_slot(self, slot: int, adding: Usage, shares: dict[str, int]) -> bool:
        # In a savepoint: an UPDATE that waited for a slot another writer changed locks it
        # before finding it full, and only rolling back to the savepoint lets it go. So a
        # writer holds no slot while it waits for one, and no two writers wait in a circle.
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(_TAKE_FROM_SLOT, {
                    "mind": self.mind.pk, "slot": slot,
                    **{name: getattr(adding, name) for name in QUOTAS},
                    **{f"share_{name}": share(limit, slot) for name, limit in shares.items()}})
                if cursor.rowcount != 1:
                    raise _SlotFull
        except _SlotFull:
            return False
        return True

    def _locked_slots(self) -> list[QuotaCounter]:
        # In slot order, so that two writers locking several slots cannot deadlock.
        create_slots(self.mind)
        return list(QuotaCounter.objects.select_for_update().filter(mind=self.mind)
                    .order_by("slot"))

    def _take_from_all_slots(self, adding: Usage) -> None:
        """Near the limit: lock every slot of the mind and take from several."""
        slots = self._locked_slots()
        for name, limit in limits().items():
            needed = getattr(adding, name)
            used = sum(getattr(counter, name) for counter in slots)
            if needed > 0 and used + needed > limit:
                raise QuotaExceeded(quota=name, limit=limit, used=used, adding=needed)
            for counter in slots:
                take = min(needed, max(0, share(limit, counter.slot) - getattr(counter, name)))
                setattr(counter, name, getattr(counter, name) + take)
                needed -= take
            # Room in total but not in the shares (a lowered limit left some slots over
            # theirs): the rest goes to the last slot.
            setattr(slots[-1], name, getattr(slots[-1], name) + needed)
        QuotaCounter.objects.bulk_update(slots, list(QUOTAS))

    def _spread(self, freeing: Usage) -> None:
        """Give back what a purge freed, evenly over the slots."""
        slots = self._locked_slots()
        for name in QUOTAS:
            freed = -getattr(freeing, name)
            for counter in slots:
                setattr(counter, name, getattr(counter, name) - share(freed, counter.slot))
        QuotaCounter.objects.bulk_update(slots, list(QUOTAS))


_ledgers: ContextVar[dict | None] = ContextVar("quota_ledgers", default=None)


@contextmanager
def charging(mind: Mind) -> Iterator[Ledger]:
    """Open inside a write's transaction: writes in it charge ``mind``'s ledger, and the
    counters are written once when it closes without an error."""
    ledgers = _ledgers.get()
    if ledgers is not None and mind.pk in ledgers:
        yield ledgers[mind.pk]  # nested in another service's scope: that one writes
        return
    ledger = Ledger(mind)
    token = _ledgers.set({**(ledgers or {}), mind.pk: ledger})
    try:
        yield ledger
    finally:
        _ledgers.reset(token)
    ledger.write()


def ledger_for(mind_id: str) -> Ledger:
    """The open ledger of a mind; every write path must have opened one (``charging``)."""
    ledger = (_ledgers.get() or {}).get(mind_id)
    if ledger is None:
        raise RuntimeError(f"A write to mind {mind_id} outside a quota scope "
                           "(memories.quotas.charging).")
    return ledger
