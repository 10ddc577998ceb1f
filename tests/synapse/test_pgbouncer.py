"""Synapse behind a real PgBouncer in transaction pooling mode (docs/scaling.md, "PgBouncer").

PgBouncer (tests/synapse/pgbouncer.py) stands in front of a live cluster with fewer server
connections than the server has threads, so consecutive transactions of one Django
connection run on different server connections. Through it: ``migrate`` stores the
statement timeout on the role (PgBouncer refuses the startup option that carries it on a
direct connection), and a gunicorn server answers store → recall → search → export, a
recall and an export streamed over cursors past the one-query limit, and concurrent
writers, correctly; a statement running past the timeout is cancelled."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from memories.recall import WHOLE_LIMIT
from tests.security.live import ROOT, Server
from tests.synapse.pgbouncer import POOL_SIZE, PgBouncer

pytestmark = [pytest.mark.slow]

TIMEOUT_MS = 1500
BULK = WHOLE_LIMIT + 100


@pytest.fixture(scope="module")
def bouncer(scale_cluster):
    bouncer = PgBouncer(scale_cluster)
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="module")
def pooled(scale_cluster, bouncer):
    """The environment of a Synapse process behind PgBouncer, after ``migrate`` through
    it stored the timeout on the role and PgBouncer reconnected (as docs/scaling.md says);
    the output of that migrate. The role gets its old default back at the end."""
    env = {**scale_cluster.env, "DATABASE_URL": bouncer.url, "DATABASE_POOLER": "pgbouncer",
           "DATABASE_STATEMENT_TIMEOUT_MS": str(TIMEOUT_MS)}
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    bouncer.admin("RECONNECT")
    yield env, migrate.stdout
    with bouncer.connect() as conn:
        conn.execute("ALTER ROLE CURRENT_USER IN DATABASE synapse RESET statement_timeout")


@pytest.fixture(scope="module")
def server(scale_cluster, pooled):
    # Four threads on three server connections: they take turns.
    server = Server(scale_cluster, workers=1, threads=POOL_SIZE + 1, env=pooled[0])
    yield server
    server.stop()


def django_shell(env: dict, code: str) -> str:
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_pgbouncer_refuses_the_startup_option_so_migrate_puts_the_timeout_on_the_role(
        bouncer, pooled):
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        bouncer.connect(options=f"-c statement_timeout={TIMEOUT_MS}")
    env, migrate_output = pooled
    assert (f"ALTER ROLE CURRENT_USER IN DATABASE \"synapse\" SET statement_timeout = "
            f"{TIMEOUT_MS}") in migrate_output
    # A Synapse process behind PgBouncer: the role's timeout, on every server connection;
    # a statement running past it is cancelled, and the connection goes on working.
    output = django_shell(env, f"""
from django.db import OperationalError, connection
with connection.cursor() as cursor:
    for _ in range(2 * {POOL_SIZE}):
        cursor.execute("SHOW statement_timeout")
        print("timeout", cursor.fetchone()[0])
    try:
        cursor.execute("SELECT pg_sleep({3 * TIMEOUT_MS / 1000})")
        print("slept")
    except OperationalError as error:
        print("cancelled:", type(error.__cause__).__name__)
    cursor.execute("SELECT 1")
    print("after", cursor.fetchone()[0])
""")
    timeouts = {line.split()[1] for line in output.splitlines() if line.startswith("timeout")}
    assert timeouts == {f"{TIMEOUT_MS}ms"}, output
    assert "cancelled: QueryCanceled" in output and "slept" not in output, output
    assert "after 1" in output, output
    assert "statement_timeout through PgBouncer" not in output, output


def test_without_the_role_setting_a_pooled_process_says_what_to_do(scale_cluster, bouncer,
                                                                    pooled):
    """A process whose server connections lack the configured timeout says so (once) and
    names the fix; it still works."""
    env = {**pooled[0], "DATABASE_STATEMENT_TIMEOUT_MS": str(TIMEOUT_MS + 1)}
    output = django_shell(env, """
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT 41 + 1")
    print("answer", cursor.fetchone()[0])
