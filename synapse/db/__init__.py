"""Synapse's PostgreSQL backend (``ENGINE: synapse.db``, synapse.db.base) and the one rule for
reading over server-side cursors.

``QuerySet.iterator()`` reads over a server-side cursor. Outside a transaction Django
declares it WITH HOLD: PostgreSQL then copies the whole result aside when the declaring
statement commits (nothing is streamed), and behind PgBouncer in transaction pooling mode
the next FETCH may reach another server connection, where the cursor does not exist. So a
read that streams runs inside one transaction, from the first row to the last: lazily, on
one snapshot, and on one server connection (docs/scaling.md, "PgBouncer").
"""

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from django.conf import settings
from django.db import connections, transaction

T = TypeVar("T")


def streamed(pieces: Iterable[T]) -> Iterator[T]:
    """``pieces`` (a generator reading over cursors: a streamed response's body) read inside
    one transaction, opened at the first piece and closed after the last, or when the
    reader stops early (the generator is closed: its cursors are closed first)."""
    with transaction.atomic():
        yield from pieces


@contextmanager
def reading(pieces: Iterable[T], using: str | None = None) -> Iterator[Iterator[T]]:
    """A transaction on the database ``using`` (the default one, or the read replica the
    pieces come from) in which ``pieces`` may be read in part (a budgeted recall stops when
    nothing more fits): its cursors are closed before the transaction ends. A list, read
    already, needs none (no BEGIN and COMMIT round trips)."""
    if isinstance(pieces, list | tuple):
        yield iter(pieces)
        return
    with transaction.atomic(using=using):
        iterator = _delegate(pieces)
        try:
            yield iterator
        finally:
            iterator.close()


def _delegate(pieces: Iterable[T]) -> Iterator[T]:
    # ``yield from`` hands close() on to the generator it reads from.
    yield from pieces


# -- A read beside the request's own ------------------------------------------------------

_beside_pool: ThreadPoolExecutor | None = None
_beside_threads = 0
_beside_lock = threading.Lock()


def beside(call: Callable[..., T], *args, using: str, **kwargs) -> "Future[T]":
    """``call(*args, **kwargs)`` — a read on the database ``using`` that does not depend on
    what this thread reads next — on a thread and a database connection of its own, while
    this thread goes on (search's keyword and semantic sides: docs/search.md); ``.result()``
    waits for it and returns its value or raises its exception.

    It runs here instead, at once, when this thread is inside a transaction on ``using``
    (another connection cannot see what this one has not committed: a test's transaction,
    a caller's own) or when ``SYNAPSE_PARALLEL_READS`` is 0. Each of the pool's threads
    (SYNAPSE_PARALLEL_READS, per process, started on first use) keeps one connection per
    database it read from, closed as a request's would be once unusable or older than
    CONN_MAX_AGE."""
    threads = settings.SYNAPSE["PARALLEL_READS"]
    if threads <= 0 or connections[using].in_atomic_block:
        done: Future[T] = Future()
        try:
            done.set_result(call(*args, **kwargs))
        except Exception as error:
            done.set_exception(error)
        return done
    return _pool(threads).submit(_on_own_connection, using, call, args, kwargs)


def _pool(threads: int) -> ThreadPoolExecutor:
    global _beside_pool, _beside_threads
    with _beside_lock:
        if _beside_pool is None:
            _beside_pool = ThreadPoolExecutor(max_workers=threads,
                                              thread_name_prefix="synapse-beside")
            _beside_threads = threads
        return _beside_pool


def _on_own_connection(using: str, call: Callable[..., T], args, kwargs) -> T:
    connection = connections[using]  # this pool thread's own
    connection.close_if_unusable_or_obsolete()
    try:
        return call(*args, **kwargs)
    finally:
        connection.close_if_unusable_or_obsolete()


def close_beside() -> None:
    """Close the pool's database connections and stop its threads; the next beside() starts
    a new pool. For the end of a test session (a test database cannot be dropped while a
    connection to it is open) and for anything else that must let go of its
    connections."""
    global _beside_pool
    with _beside_lock:
        pool, threads, _beside_pool = _beside_pool, _beside_threads, None
    if pool is None:
        return
    # One task per thread, each waiting for all the others, so that every thread of the
    # pool (threads start as tasks come) runs one and closes its own connections.
    everyone = threading.Barrier(threads)

    def close_own() -> None:
        everyone.wait(timeout=30)
        connections.close_all()

    for future in [pool.submit(close_own) for _ in range(threads)]:
        future.result()
    pool.shutdown(wait=True)
