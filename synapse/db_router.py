"""Read replicas (docs/scaling.md, "Read replicas"): where a request's memory reads go.

With ``DATABASE_REPLICA_URLS`` set, settings add the aliases ``replica1``, ``replica2``, …
(streaming standbys of the primary) and :class:`ReplicaRouter`. Nothing goes to a replica
unless a view says so: the read views of list, search and recall run their handler inside
:func:`reads_from` (synapse.replicas.replica_reads), and then only the reads of memory
models do (the ``memories`` app; raw SQL follows its queryset's ``.db``). Every write, and
every other read (keys, minds, rate limits, sessions, exports), goes to the primary.

Which replica, if any (:func:`read_alias_for`):

- A replica is read from only while it is a standby (``pg_is_in_recovery()``), answers,
  and is at most ``DATABASE_REPLICA_MAX_LAG_MS`` behind. Each process checks each replica
  in use at most once per ``DATABASE_REPLICA_CHECK_MS`` (two small queries): the primary's
  WAL position with the primary's clock, then the replica's replayed position. The replica
  holds every write committed before the last primary sample at or below its replayed
  position: that sample's time is how fresh it is, in the primary's clock. One behind is
  measured again after BEHIND_RETRY_SECONDS, one that fails after DOWN_RETRY_SECONDS; with
  none usable, reads go to the primary.
- Read-your-writes: every write request of a principal (Mind Key, OAuth connection, user)
  leaves a mark, its time in the primary's clock (:func:`note_write`). That principal
  reads from a replica only once the replica is known to be fresher than its last write;
  until then from the primary. No waiting, no timing guess: a replica paused or behind
  never serves a writer what it has not replayed.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import threading
import time
from collections import deque
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

logger = logging.getLogger("synapse.replicas")

PRIMARY = DEFAULT_DB_ALIAS
# The apps whose reads may go to a replica when a view allows it.
ROUTED_APPS = frozenset({"memories"})
# A replica that failed to answer is tried again after this long (each process).
DOWN_RETRY_SECONDS = 10.0
# One found behind (or not yet measured against a primary sample it has replayed) is
# measured again on the first routed read after this long, so it is read from again soon
# after it catches up; one in use, every DATABASE_REPLICA_CHECK_MS.
BEHIND_RETRY_SECONDS = 0.1
# At most this many primary WAL positions are remembered (one per distinct position seen).
MAX_SAMPLES = 1024

_reads: contextvars.ContextVar[str | None] = contextvars.ContextVar("synapse_replica_reads",
                                                                    default=None)


class ReplicaRouter:
    """Memory reads to the alias :func:`reads_from` set, when one is set; everything else,
    and every write, to the primary. Migrations run on the primary only (a standby is a
    copy of it)."""

    def db_for_read(self, model, **hints):
        alias = _reads.get()
        if alias is not None and model._meta.app_label in ROUTED_APPS:
            return alias
        return PRIMARY

    def db_for_write(self, model, **hints):
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints):
        return True  # every alias holds the same rows

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == PRIMARY


@contextmanager
def reads_from(alias: str):
    """Within the block, memory reads go to ``alias`` (a replica, or the primary)."""
    token = _reads.set(alias)
    try:
        yield alias
    finally:
        _reads.reset(token)


# -- Read-your-writes marks ------------------------------------------------------------------
# One row per principal in the UNLOGGED rate-limit table (synapse.models.RateLimit, no WAL),
# keyed "written:<principal>"; its tat is the write's time (primary clock) plus
# MARK_SECONDS, so the table's sweep removes it as it removes a spent budget.

_MARK = """
    INSERT INTO synapse_ratelimit AS r (key, tat)
    VALUES (%(key)s, extract(epoch FROM clock_timestamp())::float8 + %(ttl)s)
    ON CONFLICT (key) DO UPDATE SET tat = EXCLUDED.tat
"""
_MARKED = "SELECT tat - %s FROM synapse_ratelimit WHERE key = %s"


def mark_seconds() -> float:
    """How long a write's mark is kept: past it, any replica fresh enough to be read from
    holds the write (its lag and the check interval, twice over, and a minute more)."""
    return 60.0 + 2 * (settings.DATABASE_REPLICA_MAX_LAG_MS
                       + settings.DATABASE_REPLICA_CHECK_MS) / 1000


def note_write(principal: str) -> None:
    """Remember that ``principal`` just wrote (after its transactions committed)."""
    with connections[PRIMARY].cursor() as cursor:
        cursor.execute(_MARK, {"key": f"written:{principal}"[:200], "ttl": mark_seconds()})


def last_write(principal: str) -> float | None:
    """The time (primary clock, epoch seconds) of ``principal``'s last marked write."""
    with connections[PRIMARY].cursor() as cursor:
        cursor.execute(_MARKED, [mark_seconds(), f"written:{principal}"[:200]])
        row = cursor.fetchone()
    return row[0] if row else None


# -- Replica state, per process ----------------------------------------------------------------

