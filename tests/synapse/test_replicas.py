"""Read replicas (synapse.db_router, synapse.replicas): a primary and a streaming standby from
the embedded PostgreSQL binaries, and a live server reading from both.

The standby's replay is paused to tell the two apart: a memory stored after the pause is on
the primary only, so an answer without it came from the standby, and one with it from the
primary."""

import os
import subprocess
import sys
import time

import httpx
import pytest

from synapse.db_router import ReplicaRouter, reads_from
from tests.security.live import ROOT, Server
from tests.synapse.replicated import Replicated, connect

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("replicas")]


@pytest.fixture(scope="module")
def replicated():
    world = Replicated()
    yield world
    world.destroy()


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def seen(server: Server, key: str, marker: str, *, meaning: bool = False) -> dict[str, bool]:
    """Whether list, keyword search and recall (text and budgeted) show ``marker``; with
    ``meaning``, hybrid and semantic search too (they run the model)."""
    headers = bearer(key)
    answers = {
        "list": httpx.get(f"{server.url}/memory?limit=100", headers=headers),
        "search": httpx.get(f"{server.url}/memory/search", params={"q": marker},
                            headers=headers),
        "recall": httpx.get(f"{server.url}/memory/recall", headers=headers),
        "budgeted recall": httpx.get(f"{server.url}/memory/recall?budget=4000",
                                     headers=headers),
    }
    if meaning:
        question = f"The replicated fact {marker}"
        answers["hybrid search"] = httpx.get(
            f"{server.url}/memory/search", params={"q": question, "mode": "hybrid"},
            headers=headers, timeout=120)
        answers["semantic search"] = httpx.get(
            f"{server.url}/memory/semantic-search", params={"q": question},
            headers=headers, timeout=120)
    for name, answer in answers.items():
        assert answer.status_code == 200, (name, answer.text, server.output()[-3000:])
    # A search answer names its query: only its results count.
    return {name: marker in (str(answer.json()["results"]) if "search" in name
                             else answer.text)
            for name, answer in answers.items()}


def store(server: Server, key: str, marker: str) -> None:
    answer = httpx.post(f"{server.url}/memory", headers=bearer(key),
                        json={"category": "fact", "key": marker,
                              "content": f"The replicated fact {marker}."})
    assert answer.status_code == 201, answer.text


def wait_for_log(server: Server, text: str, poke, times: int = 1, timeout: float = 30) -> None:
    """Call ``poke`` until the server's log shows ``text`` ``times`` times."""
    deadline = time.monotonic() + timeout
    while server.output().count(text) < times:
        assert time.monotonic() < deadline, server.output()[-3000:]
        poke()
        time.sleep(0.1)


IN_USE = "read replica replica1 is in use"
EVERY_READ = ("list", "search", "recall", "budgeted recall")
MEANING = ("hybrid search", "semantic search")


def test_the_standby_serves_other_principals_and_the_writer_reads_its_own_write(replicated):
    server = replicated.server(DATABASE_REPLICA_MAX_LAG_MS=str(3600 * 1000))
    try:
        writer, reader = replicated.live.key, replicated.reader_key
        # The server measures the standby on the reads it routes; once in use it stays so
        # (its lag, measured from the pause on, stays under the hour allowed here).
        wait_for_log(server, IN_USE, lambda: seen(server, reader, "zqnothing"))
        replicated.pause_replay()
        store(server, writer, "zqreplicaone")
        embedded = httpx.post(f"{server.url}/memory/embed-batch", headers=bearer(writer),
                              json={"limit": 10}, timeout=120)
        assert embedded.status_code == 200 and embedded.json()["embedded"] >= 1, embedded.text

        # The writer reads its own write at once: from the primary.
        assert seen(server, writer, "zqreplicaone", meaning=True) == dict.fromkeys(
            EVERY_READ + MEANING, True)
        # Another principal of the same mind reads from the paused standby: not there yet.
        assert seen(server, reader, "zqreplicaone", meaning=True) == dict.fromkeys(
            EVERY_READ + MEANING, False)
        # The primary has it (straight from its database, for the record).
        with connect(replicated.primary) as conn:
            assert conn.execute("SELECT count(*) FROM memories_memory WHERE key = %s",
                                ["zqreplicaone"]).fetchone()[0] == 1

        # Once the standby replays, the other principal sees it there, embedding included.
        replicated.resume_replay()
        assert seen(server, reader, "zqreplicaone", meaning=True) == dict.fromkeys(
            EVERY_READ + MEANING, True)
        # The writer's reads go back to the standby once it holds the write: with replay
        # paused again, a change made straight on the primary (no principal marked) is
        # not in what the writer reads. The server learns that the standby holds the
        # write at its next check (every 100 ms, on a routed read): tried a few times.
        for attempt in range(50):
            replicated.wait_replayed()
            seen(server, reader, "zqnothing")  # routed reads: the server checks the standby
            replicated.pause_replay()
            with connect(replicated.primary) as conn:
                conn.execute("UPDATE memories_memory SET content = content || %s "
                             "WHERE key = 'zqreplicaone'", [f" zqprimaryonly{attempt}"])
            from_standby = not seen(server, writer, f"zqprimaryonly{attempt}")["list"]
            replicated.resume_replay()
            if from_standby:
                break
            time.sleep(0.1)
        assert from_standby, server.output()[-3000:]
    finally:
        output = server.stop()
    assert "Traceback" not in output, output[-3000:]


