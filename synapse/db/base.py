"""PostgreSQL backend that starts the embedded cluster on demand and insists on pgvector."""

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base
from psycopg import OperationalError

from synapse import embedded_db

_checked_servers: set[str] = set()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's own backend plus two duties, done on the first connection of each process.

    With no DATABASE_URL the embedded cluster is started (or restarted after a crash) before
    connecting, and the server must offer the ``vector`` extension or the process stops with
    a plain message. A lost connection to a crashed embedded cluster is retried once after
    starting it again, so the service recovers without manual steps.
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
        self._require_pgvector(connection)
        return connection

    def _require_pgvector(self, connection) -> None:
        server = f"{self.settings_dict.get('HOST')}:{self.settings_dict.get('PORT')}"
        if server in _checked_servers:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            available = cursor.fetchone() is not None
        if not connection.autocommit:
            connection.rollback()
        if not available:
            raise ImproperlyConfigured(
                "The PostgreSQL server at DATABASE_URL has no pgvector extension. Synapse needs "
                "it for semantic search: install pgvector on that server (e.g. the "
                "pgvector/pgvector image, or the postgresql-NN-pgvector package), or unset "
                "DATABASE_URL to use the embedded PostgreSQL."
            )
        _checked_servers.add(server)
