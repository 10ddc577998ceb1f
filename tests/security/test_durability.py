"""Durability: PostgreSQL killed with SIGKILL under concurrent writes loses no acknowledged write.

Two real setups, each a gunicorn server on its own throwaway embedded cluster:

- embedded (the default): the server itself starts the killed cluster again on its next
  connection attempt (synapse.db.base → synapse.embedded_db.ensure_running);
- external (DATABASE_URL): the server cannot restart the database; while it is down every
  route answers 503 with Retry-After, and once it is back the server serves again without
  being restarted.

Every write that got a 2xx must be readable afterwards with the acknowledged content.
"""

import os
import signal
import threading
import time
import uuid
from urllib.parse import quote

import httpx
import pytest

from synapse import embedded_db
from tests.security.live import Server, destroy_cluster, make_cluster

# Eight writers against a server whose database is SIGKILLed: it needs the machine to itself.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

WRITERS = 8
FIGURES: dict[str, dict] = {}


class Writers:
    """Threads that store fresh memories as fast as the server answers, recording each answer."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acknowledged: dict[str, tuple[str, str]] = {}  # key → (memory id, content)
        self.statuses: list[tuple[float, int | str]] = []
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True)
                        for n in range(WRITERS)]

    def run(self, writer: int) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(timeout=90, headers=headers) as client:
            index = 0
            while not self.stop.is_set():
                key = f"writer_{writer}_{index}"
                content = f"write {writer}/{index} {uuid.uuid4().hex}"
                index += 1
                try:
                    response = client.post(self.url + "/memory", json={
                        "category": "note", "key": key, "content": content})
                    status = response.status_code
                except httpx.HTTPError as error:
                    status = type(error).__name__
                with self.lock:
                    self.statuses.append((time.monotonic(), status))
                    if isinstance(status, int) and 200 <= status < 300:
                        self.acknowledged[key] = (response.json()["id"], content)
                if status == 503:
                    time.sleep(0.2)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)

    def wait_for_acks(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        target = len(self.acknowledged) + count
        while len(self.acknowledged) < target:
            assert time.monotonic() < deadline, f"stuck at {len(self.acknowledged)} writes: " \
                                                f"{self.statuses[-5:]}"
            time.sleep(0.05)


def kill_postmaster(cluster) -> None:
    os.kill(cluster.postmaster_pid, signal.SIGKILL)


def assert_all_present(server: Server, key: str, acknowledged: dict) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(timeout=30, headers=headers) as client:
        missing = []
        for memory_id, content in acknowledged.values():
            response = client.get(f"{server.url}/memory/{memory_id}")
            if response.status_code != 200 or response.json()["content"] != content:
                missing.append((memory_id, response.status_code))
    assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:5]}"


def test_sigkilled_embedded_postgres_comes_back_and_loses_no_acknowledged_write():
    cluster = make_cluster()
    server = Server(cluster, workers=2, threads=4)
    try:
        with Writers(server.url, cluster.key) as writers:
            writers.wait_for_acks(60)
            killed_at = time.monotonic()
            kill_postmaster(cluster)
            writers.wait_for_acks(60)  # the server restarted the cluster by itself
        after_kill = [status for at, status in writers.statuses if at >= killed_at]
        statuses = {status for _, status in writers.statuses}
        assert statuses <= {200, 201, 503}, f"unexpected answers: {statuses}"
        assert_all_present(server, cluster.key, writers.acknowledged)
        FIGURES["embedded"] = {"writes": len(writers.statuses),
                               "acknowledged": len(writers.acknowledged),
                               "503_after_kill": after_kill.count(503),
                               "lost": 0}
        print(f"\ndurability (embedded): {FIGURES['embedded']}")
    finally:
        output = server.stop()
        destroy_cluster(cluster)
    assert "Traceback" not in output, output[output.index("Traceback") - 500:][:4000]


def test_external_database_down_is_503_everywhere_and_the_server_recovers_by_itself():
    cluster = make_cluster()
    embedded = embedded_db.Cluster(cluster.data_dir)
    database_url = (f"postgresql://postgres:{quote(embedded.password(), safe='')}@"
                    f"{quote(str(embedded.socket_dir), safe='')}:5432/synapse")
    server = Server(cluster, workers=2, threads=4, env={"DATABASE_URL": database_url})
    try:
        with Writers(server.url, cluster.key) as writers:
            writers.wait_for_acks(40)
            kill_postmaster(cluster)
            # API routes with a Mind Key; web pages with a session cookie, whose loading in
            # middleware (outside DRF) needs the database too.
            down = [httpx.get(server.url + path, headers={
                "Authorization": f"Bearer {cluster.key}"}, timeout=30)
                for path in ("/memory", "/memory/recall", "/memory/health")]
            down += [httpx.get(server.url + path, cookies={"sessionid": "s" * 32}, timeout=30)
                     for path in ("/ui/", "/admin/")]
            writers.stop.set()
        for response in down:
            assert response.status_code == 503, (response.request.url, response.text[:300])
            assert response.json()["error"]["code"] == "unavailable"
            assert response.headers["Retry-After"]
        statuses = {status for _, status in writers.statuses}
        assert statuses <= {200, 201, 503}, f"unexpected answers: {statuses}"
        embedded_db.ensure_running(cluster.data_dir)  # the operator's database comes back
        deadline = time.monotonic() + 60
        while httpx.get(server.url + "/memory", headers={
                "Authorization": f"Bearer {cluster.key}"}).status_code != 200:
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.5)
        assert_all_present(server, cluster.key, writers.acknowledged)
        FIGURES["external"] = {"writes": len(writers.statuses),
                               "acknowledged": len(writers.acknowledged),
                               "503_while_down": sum(1 for _, s in writers.statuses if s == 503)
                               + len(down), "lost": 0}
        print(f"\ndurability (external): {FIGURES['external']}")
    finally:
        server.stop()
        destroy_cluster(cluster)