def test_a_lagging_standby_is_not_read_from(replicated):
    server = replicated.server(DATABASE_REPLICA_MAX_LAG_MS="200")
    try:
        writer, reader = replicated.live.key, replicated.reader_key
        wait_for_log(server, IN_USE, lambda: seen(server, reader, "zqnothing"))
        replicated.pause_replay()
        store(server, writer, "zqlagging")
        # The standby falls behind the primary's next WAL position by more than 200 ms:
        # the server stops reading from it, and the reader sees the write on the primary.
        wait_for_log(server, "read replica replica1 is behind",
                     lambda: seen(server, reader, "zqlagging"))
        assert seen(server, reader, "zqlagging") == dict.fromkeys(EVERY_READ, True)
        # Caught up again, it is read from again.
        replicated.resume_replay()
        wait_for_log(server, IN_USE, lambda: seen(server, reader, "zqnothing"), times=2)
    finally:
        output = server.stop()
    assert "Traceback" not in output, output[-3000:]


def test_a_standby_that_goes_down_is_not_read_from(replicated):
    """Last in this module: the standby stays down."""
    # Measured once in use, then not for ten minutes: the server learns that the standby
    # is gone from the read that fails on it, and answers that read from the primary.
    server = replicated.server(DATABASE_REPLICA_MAX_LAG_MS=str(3600 * 1000),
                               DATABASE_REPLICA_CHECK_MS=str(600 * 1000))
    try:
        writer, reader = replicated.live.key, replicated.reader_key
        wait_for_log(server, IN_USE, lambda: seen(server, reader, "zqnothing"))
        replicated.pause_replay()
        store(server, writer, "zqstandbydown")
        assert seen(server, reader, "zqstandbydown")["list"] is False
        replicated.stop_standby()
        # Every read answers, from the primary, with the write.
        assert seen(server, reader, "zqstandbydown") == dict.fromkeys(EVERY_READ, True)
        assert "read replica replica1 failed a read: reads go to the primary" in \
            server.output()
        # Writes were never affected.
        store(server, writer, "zqstandbydownwrite")
    finally:
        output = server.stop()
    assert "Traceback" not in output, output[-3000:]


def test_a_standby_that_does_not_answer_is_not_read_from(replicated):
    """Last in this module, with the test above: the standby is down from the start.

    Self-contained: pytest-xdist may run it in another process than the test above, with a
    module fixture of its own."""
    replicated.stop_standby()  # if the test above did not run in this process
    server = replicated.server()
    try:
        store(server, replicated.live.key, "zqneverup")
        answers = seen(server, replicated.reader_key, "zqneverup")
        assert answers == dict.fromkeys(EVERY_READ, True)
        assert "read replica replica1 does not answer (OperationalError): reads go to " \
            "the primary" in server.output()
    finally:
        output = server.stop()
    assert "Traceback" not in output, output[-3000:]


# -- The router and settings, without servers --------------------------------------------------

def test_the_router_sends_memory_reads_where_a_view_allows_and_everything_else_to_the_primary():
    from django.contrib.auth import get_user_model

    from memories.models import Memory, MemoryVersion
    from minds.models import Mind, MindKey

    router = ReplicaRouter()
    assert router.db_for_read(Memory) == "default"
    with reads_from("replica1"):
        assert router.db_for_read(Memory) == "replica1"
        assert router.db_for_read(MemoryVersion) == "replica1"
        for model in (Mind, MindKey, get_user_model()):
            assert router.db_for_read(model) == "default"
        assert router.db_for_write(Memory) == "default"
    assert router.db_for_read(Memory) == "default"
    assert router.allow_migrate("default", "memories") is True
    assert router.allow_migrate("replica1", "memories") is False


def test_replica_urls_become_aliases_configured_like_the_primary(tmp_path):
    code = ("import json; from django.conf import settings as s; print(json.dumps({"
            "'databases': {k: {'host': v['HOST'], 'test': v.get('TEST', {}), "
            "'options': v['OPTIONS'], 'max_age': v['CONN_MAX_AGE']} for k, v in "
            "s.DATABASES.items()}, 'routers': s.DATABASE_ROUTERS, "
            "'middleware': s.MIDDLEWARE[-1]}))")
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env.update({"DJANGO_SETTINGS_MODULE": "synapse.settings", "SYNAPSE_DATA_DIR": str(tmp_path),
                "DATABASE_URL": "postgresql://u:p@primary.example:5432/synapse",
                "DATABASE_REPLICA_URLS": "postgresql://u:p@one.example/synapse, "
                                         "postgresql://u:p@two.example/synapse",
                "DATABASE_STATEMENT_TIMEOUT_MS": "1234"})
    import json

    result = subprocess.run([sys.executable, "-c", "import django; django.setup(); " + code],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    databases = found["databases"]
    assert list(databases) == ["default", "replica1", "replica2"]
    assert [databases[alias]["host"] for alias in databases] == [
        "primary.example", "one.example", "two.example"]
    for alias in ("replica1", "replica2"):
        assert databases[alias]["test"]["MIRROR"] == "default"
        assert databases[alias]["options"]["options"] == "-c statement_timeout=1234"
        assert databases[alias]["options"]["connect_timeout"] == 2
        assert databases[alias]["max_age"] == databases["default"]["max_age"]
    assert found["routers"] == ["synapse.db_router.ReplicaRouter"]
    assert found["middleware"] == "synapse.middleware.ReadYourWritesMiddleware"

    env["DATABASE_REPLICA_URLS"] = "not a url"
    refused = subprocess.run([sys.executable, "-c", "import synapse.settings"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "DATABASE_REPLICA_URLS: URL 1 is not a database URL" in refused.stderr
    assert "p@" not in refused.stderr  # no password in the message
