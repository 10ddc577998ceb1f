"""A real PgBouncer (the Debian package, `make system-deps`) in transaction pooling mode in
front of a live test cluster (tests.security.live), for tests/synapse/test_pgbouncer.py.

Its configuration lives in a folder of its own: clients on 127.0.0.1 are trusted (the user
must still be in the auth file), and PgBouncer signs in to the cluster's Unix socket as its
superuser. PgBouncer refuses to run as root: as root it runs as the embedded cluster's
system user, the one account that reaches the socket (synapse.embedded_db)."""

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from synapse import embedded_db
from tests.security.live import LiveCluster, free_port

POOL_SIZE = 3  # server connections: fewer than the clients, so clients share them


def binary() -> str:
    found = shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(path,
                                                                                    os.X_OK)),
        None)
    if found is None:
        import pytest

        pytest.fail("These tests need PgBouncer: `apt-get install pgbouncer` (make "
                    "system-deps installs it).", pytrace=False)
    return found


class PgBouncer:
    def __init__(self, cluster: LiveCluster, *, database: str = "synapse"):
        self.port = free_port()
        self.database = database
        self.user = embedded_db.SUPERUSER
        self.folder = Path(tempfile.mkdtemp(prefix="synapse-pgbouncer-"))
        server = embedded_db.Cluster(cluster.data_dir)
        (self.folder / "userlist.txt").write_text(f'"{self.user}" ""\n')
        (self.folder / "pgbouncer.ini").write_text(f"""\
[databases]
{database} = host={server.socket_dir} port=5432 dbname={embedded_db.DATABASE} \
user={self.user} password={server.password()}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.folder / "userlist.txt"}
admin_users = {self.user}
pool_mode = transaction
default_pool_size = {POOL_SIZE}
max_client_conn = 200
logfile = {self.folder / "pgbouncer.log"}
pidfile = {self.folder / "pgbouncer.pid"}
""")
        args = [binary()]
        if os.geteuid() == 0:
            owner = pwd.getpwnam(embedded_db.SYSTEM_USER)
            for path in [self.folder, *self.folder.iterdir()]:
                os.chown(path, owner.pw_uid, owner.pw_gid)
            args += ["-u", embedded_db.SYSTEM_USER]
        os.chmod(self.folder / "pgbouncer.ini", 0o600)
        self.process = subprocess.Popen([*args, str(self.folder / "pgbouncer.ini")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def connect(self, **params) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=self.port, dbname=self.database,
                               user=self.user, autocommit=True, **params)

    def admin(self, command: str) -> list[tuple]:
        """A command of PgBouncer's admin console (simple query protocol only)."""
        with psycopg.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer",
                             user=self.user, autocommit=True,
                             cursor_factory=psycopg.ClientCursor) as conn:
            cursor = conn.execute(command)
            return cursor.fetchall() if cursor.description else []

    def _wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            try:
                self.admin("SHOW VERSION")
                return
            except psycopg.OperationalError:
                time.sleep(0.2)
        raise AssertionError(f"PgBouncer did not start:\n{self.log()}")

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