""")
    assert "answer 42" in output
    assert output.count("statement_timeout through PgBouncer is 1500ms") == 1, output
    assert "manage.py migrate" in output and "RECONNECT" in output


def bulk_export(template: dict, count: int) -> dict:
    """A mind export of ``count`` memories shaped like ``template`` (one memory of an
    export), under the path bulk/."""
    memories = []
    for number in range(count):
        key, content = f"bulk_{number:05d}", f"Bulk memory number {number}"
        item = {**template, "id": f"mem_bulk{number:05d}", "key": key, "content": content,
                "path": "bulk", "category": "fact", "tags": []}
        item["versions"] = [{**version, "key": key, "content": content, "path": "bulk",
                             "category": "fact", "tags": []}
                            for version in template["versions"]]
        memories.append(item)
    return {"format": "synapse.mind-export", "format_version": 1, "memories": memories,
            "tombstones": []}


def blocks(text: str) -> list[str]:
    """The citations of a text recall, in order."""
    return [line.split()[4] for line in text.splitlines() if line.startswith("[")]


@pytest.fixture(scope="module")
def own_key(scale_cluster) -> str:
    """A Mind Key of a new mind: the cluster is shared with the many-nodes tests."""
    mind = scale_cluster.manage("create_mind", "PgBouncer Mind", "--owner",
                                scale_cluster.username)
    return scale_cluster.manage("issue_key", mind, "--name", "pgbouncer agent")


def test_a_server_behind_pgbouncer_answers_correctly(server, own_key):
    client = httpx.Client(base_url=server.url, timeout=60,
                          headers={"Authorization": f"Bearer {own_key}"})
    # Store → recall → search → export.
    stored = client.post("/memory", json={"category": "preference", "key": "tea",
                                          "content": "Alice drinks green tea every morning"})
    assert stored.status_code == 201, stored.text
    tea = stored.json()["id"]
    assert "green tea every morning" in client.get("/memory/recall").text
    found = client.get("/memory/search", params={"q": "green tea"}).json()
    assert [hit["id"] for hit in found["results"]] == [tea]
    export = client.get("/memory/mind-export").json()
    assert [memory["id"] for memory in export["memories"]] == [tea]

    # Past WHOLE_LIMIT: recall and export stream over server-side cursors, each in one
    # transaction (synapse.db.streamed), so every FETCH reaches the server connection that
    # declared the cursor.
    imported = client.post("/memory/mind-import",
                           content=json.dumps(bulk_export(export["memories"][0], BULK)),
                           headers={"Content-Type": "application/json"})
    assert imported.status_code == 200, imported.text

    def read(kind: str) -> None:
        """One streamed read, checked; run six at once on four threads sharing three
        server connections, so a cursor that outlived its transaction would be looked
        for on a server connection that never declared it."""
        with httpx.Client(base_url=server.url, timeout=60, headers=client.headers) as own:
            if kind == "text":
                with own.stream("GET", "/memory/recall") as recall:
                    assert recall.status_code == 200
                    assert recall.headers["X-Recall-Count"] == str(BULK + 1)
                    assert "Content-Length" not in recall.headers  # streamed
                    cited = blocks(recall.read().decode())
                assert len(cited) == len(set(cited)) == BULK + 1
            elif kind == "path":
                # Narrowed by a path: the cursor is planned for every row (SET LOCAL).
                narrowed = own.get("/memory/recall", params={"path": "bulk", "format": "json"})
                assert narrowed.status_code == 200, narrowed.text
                keys = [memory["key"] for memory in narrowed.json()["memories"]]
                assert sorted(keys) == [f"bulk_{number:05d}" for number in range(BULK)]
            else:
                everything = own.get("/memory/mind-export").json()
                assert len(everything["memories"]) == BULK + 1
                assert sum(len(memory["versions"])
                           for memory in everything["memories"]) == BULK + 1

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(read, ["text", "path", "export"] * 2))
    assert client.get("/memory/recall", params={"budget": 200}).status_code == 200

    # Concurrent writers: new memories, and one memory updated by all of them at once.
    def write(number: int) -> list[httpx.Response]:
        with httpx.Client(base_url=server.url, timeout=60, headers=client.headers) as own:
            answers = [own.post("/memory", json={"category": "fact", "key": f"w{number}_{n}",
                                                 "content": f"writer {number} note {n}"})
                       for n in range(4)]
            answers.append(own.post("/memory", json={"category": "fact", "key": "shared",
                                                     "content": f"written by {number}"}))
            return answers

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = [answer for batch in pool.map(write, range(8)) for answer in batch]
    statuses = [answer.status_code for answer in answers]
    assert statuses.count(201) == 8 * 4 + 1 and statuses.count(200) == 7, statuses
    shared = {answer.json()["id"] for answer in answers[4::5]}
    assert len(shared) == 1
    assert client.get(f"/memory/{shared.pop()}").json()["version"] == 8
    total = client.get("/memory/recall", params={"format": "json"})
    assert int(total.headers["X-Recall-Count"]) == BULK + 1 + 8 * 4 + 1

    log = server.stop()
    assert "Traceback" not in log and "statement_timeout through PgBouncer" not in log, log
