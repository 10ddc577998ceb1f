"""PostgreSQL backend that starts the embedded cluster on demand and insists on pgvector."""

import datetime
import logging

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base
from django.db.backends.postgresql.psycopg_any import BaseTzLoader
from psycopg import OperationalError, sql

from synapse import embedded_db

logger = logging.getLogger("synapse.db")
_checked_servers: set[str] = set()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's own backend plus two duties, done on the first connection of each process.

    With no DATABASE_URL the embedded cluster is started (or restarted after a crash) before
    connecting, and the server must offer the ``vector`` extension or the process stops with
    a plain message. A lost connection to a crashed embedded cluster is retried once after
    starting it again, so the service recovers without manual steps.

    Behind PgBouncer (``DATABASE_POOLER=pgbouncer``, docs/scaling.md) the first connection
    also checks that the statement timeout arrived with the role, and a server-side cursor
    is never declared outside a transaction (:meth:`chunked_cursor`).

    Timestamps (``timestamptz``) are read by :class:`UtcTimestampLoader` when the
    connection's time zone is UTC, as Synapse configures it.
    """

    def get_new_connection(self, conn_params):
        data_dir = self.settings_dict.get("EMBEDDED_DATA_DIR")
        if data_dir:
            embedded_db.ensure_running(data_dir)
        try:
            connection = super().get_new_connection(conn_params)
        except OperationalError:
            if not data_dir:
                raise
            embedded_db.ensure_running(data_dir)
            connection = super().get_new_connection(conn_params)
        if self.timezone is UtcTimestampLoader.timezone:
            connection.adapters.register_loader("timestamptz", UtcTimestampLoader)
        self._require_pgvector(connection)
        return connection

    @property
    def pooled(self) -> bool:
        """Through PgBouncer in transaction pooling mode (``DATABASE_POOLER=pgbouncer``):
        consecutive transactions may run on different server connections."""
        return self.settings_dict.get("POOLER") == "pgbouncer"

    def chunked_cursor(self):
        """A server-side cursor for ``QuerySet.iterator()``, except outside a transaction
        behind PgBouncer. There Django would declare it WITH HOLD, to live on in the
        session after its transaction, and the next FETCH may reach another server
        connection, where no such cursor exists: the rows are read whole instead (Django's
        DISABLE_SERVER_SIDE_CURSORS, for that query only). Synapse's own streams (recall,
        export) read inside a transaction (:func:`synapse.db.streamed`) and stay lazy."""
        if self.pooled and self.get_autocommit():
            return self.cursor()
        return super().chunked_cursor()

    def _require_pgvector(self, connection) -> None:
        server = f"{self.settings_dict.get('HOST')}:{self.settings_dict.get('PORT')}"
        if server in _checked_servers:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions "
                           "WHERE name = 'vector'), current_setting('statement_timeout')")
            available, timeout = cursor.fetchone()
        if not connection.autocommit:
            connection.rollback()
        if self.pooled:
            self._check_role_timeout(timeout)
        if not available:
            raise ImproperlyConfigured(
                "The PostgreSQL server at DATABASE_URL has no pgvector extension. Synapse needs "
                "it for semantic search: install pgvector on that server (e.g. the "
                "pgvector/pgvector image, or the postgresql-NN-pgvector package), or unset "
                "DATABASE_URL to use the embedded PostgreSQL."
            )
        _checked_servers.add(server)

    def _check_role_timeout(self, found: str) -> None:
        """Behind PgBouncer the statement timeout is the role's (:func:`store_role_timeout`):
        say so once per process when the server connections do not carry it yet."""
        wanted = self.settings_dict["STATEMENT_TIMEOUT_MS"]
        if _milliseconds(found) != wanted:
            logger.warning(
                "statement_timeout through PgBouncer is %s, DATABASE_STATEMENT_TIMEOUT_MS "
                "says %sms: run `manage.py migrate` (it stores the timeout on the database "
                "role), then RECONNECT in PgBouncer's admin console (docs/scaling.md, "
                "\"PgBouncer\")", found, wanted)


class UtcTimestampLoader(BaseTzLoader):
    """Django's loader of ``timestamptz`` text (an aware datetime in the connection's time
    zone, here UTC), reading the ISO text PostgreSQL sends (``2026-12-07 17:55:01.5+00``)
    with the standard library's parser, written in C: psycopg's parser, which Django's
    loader extends, is Python, and a page of 50 memories holds 350 timestamps. Text that
    parser refuses (BC dates, years past 9999, infinity) goes to Django's loader, which
    reads it, or refuses it, as before. As Django's, the result is the session's wall
    clock labelled with ``timezone`` (the two are the same zone: Django sets the session's).
    Django compares ``timezone`` with the connection's before each cursor: equal, it
    keeps this loader."""

    timezone = datetime.UTC

    def load(self, data) -> datetime.datetime:
        try:
            moment = datetime.datetime.fromisoformat(bytes(data).decode())
        except ValueError:
            return super().load(data)
        return moment.replace(tzinfo=self.timezone)


_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _milliseconds(shown: str) -> int:
    """``SHOW statement_timeout`` ("0", "500ms", "30s", "1min") in milliseconds."""
    number = shown.rstrip("abcdefghijklmnopqrstuvwxyz")
    return round(float(number) * _UNITS.get(shown[len(number):], 1))


def store_role_timeout(connection) -> str:
    """``ALTER ROLE CURRENT_USER IN DATABASE <this one> SET statement_timeout``: behind
    PgBouncer in transaction pooling mode the timeout cannot travel as a startup option,
    and a ``SET`` would stay on whichever server connection ran it, so it is a setting of
    the role in this database, which every new server connection starts with. Any role may
    set its own defaults. Returns the statement run."""
    timeout = connection.settings_dict["STATEMENT_TIMEOUT_MS"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        (database,) = cursor.fetchone()
        statement = sql.SQL("ALTER ROLE CURRENT_USER IN DATABASE {} SET statement_timeout = {}")\
            .format(sql.Identifier(database), sql.Literal(timeout))
        cursor.execute(statement)
    return statement.as_string(connection.connection)
