"""What the Prometheus metrics cost a request: ``GET /memory/{id}`` with and without
synapse.middleware.MetricsMiddleware, in one run.

    .venv/bin/python bench/metrics.py [--requests 2000] [--keep-data]

Three measures, each in both of prometheus-client's modes (a process's own registry, and
multiprocess mode with PROMETHEUS_MULTIPROC_DIR, where every value lives in a memory-mapped
file):

1. ``synapse.metrics.observe_request`` alone, the work the middleware adds (µs per call);
2. in process: Django's full handler and middleware chain (the test client), two clients
   of one process, one with the middleware in its chain and one without, requests
   alternating;
3. over HTTP: two gunicorn servers (synapse/gunicorn_conf.py, one worker each), one with
   SYNAPSE_METRICS_TOKEN set and one without, requests alternating on keep-alive
   connections.

Writes bench/results/metrics.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, Server, Stats, machine_line, setup_django, teardown  # noqa: E402

TOKEN = "bench-metrics-token-" + "0" * 32
MODES = ("single", "multiprocess")


def interleaved(first, second, requests: int, warmup: int = 50) -> tuple[list, list]:
    """Milliseconds of ``first`` and ``second`` calls, alternating which goes first."""
    for index in range(warmup):
        first(index)
        second(index)
    a, b = [], []
    for index in range(requests):
        pair = ((first, a), (second, b)) if index % 2 == 0 else ((second, b), (first, a))
        for call, samples in pair:
            started = time.perf_counter()
            call(index)
            samples.append((time.perf_counter() - started) * 1000)
    return a, b


def child(memory_id: str, key: str, requests: int) -> dict:
    """Run in a fresh process (the mode is chosen when prometheus-client is imported)."""
    import django

    django.setup()
    from django.test import Client
    from django.test.utils import override_settings

    from synapse import metrics

    calls = 100_000
    started = time.perf_counter()
    for _ in range(calls):
        metrics.observe_request("/memory/<memory_id:memory_id>", "GET", 200, 0.003)
    observe_us = (time.perf_counter() - started) / calls * 1e6
    middleware_us = {status: middleware_alone(memory_id, status, calls) for status in (200, 404)}

    url = f"/memory/{memory_id}"
    plain = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    metered = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    with override_settings(METRICS_TOKEN=TOKEN):
        assert metered.get(url).status_code == 200  # loads the chain with the middleware
    assert plain.get(url).status_code == 200  # …and without it

    def get(client):
        def call(_index):
            assert client.get(url).status_code == 200
        return call

    without, with_metrics = interleaved(get(plain), get(metered), requests)
    return {"observe_us": observe_us, "middleware_us": middleware_us, "without": without,
            "with": with_metrics, "multiprocess": metrics.MULTIPROCESS}


def middleware_alone(memory_id: str, status: int, calls: int) -> float:
    """µs the middleware adds to one request: a routed request through
    ``MetricsMiddleware`` around a view that only returns, less that view alone (best of
    five rounds, so another process's burst does not count)."""
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.test.utils import override_settings
    from django.urls import resolve

    from synapse.middleware import MetricsMiddleware

    request = RequestFactory().get(f"/memory/{memory_id}")
    request.resolver_match = resolve(request.path_info)
    response = HttpResponse(status=status)

    def view(_request):
        return response

    with override_settings(METRICS_TOKEN=TOKEN):
        metered = MetricsMiddleware(view)

    def best(call) -> float:
        rounds = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(calls // 5):
                call(request)
            rounds.append((time.perf_counter() - started) / (calls // 5))
        return min(rounds)

    return (best(metered) - best(view)) * 1e6


def run_child(mode: str, memory_id: str, key: str, requests: int) -> dict:
    env = {**os.environ}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env["SYNAPSE_METRICS_TOKEN"] = ""
    if mode == "multiprocess":
        env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="synapse-bench-prom-")
    result = subprocess.run([sys.executable, __file__, "--child", memory_id, key,
                             str(requests)], cwd=ROOT, env=env, capture_output=True,
                            text=True, check=True)
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["multiprocess"] == (mode == "multiprocess")
    return answer


def over_http(mode: str, memory_id: str, key: str, requests: int) -> tuple[list, list]:
    import httpx

    metered_env = {"SYNAPSE_METRICS_TOKEN": TOKEN}
    if mode == "multiprocess":
        metered_env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="synapse-bench-prom-")
    plain_server = Server(workers=1, extra_env={"SYNAPSE_METRICS_TOKEN": ""})
    metered_server = Server(workers=1, extra_env=metered_env)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        plain_server.wait("/memory/health", headers)
        metered_server.wait("/memory/health", headers)
        with httpx.Client(base_url=plain_server.url, headers=headers) as plain, \
                httpx.Client(base_url=metered_server.url, headers=headers) as metered:
            def get(client):
                def call(_index):
                    assert client.get(f"/memory/{memory_id}").status_code == 200
                return call

            without, with_metrics = interleaved(get(plain), get(metered), requests)
            scrape = metered.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            assert scrape.status_code == 200 and "synapse_http_request" in scrape.text
            assert plain.get("/metrics").status_code == 404
    finally:
        plain_server.stop()
        metered_server.stop()
    return without, with_metrics


def row(name: str, without: list, with_metrics: list) -> str:
    off, on = Stats("off", without), Stats("on", with_metrics)
    return (f"| {name} | {len(without)} | {off.p50:.3f} | {off.pct(95):.3f} | {on.p50:.3f} | "
            f"{on.pct(95):.3f} | {(on.p50 - off.p50) * 1000:+.0f} | "
            f"{(on.pct(95) - off.pct(95)) * 1000:+.0f} |")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench/results/metrics.md"))
    args = parser.parse_args()

    data_dir = setup_django()
    os.environ["SYNAPSE_DATA_DIR"] = data_dir  # the children and servers use this cluster
    from django.contrib.auth import get_user_model

    from memories.services import memory_store
    from minds.authentication import AgentPrincipal
    from minds.services import key_issue, mind_create

    owner = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    mind = mind_create(owner=owner, name="Bench metrics")
    key, plaintext = key_issue(mind=mind, name="bench")
    memory = memory_store(mind=mind, actor=AgentPrincipal(key=key), category="fact",
                          key="metrics", content="A memory read over and over. " * 8,
                          tags=["bench"], expires_given=False).memory
    try:
        lines = []
        observe, alone = {}, {}
        for mode in MODES:
            answer = run_child(mode, memory.id, plaintext, args.requests)
            observe[mode] = answer["observe_us"]
            alone[mode] = answer["middleware_us"]
            lines.append(row(f"in process, {mode}", answer["without"], answer["with"]))
        for mode in MODES:
            without, with_metrics = over_http(mode, memory.id, plaintext, args.requests)
            lines.append(row(f"HTTP (gunicorn, 1 worker), {mode}", without, with_metrics))
    finally:
        teardown(data_dir, args.keep_data)

    report = [
        "# Metrics middleware cost",
        "",
        f"Machine: {machine_line()}. `GET /memory/{{id}}` of a small mind, with and without "
        "`synapse.middleware.MetricsMiddleware` (metrics on: `SYNAPSE_METRICS_TOKEN` set), "
        f"{args.requests} requests each after 50 warm-up pairs, the two alternating. "
        "*single*: each process's own registry; *multiprocess*: `PROMETHEUS_MULTIPROC_DIR` "
        "set (values in memory-mapped files, as under gunicorn with several workers).",
        "",
        "What the middleware adds to one request, measured alone (a routed request "
        "through `MetricsMiddleware` around a view that only returns, less the view alone; "
        "best of five rounds of 20,000), and `observe_request` alone (mean of 100,000 calls):",
        "",
        "| mode | middleware, a 200 (µs) | middleware, a 404 (µs: one more counter) "
        "| `observe_request`, a 200 (µs) |",
        "|---|---|---|---|",
        *(f"| {mode} | {alone[mode]['200']:.1f} | {alone[mode]['404']:.1f} | "
          f"{observe[mode]:.1f} |" for mode in MODES),
        "",
        "The same request end to end, with and without the middleware:",
        "",
        "| run | n | off p50 ms | off p95 ms | on p50 ms | on p95 ms | Δ p50 µs | Δ p95 µs |",
        "|---|---|---|---|---|---|---|---|",
        *lines,
        "",
        "Δ is on − off between two alternating series of the same request; it is within "
        "the noise of the run (its sign changes from row to row), which the isolated "
        f"figures above are not. Load average at the end of the run: {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores.",
        "",
    ]
    Path(args.output).write_text("\n".join(report))
    print("\n".join(report))


if __name__ == "__main__":
    main()
