"""Prometheus metrics (docs/scaling.md, "Metrics"): the metric families, the labels a request
is counted under, and the text exposition ``GET /metrics`` answers with.

Several processes: with ``PROMETHEUS_MULTIPROC_DIR`` set (before prometheus-client is
imported), every process — each gunicorn worker and the embedding worker — writes its
counters to files in that folder and a scrape of any web worker sums them
(prometheus-client's multiprocess mode). Without it each process exports its own. The
embedding queue's depth and lag are never counted by a process: the view reads them from the
database at scrape time (``QueueCollector``), so every node reports the same, true figure.

Labels are bounded: the route is the URL pattern (``/memory/<memory_id:memory_id>``), never
the path, so no memory or mind id and no client-chosen text becomes a label value.
"""

import hashlib
import hmac
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)
from prometheus_client.core import GaugeMetricFamily

# Files in the folder are named after their process: the host's name and the pid. Containers
# sharing one folder (docker compose: the web and worker services on one volume, or several
# web replicas) each number their processes from 1; by pid alone, two live processes would
# write one file, each over the other's counts.
_HOST = socket.gethostname().replace("_", "-")


def process_name(pid: int) -> str:
    """The name of process ``pid`` of this host in PROMETHEUS_MULTIPROC_DIR's file names."""
    return f"{_HOST}-{pid}"


MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
if MULTIPROCESS:
    # The counters below open their files in it as they are created (emptying it is the
    # operator's: docs/scaling.md).
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
    # Read on every increment (a fork changes it), so kept cheap.
    values.ValueClass = values.MultiProcessValue(lambda: process_name(os.getpid()))
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Most API requests take a few milliseconds; search with the model, recall of a large mind
# and exports take longer.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
# Anything else a client sends as its method is counted as "other" (a label value the
# client could choose is an unbounded series).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
STATUS_CLASSES = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}

REQUEST_SECONDS = Histogram(
    "synapse_http_request_duration_seconds",
    "Time from a request's arrival to its response's start (a streamed body not included), "
    "by route (URL pattern), method and status class.",
    ["route", "method", "status_class"], buckets=LATENCY_BUCKETS)
ERRORS = Counter(
    "synapse_http_errors_total",
    "Responses with a 4xx or 5xx status, by route, method and status code.",
    ["route", "method", "status"])
# Counted where a batch runs: the embedding worker, or POST /memory/embed-batch in a web
# worker.
EMBEDDED = Counter("synapse_embedding_memories_total",
                   "Memories embedded (vectors written) by the embedding worker or "
                   "POST /memory/embed-batch.")
BATCHES = Counter("synapse_embedding_batches_total",
                  "Embedding batches that embedded at least one memory.")
BUSY_SECONDS = Counter("synapse_embedding_busy_seconds_total",
                       "Seconds spent on batches that embedded memories (claim, model, write).")


def method_label(method: str | None) -> str:
    return method if method in METHODS else "other"


def observe_request(route: str, method: str | None, status: int, seconds: float) -> None:
    """Count one answered request."""
    method = method_label(method)
    REQUEST_SECONDS.labels(route, method, STATUS_CLASSES.get(status // 100, "other")
                           ).observe(seconds)
    if status >= 400:
        ERRORS.labels(route, method, str(status)).inc()


def observe_batch(embedded: int, seconds: float) -> None:
    """Count one embedding batch that embedded ``embedded`` memories."""
    EMBEDDED.inc(embedded)
    BATCHES.inc()
    BUSY_SECONDS.inc(seconds)


def token_matches(presented: str, expected: str) -> bool:
    """Constant time (the digests are compared, so not even the length leaks)."""
    return hmac.compare_digest(hashlib.sha256(presented.encode("utf-8", "replace")).digest(),
                               hashlib.sha256(expected.encode("utf-8")).digest())


@dataclass(frozen=True)
class QueueState:
    """The embedding queue as the database holds it at scrape time."""

    depth: int
    lag_seconds: float  # age of the oldest memory waiting; 0 when none waits
    worker_running: bool


class QueueCollector:
    """Gauges read at scrape time through ``read`` (one indexed query, memories.embeddings);
    ``synapse_database_up`` is 0 and the queue gauges are left out when ``read`` raises
    one of ``unavailable``."""

    def __init__(self, read: Callable[[], QueueState], unavailable: tuple[type, ...]):
        self.read = read
        self.unavailable = unavailable

    def collect(self):
        try:
            state = self.read()
        except self.unavailable:
            yield GaugeMetricFamily("synapse_database_up",
                                    "Whether the scrape could read the database.", value=0)
            return
        yield GaugeMetricFamily("synapse_database_up",
                                "Whether the scrape could read the database.", value=1)
        yield GaugeMetricFamily("synapse_embedding_queue_depth",
                                "Memories waiting for their embedding (marked by a write).",
                                value=state.depth)
        yield GaugeMetricFamily("synapse_embedding_queue_lag_seconds",
                                "Age of the oldest memory waiting for its embedding "
                                "(0 when none waits).", value=state.lag_seconds)
        yield GaugeMetricFamily("synapse_embedding_worker_running",
                                "1 while an embedding worker has reported in the last 30 "
                                "seconds.", value=int(state.worker_running))


def exposition(*collectors) -> bytes:
    """The text format of every process's metrics (multiprocess mode) or this process's, and
    of ``collectors``."""
    registry = CollectorRegistry(auto_describe=False)
    if MULTIPROCESS:
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(REGISTRY)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry)

