"""Per-mind quotas: how many memories, versions and bytes of content a mind may hold.

Usage is kept in ``QuotaCounter``: ``SLOTS`` rows per mind whose sum is the mind's usage.
A write transaction charges what it adds to a ``charging(mind)`` scope as it goes (each
charge is checked against the limits, so a refused write raises before it is saved and
its transaction rolls back whole) and, on leaving the scope, adds the total to one
randomly chosen slot with a single upsert — the last lock the transaction takes. Writers
of one mind therefore wait on each other only when they pick the same slot, and never
while holding a slot they would need to release for another writer to proceed.

The check reads the committed sum, so writers of one mind in flight at the same moment
cannot see each other: at the limit, each of W concurrent writers may pass, and the mind
can end up to W - 1 writes over (docs/security.md). Syncs and imports of a mind lock the
mind and so count as one writer.

What is counted: every memory row (in the trash too, until purged), every version
snapshot, and the stored bytes of every snapshot's content (credentials: the encrypted
token). Versions are never pruned; a mind at its quota can still read, delete and
purge, and its operator can raise the limits (SYNAPSE_QUOTA_*).
"""

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Func, Sum

from memories.models import QuotaCounter
from minds.models import Mind

# How many counter rows each mind has: concurrent writers of one mind collide on a slot
# with probability about 1/SLOTS.
SLOTS = 16
QUOTAS = ("memories", "versions", "content_bytes")
# Each quota's key in settings.SYNAPSE (from the environment variable SYNAPSE_<key>).
SETTINGS = {"memories": "QUOTA_MEMORIES", "versions": "QUOTA_VERSIONS",
            "content_bytes": "QUOTA_CONTENT_BYTES"}


class QuotaExceeded(Exception):
    """A write would take a mind over one of its quotas; nothing was written."""

    def __init__(self, *, quota: str, limit: int, used: int, adding: int):
        self.quota, self.limit, self.used, self.adding = quota, limit, used, adding
        unit = {"memories": "memories (the trash included)", "versions": "versions",
                "content_bytes": "bytes of content"}[quota]
        super().__init__(
            f"Quota exceeded: this mind may hold {limit} {unit} (SYNAPSE_{SETTINGS[quota]}); it "
            f"holds {used} and this write adds {adding}. Nothing was written. Purge the "
            "trash, or ask the operator to raise the limit.")

    def as_dict(self) -> dict:
        return {"name": self.quota, "limit": self.limit, "used": self.used,
                "adding": self.adding}


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
    totals = QuotaCounter.objects.filter(mind=mind).aggregate(
        **{name: Sum(name) for name in QUOTAS})
    return Usage(**{name: totals[name] or 0 for name in QUOTAS})


def content_bytes(stored: str) -> int:
    """Bytes of content as stored (UTF-8, as PostgreSQL's octet_length counts them)."""
    return len(stored.encode("utf-8"))


class StoredBytes(Func):
    """``octet_length(column)``: the database's count of ``content_bytes``."""

    function = "octet_length"
    output_field = BigIntegerField()


# One atomic statement: creates the slot on first use, adds to it afterwards.
_ADD_TO_SLOT = """
    INSERT INTO memories_quotacounter AS counter
        (mind_id, slot, memories, versions, content_bytes) VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (mind_id, slot) DO UPDATE SET
        memories = counter.memories + EXCLUDED.memories,
        versions = counter.versions + EXCLUDED.versions,
        content_bytes = counter.content_bytes + EXCLUDED.content_bytes
"""


class Ledger:
    """What one transaction adds to (or frees from) one mind's usage."""

    def __init__(self, mind: Mind):
        self.mind = mind
        self.pending = Usage()
        self._base: Usage | None = None

    def charge(self, *, memories: int = 0, versions: int = 0, content_bytes: int = 0) -> None:
        """Count a write about to be made; QuotaExceeded if it would go over a limit."""
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
        """Add the pending change to one slot of the mind (created on first use)."""
        if not self.pending:
            return
        with connection.cursor() as cursor:
            cursor.execute(_ADD_TO_SLOT, [self.mind.pk, random.randrange(SLOTS),
                                          self.pending.memories, self.pending.versions,
                                          self.pending.content_bytes])
        self.pending = Usage()


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
