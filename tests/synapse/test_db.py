"""synapse.db: streams read over cursors inside one transaction (never a WITH HOLD cursor),
and what DATABASE_POOLER=pgbouncer changes. Against a real PgBouncer:
tests/synapse/test_pgbouncer.py."""

import datetime
import os
import subprocess
import sys
import time

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from synapse.db import beside, close_beside
from synapse.db.base import _milliseconds
from tests.security.live import ROOT


def declared(queries) -> list[str]:
    return [query["sql"] for query in queries.captured_queries
            if query["sql"].startswith("DECLARE")]


def consume(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("url", [
    "/memory/recall", "/memory/recall?format=json", "/memory/recall?path=projects",
    "/memory/recall?path=projects&format=json", "/memory/recall?q=tea",
    "/memory/recall?budget=400", "/memory/recall?budget=400&format=json",
    "/memory/recall?q=tea&budget=400",
    "/memory/mind-export", "/memory/mind-export?format=csv"])
def test_every_read_over_a_cursor_runs_inside_one_transaction(agent, remember, monkeypatch,
                                                              url):
    """No cursor WITH HOLD: PostgreSQL would copy its whole result aside at the first commit
    (nothing streamed), and behind PgBouncer the next FETCH could reach another server
    connection. Each read ends its transaction when it ends."""
    from memories import recall

    for number in range(6):
        remember(key=f"tea_{number}", content=f"tea note {number}",
                 path="projects" if number % 2 else "")
    monkeypatch.setattr(recall, "WHOLE_LIMIT", 2)
    monkeypatch.setattr(recall, "STREAM_CHUNK", 2)
    with CaptureQueriesContext(connection) as queries:
        response = agent.get(url)
        body = consume(response)
    assert response.status_code == 200, body
    assert b"tea note 5" in body
    cursors = declared(queries)
    assert cursors and not any("WITH HOLD" in sql for sql in cursors), cursors
    assert connection.get_autocommit() and not connection.in_atomic_block


@pytest.mark.django_db(transaction=True)
def test_a_stream_stopped_early_closes_its_cursor_and_its_transaction(agent, remember,
                                                                      monkeypatch):
    from memories import recall

    for number in range(6):
        remember(key=f"k{number}", content=f"c{number}")
    monkeypatch.setattr(recall, "WHOLE_LIMIT", 2)
    monkeypatch.setattr(recall, "STREAM_CHUNK", 2)
    response = agent.get("/memory/recall")
    pieces = iter(response.streaming_content)
    next(pieces)
    assert connection.in_atomic_block  # the stream's transaction
    response.close()  # the client went away
    assert connection.get_autocommit() and not connection.in_atomic_block
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors")
        assert cursor.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_behind_pgbouncer_an_iterator_outside_a_transaction_reads_whole(remember,
                                                                       monkeypatch):
    """Code outside Synapse's streams (Django's own commands) still reads correctly behind
    PgBouncer: without a transaction, no server-side cursor at all."""
    for number in range(3):
        remember(key=f"k{number}")
    everything = Memory.objects.order_by("key")

    def read() -> tuple[list[str], list[str]]:
        with CaptureQueriesContext(connection) as queries:
            keys = [memory.key for memory in everything.iterator(chunk_size=1)]
        return keys, declared(queries)

    keys, cursors = read()
    assert keys == ["k0", "k1", "k2"] and "WITH HOLD" in cursors[0]  # Django, directly
    monkeypatch.setitem(connection.settings_dict, "POOLER", "pgbouncer")
    assert read() == (["k0", "k1", "k2"], [])
    with transaction.atomic():
        keys, cursors = read()
    assert keys == ["k0", "k1", "k2"] and "WITH HOLD" not in cursors[0]


def test_a_shown_timeout_in_milliseconds():
    assert [_milliseconds(shown) for shown in ("0", "1500ms", "30s", "2min", "1h")] == \
        [0, 1500, 30_000, 120_000, 3_600_000]


def setting(expression: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         f"from django.conf import settings; print(settings.{expression})"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_database_pooler_pgbouncer_sends_no_startup_options_and_others_are_refused():
    direct = setting("DATABASES['default']['OPTIONS']", DATABASE_STATEMENT_TIMEOUT_MS="1234")
    assert direct.stdout.strip().splitlines()[-1] == \
        "{'options': '-c statement_timeout=1234'}", direct.stderr
    pooled = setting("DATABASES['default']['OPTIONS']", DATABASE_POOLER="pgbouncer")
    assert pooled.stdout.strip().splitlines()[-1] == "{}", pooled.stderr
    refused = setting("DATABASES", DATABASE_POOLER="pgpool")
    assert refused.returncode != 0
    assert "DATABASE_POOLER must be empty (a direct connection) or pgbouncer" in refused.stderr


# -- synapse.db.beside: a read on a thread and a connection of its own -------------------

def _backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_beside_reads_on_another_connection_outside_a_transaction_and_here_inside_one(
        settings):
    own = _backend()
    assert beside(_backend, using="default").result() != own
    with transaction.atomic():
        # Another connection could not see what this transaction has not committed.
        assert beside(_backend, using="default").result() == own
    settings.SYNAPSE = {**settings.SYNAPSE, "PARALLEL_READS": 0}
    assert beside(_backend, using="default").result() == own


@pytest.mark.django_db(transaction=True)
def test_beside_hands_its_error_to_whoever_waits_for_it():
    def fails():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    running = beside(fails, using="default")
    with pytest.raises(DataError):
        running.result()
    assert beside(_backend, using="default").result() != _backend()  # the thread goes on


@pytest.mark.django_db(transaction=True)
def test_close_beside_closes_the_pool_s_connections():
    pid = beside(_backend, using="default").result()
    close_beside()
    deadline = time.monotonic() + 10  # a backend ends just after its client hangs up
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if cursor.fetchone()[0] == 0:
                break
            assert time.monotonic() < deadline, "the pool's connection is still open"
            time.sleep(0.05)
    assert beside(_backend, using="default").result() != _backend()  # a new pool


TIMESTAMPS = [
    "2026-12-07 17:55:01.123456+00", "2026-12-07 17:55:01+00", "2026-12-07 17:55:01.5+00",
    "2026-12-07 17:55:01.000001+00", "1999-12-31 23:59:59.99+00", "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00", "2024-02-29 12:00:00.25+05:30",
    "2026-03-29 01:30:00-07:00", "1900-06-15 08:00:00.5+00"]


def _read(cursor, values: list[str]) -> list:
    cursor.execute("SELECT " + ", ".join(["%s::timestamptz"] * len(values)), values)
    return list(cursor.fetchone())


def test_timestamps_read_as_django_s_own_loader_reads_them(db):
    # The connection reads timestamptz with UtcTimestampLoader (Django keeps it for every
    # cursor); each value, its type and its time zone are what Django's loader gives.
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.postgres import types
    from psycopg.pq import Format

    from synapse.db.base import UtcTimestampLoader

    oid = types["timestamptz"].oid
    with connection.cursor() as ours, connection.cursor() as django_s:
        assert ours.cursor.adapters.get_loader(oid, Format.TEXT) is UtcTimestampLoader
        register_tzloader(datetime.UTC, django_s.cursor)
        assert django_s.cursor.adapters.get_loader(oid, Format.TEXT) is not UtcTimestampLoader
        for values in (TIMESTAMPS, ["now()"]):
            read, expected = _read(ours, values), _read(django_s, values)
            assert read == expected
            assert [(type(value), value.tzinfo) for value in read] == [
                (datetime.datetime, datetime.UTC)] * len(values)
        # In a session moved to another zone PostgreSQL writes other offsets: as Django
        # (but for the last instant of 9999, past 9999 there).
        within = [value for value in TIMESTAMPS if not value.startswith("9999")]
        with transaction.atomic():
            ours.execute("SET LOCAL TIME ZONE 'Asia/Kolkata'")
            assert _read(ours, within) == _read(django_s, within)


@pytest.mark.parametrize("value", ["infinity", "-infinity", "10000-01-01 00:00:00+00",
                                   "0044-03-15 12:00:00+00 BC"])
def test_timestamps_python_cannot_hold_are_refused_as_before(db, value):
    with connection.cursor() as cursor, pytest.raises(DataError):
        _read(cursor, [value])
