"""The web workers' query encoder under gunicorn (synapse/gunicorn_conf.py): loaded in the
master before the fork, it answers semantic searches in every worker at once, and no web
process loads torch (docs/scaling.md, "The web workers' model")."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.security.live import Server

pytestmark = [pytest.mark.slow]


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_semantic_searches_in_every_worker_use_the_preloaded_int8_encoder(scale_cluster):
    server = Server(scale_cluster, workers=2, threads=2)
    try:
        with httpx.Client(base_url=server.url, timeout=60, headers={
                "Authorization": f"Bearer {scale_cluster.key}"}) as client:
            for key, content in [("swimming", "Bruno swims in the lake every Sunday"),
                                 ("invoice", "The cloud invoice is due on the fifth")]:
                assert client.post("/memory", json={"category": "fact", "key": key,
                                                    "content": content}).status_code == 201
            scale_cluster.manage("embed_worker", "--once")

            def search(number: int) -> httpx.Response:
                return client.get("/memory/search", params={
                    "q": f"where does Bruno go swimming? ({number})", "mode": "semantic"})

            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(search, range(16)))
        assert [answer.status_code for answer in answers] == [200] * 16
        assert {answer.json()["results"][0]["key"] for answer in answers} == {"swimming"}
        workers = children(server.process.pid)
        assert len(workers) == 2
        for pid in [server.process.pid, *workers]:
            loaded = libraries(pid)
            assert "onnxruntime" in loaded and "libtorch" not in loaded, pid
    finally:
        output = server.stop()
    assert "Traceback" not in output, output