@dataclass
class ReplicaState:
    alias: str
    usable: bool = False
    # The primary-clock time up to which this replica holds every committed write.
    fresh_as_of: float = float("-inf")
    lag_seconds: float | None = None
    checked_at: float = float("-inf")  # time.monotonic() of the last check
    down: bool = False  # did not answer, or is no standby: retried after DOWN_RETRY_SECONDS
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def due(self, now: float) -> bool:
        interval = settings.DATABASE_REPLICA_CHECK_MS / 1000
        if self.down:
            interval = max(interval, DOWN_RETRY_SECONDS)
        elif not self.usable:
            interval = min(interval, BEHIND_RETRY_SECONDS)
        return now - self.checked_at >= interval


_states: dict[str, ReplicaState] = {}
_states_lock = threading.Lock()
# (primary WAL position, primary clock) samples, oldest first, positions increasing.
_samples: deque[tuple[int, float]] = deque(maxlen=MAX_SAMPLES)
_samples_lock = threading.Lock()
_turn = itertools.count()


def parse_lsn(text: str) -> int:
    """A pg_lsn ("16/B374D848") as a number."""
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def _sample_primary() -> tuple[int, float]:
    with connections[PRIMARY].cursor() as cursor:
        # The clock first: a write marked before this time is at or below this position.
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())::float8, "
                       "pg_current_wal_lsn()::text")
        at, text = cursor.fetchone()
    lsn = parse_lsn(text)
    with _samples_lock:
        if _samples and _samples[-1][0] == lsn:
            _samples.pop()  # the same position, seen later: the later time says more
        _samples.append((lsn, at))
        # An older sample could only show a replica too far behind to be read from.
        horizon = at - (settings.DATABASE_REPLICA_MAX_LAG_MS
                        + settings.DATABASE_REPLICA_CHECK_MS) / 1000 - 1
        while len(_samples) > 1 and _samples[0][1] < horizon:
            _samples.popleft()
    return lsn, at


def _fresh_as_of(replayed: int) -> float | None:
    """The time of the latest primary sample the replica has replayed past."""
    with _samples_lock:
        for lsn, at in reversed(_samples):
            if lsn <= replayed:
                return at
    return None


def check(state: ReplicaState) -> None:
    """Measure one replica now: is it a standby, and how fresh (primary clock)."""
    state.checked_at = time.monotonic()
    try:
        _lsn, primary_now = _sample_primary()
        with connections[state.alias].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text")
            recovering, replayed = cursor.fetchone()
    except DatabaseError as error:
        _down(state, f"does not answer ({type(error).__name__})")
        return
    if not recovering or replayed is None:
        # A promoted or stand-alone server may hold other rows than the primary.
        _down(state, "is not a standby (not in recovery)")
        return
    fresh = _fresh_as_of(parse_lsn(replayed))
    state.down = False
    state.fresh_as_of = fresh if fresh is not None else float("-inf")
    state.lag_seconds = primary_now - fresh if fresh is not None else float("inf")
    usable = state.lag_seconds * 1000 <= settings.DATABASE_REPLICA_MAX_LAG_MS
    if usable != state.usable:
        logger.warning("read replica %s %s (lag %.3f s)", state.alias,
                       "is in use" if usable else "is behind: reads go to the primary",
                       state.lag_seconds)
    state.usable = usable


def _down(state: ReplicaState, reason: str) -> None:
    if not state.down:
        logger.warning("read replica %s %s: reads go to the primary", state.alias, reason)
    state.usable, state.down, state.lag_seconds = False, True, None
    state.fresh_as_of = float("-inf")
    with suppress(DatabaseError):  # already broken: nothing left to close
        connections[state.alias].close()


def replica_failed(alias: str) -> None:
    """A read on ``alias`` failed to reach it: leave it alone for a while."""
    state = _state(alias)
    _down(state, "failed a read")
    state.checked_at = time.monotonic()


def _state(alias: str) -> ReplicaState:
    state = _states.get(alias)
    if state is None:
        with _states_lock:
            state = _states.setdefault(alias, ReplicaState(alias))
    return state


def current(alias: str) -> ReplicaState:
    """``alias``'s state, checked first when due (by one thread; the others use the last)."""
    state = _state(alias)
    if state.due(time.monotonic()) and state.lock.acquire(blocking=False):
        try:
            if state.due(time.monotonic()):
                check(state)
        finally:
            state.lock.release()
    return state


def read_alias_for(principal: str | None) -> str:
    """Where the memory reads of ``principal``'s request go: a usable replica fresher
    than the principal's last write (in turn when several are), else the primary."""
    if not settings.DATABASE_REPLICAS:
        return PRIMARY
    states = [current(alias) for alias in settings.DATABASE_REPLICAS]
    usable = [state for state in states if state.usable]
    if not usable:
        return PRIMARY
    written = last_write(principal) if principal else None
    if written is not None:
        usable = [state for state in usable if state.fresh_as_of > written]
        if not usable:
            return PRIMARY
    return usable[next(_turn) % len(usable)].alias


def reset_state() -> None:
    """Forget every replica's state and the primary samples (tests)."""
    with _states_lock:
        _states.clear()
    with _samples_lock:
        _samples.clear()
