"""The embedded PostgreSQL: data survives restarts and crashes, processes share one
cluster, and a server without pgvector stops the app with a plain message."""

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from synapse import embedded_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_dir():
    folder = Path(tempfile.mkdtemp(prefix="synapse-edb-"))
    yield folder
    embedded_db.destroy(folder)


def connect(cluster):
    return psycopg.connect(host=str(cluster.socket_dir), port=5432, user="postgres",
                           dbname=embedded_db.DATABASE, autocommit=True)


def postmaster_pid(cluster) -> int:
    return int((cluster.pgdata / "postmaster.pid").read_text().splitlines()[0])


def test_first_start_creates_cluster_database_and_pgvector(data_dir):
    cluster = embedded_db.ensure_running(data_dir)
    with connect(cluster) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        assert conn.execute("SELECT '[1,2]'::vector <-> '[1,3]'::vector").fetchone()[0] == 1
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("18")


def test_data_survives_a_clean_restart(data_dir):
    cluster = embedded_db.ensure_running(data_dir)
    with connect(cluster) as conn:
        conn.execute("CREATE TABLE kept (value text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    assert embedded_db.stop(data_dir) is True
    assert not embedded_db.is_running(cluster)
    cluster = embedded_db.ensure_running(data_dir)
    with connect(cluster) as conn:
        assert conn.execute("SELECT value FROM kept").fetchone()[0] == "still here"


def test_a_cluster_killed_with_sigkill_is_recovered_with_its_committed_data(data_dir):
    cluster = embedded_db.ensure_running(data_dir)
    with connect(cluster) as conn:
        conn.execute("CREATE TABLE acknowledged (n int)")
        conn.execute("INSERT INTO acknowledged SELECT generate_series(1, 1000)")
    os.kill(postmaster_pid(cluster), signal.SIGKILL)
    cluster = embedded_db.ensure_running(data_dir)
    with connect(cluster) as conn:
        assert conn.execute("SELECT count(*) FROM acknowledged").fetchone()[0] == 1000


def test_a_stale_postmaster_pid_file_is_not_a_dead_end(data_dir):
    cluster = embedded_db.ensure_running(data_dir)
    embedded_db.stop(data_dir)
    # A pid file left by a server that no longer exists (e.g. after a machine crash).
    dead_pid = 2 ** 22 - 7
    (cluster.pgdata / "postmaster.pid").write_text(
        f"{dead_pid}\n{cluster.pgdata}\n0\n5432\n{cluster.socket_dir}\n\n0 0\nready\n")
    cluster = embedded_db.ensure_running(data_dir)
    with connect(cluster) as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1


def test_several_processes_starting_at_once_share_one_cluster(data_dir):
    code = ("import sys; from synapse import embedded_db; "
            "print(embedded_db.ensure_running(sys.argv[1]).pgdata)")
    processes = [subprocess.Popen([sys.executable, "-c", code, str(data_dir)], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    cluster = embedded_db.Cluster(data_dir)
    assert embedded_db.is_running(cluster)
    postmasters = subprocess.run(["pgrep", "-f", f"postgres -D {cluster.pgdata}"],
                                 capture_output=True, text=True).stdout.split()
    assert len(postmasters) == 1


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="root only")
def test_as_root_only_the_search_bit_is_added_to_parent_folders():
    parent = Path(tempfile.mkdtemp(prefix="synapse-private-"))
    parent.chmod(0o700)
    try:
        embedded_db.ensure_running(parent / "data")
        assert stat.S_IMODE(parent.stat().st_mode) == 0o701
        pgdata = parent / "data" / "pgdata"
        assert stat.S_IMODE(pgdata.stat().st_mode) == 0o700
        assert pgdata.owner() == embedded_db.SYSTEM_USER
    finally:
        embedded_db.destroy(parent / "data")
        shutil.rmtree(parent, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _debian_postgres_bin() -> Path | None:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    for candidate in candidates:
        version = candidate.parent.parent.name
        if not Path(f"/usr/share/postgresql/{version}/extension/vector.control").exists():
            return candidate.parent
    return None


@pytest.fixture
def postgres_without_pgvector():
    """A stock PostgreSQL server (Debian's package) that has no pgvector extension."""
    bin_dir = _debian_postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server without pgvector on this machine (make system-deps)")
    folder = Path(tempfile.mkdtemp(prefix="synapse-novector-"))
    folder.chmod(0o755)
    pgdata = folder / "pgdata"
    run_as = {}
    if os.geteuid() == 0:
        embedded_db._ensure_system_user()
        shutil.chown(folder, embedded_db.SYSTEM_USER, embedded_db.SYSTEM_USER)
        run_as = {"user": embedded_db.SYSTEM_USER, "group": embedded_db.SYSTEM_USER, "cwd": "/"}
    port = _free_port()
    subprocess.run([bin_dir / "initdb", "-D", pgdata, "--auth=trust", "-U", "postgres"],
                   check=True, capture_output=True, **run_as)
    subprocess.run([bin_dir / "pg_ctl", "-D", pgdata, "-l", folder / "log", "-w", "-o",
                    f"-p {port} -k {folder} -h 127.0.0.1", "start"], check=True,
                   capture_output=True, **run_as)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([bin_dir / "pg_ctl", "-D", pgdata, "-m", "immediate", "stop"],
                       capture_output=True, **run_as)
        shutil.rmtree(folder, ignore_errors=True)


def test_database_url_without_pgvector_stops_the_app_with_a_plain_message(
        postgres_without_pgvector):
    env = {**os.environ, "DATABASE_URL": postgres_without_pgvector,
           "DJANGO_SETTINGS_MODULE": "synapse.settings"}
    result = subprocess.run([sys.executable, "-c", "import synapse.wsgi"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "has no pgvector extension" in result.stderr
