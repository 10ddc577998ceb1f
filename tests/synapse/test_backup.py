"""``manage.py backup`` / ``restore``: the upgrade path of the embedded PostgreSQL.

A backup restored into a fresh data folder (a second embedded cluster, as after an
upgrade) holds every row of every table, and every sequence where it was."""

import os
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memories.embeddings import embed_batch
from memories.services import memory_delete, memory_store, memory_update
from minds.services import key_issue
from synapse import embedded_db

ROOT = Path(__file__).resolve().parents[2]


def table_rows(cursor) -> dict[str, list[str]]:
    """Every row of every table, as PostgreSQL's text of the row, in a fixed order."""
    cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                   "ORDER BY tablename")
    tables = [row[0] for row in cursor.fetchall()]
    rows = {}
    for table in tables:
        cursor.execute(f'SELECT t::text FROM "{table}" AS t ORDER BY 1')
        rows[table] = [row[0] for row in cursor.fetchall()]
    return rows


def sequences(cursor) -> list[tuple]:
    cursor.execute("SELECT sequencename, last_value FROM pg_sequences "
                   "WHERE schemaname = 'public' ORDER BY 1")
    return cursor.fetchall()


@pytest.fixture
def fresh_data_dir(tmp_path):
    folder = tmp_path / "fresh"
    yield folder
    embedded_db.destroy(folder)


@pytest.mark.django_db(transaction=True)
def test_a_backup_restored_into_a_fresh_data_folder_has_every_row(
        alice, alice_mind, bob, bob_mind, tmp_path, fresh_data_dir):
    key_issue(mind=alice_mind, name="laptop", created_by=alice)
    stored = memory_store(mind=alice_mind, actor=alice, category="fact", key="sky",
                          tags=["colour", "weather"],
                          content="The sky is blue.\nLine two, with 'quotes' and ünïcode.")
    memory_update(memory=stored.memory, actor=alice, content="The sky is grey today.")
    memory_store(mind=alice_mind, actor=alice, category="credentials", key="db",
                 content="postgres://secret@example/db")
    gone = memory_store(mind=bob_mind, actor=bob, category="note", content="Bob's note")
    memory_delete(memory=gone.memory, actor=bob)
    embed_batch(limit=10)  # vectors too
    archive = tmp_path / "synapse.dump"

    out = StringIO()
    call_command("backup", str(archive), stdout=out)
    assert "backed up" in out.getvalue()
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600

    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env["SYNAPSE_DATA_DIR"] = str(fresh_data_dir)
    restored = subprocess.run([sys.executable, "manage.py", "restore", str(archive)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert restored.returncode == 0, restored.stdout + restored.stderr

    with connection.cursor() as cursor:
        expected_rows, expected_sequences = table_rows(cursor), sequences(cursor)
    cluster = embedded_db.Cluster(fresh_data_dir.resolve())
    with psycopg.connect(host=str(cluster.socket_dir), port=5432, user="postgres",
                         password=cluster.password(), dbname=embedded_db.DATABASE) as conn:
        cursor = conn.cursor()
        actual_rows, actual_sequences = table_rows(cursor), sequences(cursor)
    assert expected_rows["memories_memory"]  # the comparison is not of empty tables
    assert expected_rows["memories_memoryversion"]
    assert list(actual_rows) == list(expected_rows)
    for table, rows in expected_rows.items():
        assert actual_rows[table] == rows, table
    assert actual_sequences == expected_sequences

    # A second restore into the now non-empty database is refused, and changes nothing.
    again = subprocess.run([sys.executable, "manage.py", "restore", str(archive)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode != 0 and "restore only into an empty one" in again.stderr


def test_the_password_never_reaches_a_command_line(monkeypatch, tmp_path):
    from synapse import backup as backup_module

    calls = []

    def fake_run(args, **kwargs):
        calls.append((args, kwargs["env"]))
        return subprocess.CompletedProcess(args, 0, stderr="")

    monkeypatch.setattr(backup_module.subprocess, "run", fake_run)
    database = {"NAME": "synapse", "USER": "postgres", "PASSWORD": "pa55-w0rd",
                "HOST": "/run/pg", "PORT": "5432"}
    backup_module.backup(database=database, path=tmp_path / "out.dump")
    backup_module.restore(database=database, path=tmp_path / "out.dump", existing_tables=[])
    assert [Path(args[0]).name for args, _env in calls] == ["pg_dump", "pg_restore"]
    for args, env in calls:
        assert not any("pa55-w0rd" in arg for arg in args)
        assert env["PGPASSWORD"] == "pa55-w0rd"


def test_backup_and_restore_refuse_pgbouncer_in_transaction_mode(monkeypatch, tmp_path):
    """pg_dump and pg_restore set session state: through PgBouncer (DATABASE_POOLER) they
    are refused before they run, saying how to run them."""
    from synapse import backup as backup_module

    def never(*args, **kwargs):
        raise AssertionError("no tool runs")

    monkeypatch.setattr(backup_module.subprocess, "run", never)
    database = {"NAME": "synapse", "USER": "synapse", "PASSWORD": "", "HOST": "pgbouncer",
                "PORT": "6432", "POOLER": "pgbouncer"}
    archive = tmp_path / "out.dump"
    with pytest.raises(backup_module.BackupError, match="DATABASE_POOLER unset"):
        backup_module.backup(database=database, path=archive)
    assert not archive.exists()
    archive.write_bytes(b"PGDMP")
    with pytest.raises(backup_module.BackupError, match="DATABASE_POOLER unset"):
        backup_module.restore(database=database, path=archive, existing_tables=[])


@pytest.mark.django_db
def test_restore_refuses_a_database_that_already_has_tables(tmp_path):
    archive = tmp_path / "synapse.dump"
    archive.write_bytes(b"PGDMP")
    with pytest.raises(CommandError, match="restore only into an empty one"):
        call_command("restore", str(archive), stdout=StringIO())
