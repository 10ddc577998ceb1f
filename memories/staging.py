"""The stage: where a sync or an import holds what it has read until the body has been read."""

import json
import uuid
from collections.abc import Iterator
from datetime import datetime

from django.db import connection

from synapse.timestamps import format_timestamp, parse_timestamp

BATCH_SIZE = 1000
# The fields of staged items that hold timestamps (items are dicts of JSON values else).
TIMESTAMPS = frozenset({"created_at", "updated_at", "deleted_at", "verified_at",
                        "expires_at", "superseded_at", "occurred_at"})


def _default(value):
    if isinstance(value, datetime):
        return format_timestamp(value)
    raise TypeError(f"Cannot stage {type(value).__name__}")


def encode(item: dict) -> str:
    return json.dumps(item, default=_default, ensure_ascii=False, separators=(",", ":"))


def _timestamps(pairs: list) -> dict:
    return {name: parse_timestamp(value) if name in TIMESTAMPS and isinstance(value, str)
            else value for name, value in pairs}


def decode(text: str) -> dict:
    return json.loads(text, object_pairs_hook=_timestamps)


def temporary_table(columns: str) -> str:
    """Create a temporary table of the current transaction (dropped at its end); its name."""
    name = f"synapse_stage_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {name} ({columns}) ON COMMIT DROP")
    return name


class Stage:
    """A temporary table of (kind, item) rows; call inside ``transaction.atomic()``.

    A body of any size is read item by item (synapse.parsers.JSONStream), each item checked
    and added here, written to a temporary table of the transaction (dropped at its end) in
    batches of BATCH_SIZE. Only when the whole body has parsed and checked are the items
    applied, read back from the stage in batches: a body that breaks off half way is a 400
    before anything is written (validate, then apply, in one transaction), and the server's
    memory holds one batch, never the body.

    ``rows(order="change")`` reads them back in the order sync applies changes: by
    ``updated_at``, a deletion after an update at the same instant, then as sent."""

    def __init__(self):
        # The table is made when the first full batch is flushed: a body of at most one
        # batch (most syncs) stays in memory and costs no CREATE TABLE.
        self.table: str | None = None
        self.pending: list[tuple] = []
        self.count = 0

    def add(self, kind: str, item: dict, *, updated_at: datetime | None = None,
            deleted: bool = False) -> None:
        self.count += 1
        self.pending.append((self.count, kind, updated_at, deleted, encode(item)))
        if len(self.pending) >= BATCH_SIZE:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            if self.table is None:
                self.table = temporary_table(
                    "seq bigint PRIMARY KEY, kind text NOT NULL, updated_at timestamptz, "
                    "deleted boolean NOT NULL, item text NOT NULL")
            with connection.cursor() as cursor:
                insert = f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s, %s)"  # noqa: S608
                cursor.executemany(insert, self.pending)
            self.pending = []

    def batches(self, *, kind: str | None = None,
                order: str = "sent") -> Iterator[list[tuple[str, dict]]]:
        """Staged (kind, item) pairs in lists of at most BATCH_SIZE, from a server-side
        cursor: as sent, or in change order (see the class docstring)."""
        if self.table is None:  # never reached a full batch: all of it is in memory
            yield from self._batches_in_memory(kind=kind, order=order)
            return
        self.flush()
        order_by = {"sent": "seq", "change": "updated_at, deleted, kind, seq"}[order]
        where = "WHERE kind = %s" if kind else ""
        with connection.chunked_cursor() as cursor:
            # The table name and the order are ours, never input.
            select = f"SELECT kind, item FROM {self.table} {where} ORDER BY {order_by}"  # noqa: S608
            cursor.execute(select, [kind] if kind else [])
            while rows := cursor.fetchmany(BATCH_SIZE):
                yield [(row_kind, decode(item)) for row_kind, item in rows]

    def _batches_in_memory(self, *, kind: str | None,
                           order: str) -> Iterator[list[tuple[str, dict]]]:
        """What :meth:`batches` reads from the table, in the same order (PostgreSQL sorts
        a missing ``updated_at`` last and ``false`` before ``true``)."""
        rows = [row for row in self.pending if kind is None or row[1] == kind]
        if order == "change":
            rows.sort(key=lambda row: (row[2] is None, row[2] or 0, row[3], row[1], row[0]))
        else:
            assert order == "sent", order
        for start in range(0, len(rows), BATCH_SIZE):
            yield [(row_kind, decode(item))
                   for _seq, row_kind, _at, _deleted, item in rows[start:start + BATCH_SIZE]]
