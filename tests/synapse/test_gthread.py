"""A REST-only node: gunicorn's gthread worker serving Django over WSGI
(``SYNAPSE_WORKER_CLASS=gthread``, synapse/gunicorn_conf.py; docs/scaling.md)."""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.security.live import ROOT, Server

pytestmark = [pytest.mark.slow]


def test_a_gthread_node_serves_the_rest_api_and_says_where_mcp_is(scale_cluster):
    server = Server(scale_cluster, workers=1, threads=4,
                    env={"SYNAPSE_WORKER_CLASS": "gthread"})
    try:
        with httpx.Client(base_url=server.url, timeout=60, headers={
                "Authorization": f"Bearer {scale_cluster.key}"}) as client:
            stored = client.post("/memory", json={"category": "fact", "key": "gthread_node",
                                                  "content": "Served over WSGI"})
            assert stored.status_code == 201
            read = client.get(f"/memory/{stored.json()['id']}")
            assert read.status_code == 200 and read.json()["content"] == "Served over WSGI"
            searched = client.get("/memory/search", params={"q": "WSGI", "mode": "hybrid"})
            assert searched.status_code == 200
            for path in ("/mcp", "/mcp/"):
                answer = client.post(path, json={"jsonrpc": "2.0", "id": 1,
                                                 "method": "tools/list"})
                assert answer.status_code == 404
                assert answer.json()["error"]["code"] == "not_found"
                assert "SYNAPSE_WORKER_CLASS=gthread" in answer.json()["error"]["message"]
        assert "gthread" in server.output()
    finally:
        output = server.stop()
    assert "Traceback" not in output, output


def test_an_unknown_worker_class_stops_gunicorn_with_its_name(scale_cluster):
    result = subprocess.run(
        [str(Path(sys.executable).with_name("gunicorn")), "-c", "synapse/gunicorn_conf.py"],
        cwd=ROOT, env={**scale_cluster.env, "SYNAPSE_WORKER_CLASS": "eventlet"},
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "SYNAPSE_WORKER_CLASS='eventlet'" in result.stderr + result.stdout
