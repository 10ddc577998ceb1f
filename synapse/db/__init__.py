"""Synapse's PostgreSQL backend (``ENGINE: synapse.db``, synapse.db.base) and the one rule for
reading over server-side cursors.

``QuerySet.iterator()`` reads over a server-side cursor. Outside a transaction Django
declares it WITH HOLD: PostgreSQL then copies the whole result aside when the declaring
statement commits (nothing is streamed), and behind PgBouncer in transaction pooling mode
the next FETCH may reach another server connection, where the cursor does not exist. So a
read that streams runs inside one transaction, from the first row to the last: lazily, on
one snapshot, and on one server connection (docs/scaling.md, "PgBouncer").
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import transaction

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
