"""A primary and a streaming standby of it, from the embedded PostgreSQL binaries, for the
read-replica tests (tests/synapse/test_replicas.py) and bench/replicas.py.

The primary is a migrated live cluster (tests.security.live: a user, a mind and a writing
Mind Key); the standby is a ``pg_basebackup -R`` copy of it, started on a socket folder of
its own as the same system user."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

from synapse import embedded_db
from synapse.db_router import parse_lsn
from tests.security.live import Server, destroy_cluster, make_cluster

REPLICATION_HBA = "local   replication  all                   scram-sha-256\n"


def _as_owner() -> dict:
    if os.geteuid() == 0:
        return {"user": embedded_db.SYSTEM_USER, "group": embedded_db.SYSTEM_USER, "cwd": "/"}
    return {}


def connect(cluster: embedded_db.Cluster, dbname: str = embedded_db.DATABASE):
    return psycopg.connect(host=str(cluster.socket_dir), port=5432, user="postgres",
                           password=cluster.password(), dbname=dbname, autocommit=True)


class Replicated:
    """A migrated primary (tests.security.live, with a user, a mind and a writing key), a
    second key of that mind, and a streaming standby of it (pg_basebackup -R)."""

    def __init__(self):
        self.live = make_cluster()
        self.primary = embedded_db.Cluster(self.live.data_dir)
        self.reader_key = self.live.manage("issue_key", self.live.mind_id, "--name", "reader",
                                           "--scope", "read")
        hba = self.primary.pgdata / "pg_hba.conf"
        with open(hba, "a", encoding="utf-8") as handle:
            handle.write(REPLICATION_HBA)
        with connect(self.primary) as conn:
            conn.execute("SELECT pg_reload_conf()")
        self.standby = embedded_db.Cluster(Path(tempfile.mkdtemp(prefix="synapse-standby-")))
        shutil.copy(self.primary.password_file, self.standby.password_file)
        embedded_db._prepare_folders(self.standby)
        subprocess.run([embedded_db._bin("pg_basebackup"), "-D", str(self.standby.pgdata),
                        "-R", "-X", "stream", "-c", "fast", "-h", str(self.primary.socket_dir),
                        "-p", "5432", "-U", "postgres", "-w"],
                       check=True, capture_output=True, timeout=120,
                       env={**os.environ, "PGPASSWORD": self.primary.password()},
                       **_as_owner())
        embedded_db._start(self.standby)
        self.wait_replayed()

    def replica_url(self) -> str:
        return (f"postgresql://postgres:{self.standby.password()}@"
                f"{quote(str(self.standby.socket_dir), safe='')}:5432/{embedded_db.DATABASE}")

    def server(self, **env: str) -> Server:
        return Server(self.live, workers=1, threads=2, env={
            "DATABASE_REPLICA_URLS": self.replica_url(), "DATABASE_REPLICA_CHECK_MS": "100",
            "LOG_LEVEL": "WARNING", **env})

    def wait_replayed(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        with connect(self.primary) as conn:
            target = parse_lsn(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
        deadline = time.monotonic() + timeout
        while True:
            with connect(self.standby) as conn:
                replayed = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0]
            if replayed is not None and parse_lsn(replayed) >= target:
                return
            assert time.monotonic() < deadline, f"the standby did not replay to {target}"
            time.sleep(0.05)

    def pause_replay(self) -> None:
        with connect(self.standby) as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
            while conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] \
                    != "paused":
                time.sleep(0.02)

    def resume_replay(self) -> None:
        with connect(self.standby) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
        self.wait_replayed()

    def stop_standby(self) -> None:
        embedded_db.stop(self.standby.data_dir, mode="immediate")

    def destroy(self) -> None:
        embedded_db.destroy(self.standby.data_dir)
        destroy_cluster(self.live)
