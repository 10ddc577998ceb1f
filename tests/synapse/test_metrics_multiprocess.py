"""GET /metrics across processes: gunicorn with two workers and a separate embedding worker on
one PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode, docs/scaling.md,
"Metrics"). Any web worker's scrape sums every process's counters; the queue gauges come from
the database."""

import os
import shutil
import signal
import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry, multiprocess
from prometheus_client.parser import text_string_to_metric_families

from synapse.metrics import process_name
from tests.security.live import ROOT, Server, destroy_cluster, make_cluster

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("metrics-multiprocess")]

TOKEN = "multiprocess-metrics-token-0123456789abcdef"
DETAIL = "/memory/<memory_id:memory_id>"
MEMORIES = 12


@pytest.fixture(scope="module")
def cluster():
    cluster = make_cluster()
    yield cluster
    destroy_cluster(cluster)


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    response = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"},
                         timeout=30)
    assert response.status_code == 200, response.text
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_one_scrape_sums_the_web_workers_and_the_embedding_worker(cluster):
    folder = cluster.data_dir / "prometheus"
    folder.mkdir()
    env = {"SYNAPSE_METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    server = Server(cluster, workers=2, threads=2, env=env)
    worker = None
    worker_log = open(cluster.data_dir / "embed_worker.log", "w")  # noqa: SIM115
    try:
        headers = {"Authorization": f"Bearer {cluster.key}"}
        ids = []
        for number in range(MEMORIES):
            response = httpx.post(server.url + "/memory", headers=headers, timeout=30,
                                  json={"category": "fact", "key": f"fact_{number}",
                                        "content": f"Multiprocess fact number {number}"})
            assert response.status_code == 201, response.text
            ids.append(response.json()["id"])
        for memory_id in ids:
            # A new connection each time, so both web workers may answer.
            assert httpx.get(f"{server.url}/memory/{memory_id}", headers=headers,
                             timeout=30).status_code == 200
        assert httpx.post(server.url + "/mcp", json={}, timeout=30).status_code == 401

        samples = scrape(server.url)
        # Before any worker runs, every memory waits.
        assert value(samples, "synapse_embedding_queue_depth") == MEMORIES
        assert value(samples, "synapse_embedding_worker_running") == 0
        count = "synapse_http_request_duration_seconds_count"
        assert value(samples, count, route=DETAIL, method="GET", status_class="2xx") == MEMORIES
        assert value(samples, count, route="/memory", method="POST",
                     status_class="2xx") == MEMORIES
        assert value(samples, "synapse_http_errors_total", route="/mcp", method="POST",
                     status="401") == 1
        health = httpx.get(server.url + "/memory/health", headers=headers, timeout=30).json()
        assert health["embeddings"]["pending"] == MEMORIES
        assert health["embeddings"]["lag_seconds"] >= 0

        worker = subprocess.Popen(
            [sys.executable, "manage.py", "embed_worker", "--idle-sleep", "0.2"], cwd=ROOT,
            env={**cluster.env, **env}, stdout=worker_log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert worker.poll() is None, (cluster.data_dir / "embed_worker.log").read_text()
            samples = scrape(server.url)
            if value(samples, "synapse_embedding_memories_total") >= MEMORIES \
                    and value(samples, "synapse_embedding_queue_depth") == 0:
                break
            time.sleep(0.5)
        else:
            raise AssertionError((cluster.data_dir / "embed_worker.log").read_text())

        # The worker's counters, written by another process, reached the web worker's scrape.
        assert value(samples, "synapse_embedding_memories_total") == MEMORIES
        assert value(samples, "synapse_embedding_batches_total") >= 1
        assert value(samples, "synapse_embedding_busy_seconds_total") > 0
        assert value(samples, "synapse_embedding_worker_running") == 1
        assert value(samples, "synapse_embedding_queue_lag_seconds") == 0
        writers = {path.stem.split("_", 1)[1] for path in folder.glob("counter_*.db")}
        assert process_name(worker.pid) in writers and len(writers) >= 2
        health = httpx.get(server.url + "/memory/health", headers=headers, timeout=30).json()
        assert health["embeddings"]["pending"] == 0
        assert health["embeddings"]["lag_seconds"] is None
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
        worker_log.close()
        server.stop()


# One process in a container of its own: its own PID namespace (it is pid 1, as the
# entrypoint's process is in docker) and host name. It counts once told to, after both
# have opened their files.
IN_A_CONTAINER = """
import pathlib, sys, time
from synapse import metrics
folder = pathlib.Path(sys.argv[1])
(folder.parent / ("ready-" + sys.argv[2])).touch()
while not (folder.parent / "go").exists():
    time.sleep(0.01)
for _ in range(int(sys.argv[3])):
    metrics.EMBEDDED.inc()
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="PID and UTS namespaces need root and unshare(1)")
def test_processes_of_two_containers_on_one_folder_keep_their_own_counts(tmp_path):
    """docker compose shares one metrics volume between the web and worker containers (or
    several web replicas). Each numbers its processes from 1: files named by pid alone put
    two live processes on one file, each writing its own count over the other's."""
    folder = tmp_path / "prometheus"
    folder.mkdir()
    increments = 2000
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    boxes = [subprocess.Popen(
        ["unshare", "--pid", "--fork", "--uts", "sh", "-c",
         f'hostname {box} && exec "$0" -c "$1" "{folder}" {box} {increments}',
         sys.executable, IN_A_CONTAINER], cwd=ROOT, env=env) for box in ("box-a", "box-b")]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{box}").exists() for box in ("box-a", "box-b")):
            assert time.monotonic() < deadline and all(box.poll() is None for box in boxes)
            time.sleep(0.05)
        (tmp_path / "go").touch()
        assert [box.wait(timeout=60) for box in boxes] == [0, 0]
    finally:
        for box in boxes:
            if box.poll() is None:
                box.kill()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(folder))
    assert registry.get_sample_value("synapse_embedding_memories_total") == 2 * increments
    assert sorted(path.name for path in folder.glob("counter_*.db")) == [
        "counter_box-a-1.db", "counter_box-b-1.db"]
