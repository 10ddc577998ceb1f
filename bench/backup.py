"""Backup benchmark: ``manage.py backup`` of a mind of 100,000 memories (two versions each),
then ``manage.py restore`` into a fresh data folder (a second embedded cluster, as in an
upgrade), with the time of each, the archive's size and a row count check.

    .venv/bin/python bench/backup.py [--memories 100000] [--keep-data]

Writes bench/results/backup.md.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, machine_line, setup_django, teardown  # noqa: E402
from bench.export import fill  # noqa: E402

TABLES = ("memories_memory", "memories_memoryversion")


def counts(cursor) -> dict[str, int]:
    result = {}
    for table in TABLES:
        cursor.execute(f'SELECT count(*) FROM "{table}"')
        result[table] = cursor.fetchone()[0]
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "backup.md"))
    args = parser.parse_args()

    data_dir = setup_django()
    fresh = Path(tempfile.mkdtemp(prefix="synapse-bench-restore-")) / "data"
    work = Path(tempfile.mkdtemp(prefix="synapse-bench-archive-"))
    try:
        import psycopg
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection

        from minds.services import mind_create
        from synapse import embedded_db

        owner = get_user_model().objects.create_user("bench")
        fill(mind_create(owner=owner, name="Bench"), args.memories, random.Random(7))
        with connection.cursor() as cursor:
            before = counts(cursor)
            cursor.execute("SELECT pg_database_size(current_database())")
            database_bytes = cursor.fetchone()[0]

        archive = work / "synapse.dump"
        started = time.perf_counter()
        call_command("backup", str(archive), stdout=StringIO())
        backup_seconds = time.perf_counter() - started

        env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
        env["SYNAPSE_DATA_DIR"] = str(fresh)
        # The fresh cluster is created first (initdb), so the restore time is the restore's.
        subprocess.run([sys.executable, "manage.py", "embedded_db", "start"], cwd=ROOT,
                       env=env, check=True, capture_output=True)
        started = time.perf_counter()
        subprocess.run([sys.executable, "manage.py", "restore", str(archive)], cwd=ROOT,
                       env=env, check=True, capture_output=True)
        restore_seconds = time.perf_counter() - started

        cluster = embedded_db.Cluster(fresh.resolve())
        with psycopg.connect(host=str(cluster.socket_dir), port=5432, user="postgres",
                             password=cluster.password(), dbname=embedded_db.DATABASE) as conn:
            after = counts(conn.cursor())
        assert after == before, (before, after)

        mib = 1024 * 1024
        report = "\n".join([
            "# Backup and restore (manage.py backup / restore)",
            "",
            f"{machine_line()}",
            "",
            f"A mind of {args.memories:,} memories, two versions each (one in twenty in the "
            "trash), no embeddings; the embedded PostgreSQL. `backup` is pg_dump's custom "
            "format; `restore` loads it in one transaction into a fresh data folder (a second "
            "cluster, as in an upgrade), indexes included. Rows compared by count after.",
            "",
            "| | figure |",
            "|---|---|",
            f"| database size | {database_bytes / mib:.0f} MiB |",
            f"| backup time | {backup_seconds:.1f} s |",
            f"| archive size | {archive.stat().st_size / mib:.1f} MiB |",
            f"| restore time | {restore_seconds:.1f} s |",
            f"| rows after restore | {after['memories_memory']:,} memories, "
            f"{after['memories_memoryversion']:,} versions (same as before) |",
            "",
            "Run: `.venv/bin/python bench/backup.py`",
            "",
        ])
        Path(args.output).write_text(report, encoding="utf-8")
        print(report)
    finally:
        if not args.keep_data:
            from synapse import embedded_db

            embedded_db.destroy(fresh)
            subprocess.run(["rm", "-rf", str(work), str(fresh.parent)], check=False)
        teardown(data_dir, args.keep_data)


if __name__ == "__main__":
    main()
