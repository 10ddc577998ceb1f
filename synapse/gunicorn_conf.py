"""gunicorn settings for Synapse (``gunicorn -c synapse/gunicorn_conf.py``)."""

import gc
import multiprocessing
import os

from uvicorn_worker import UvicornWorker


def _num_proxies() -> int:
    """``SYNAPSE_NUM_PROXIES``, read as synapse.settings reads it (REST_FRAMEWORK's
    ``NUM_PROXIES``, which the rate limits' client address follows)."""
    raw = os.environ.get("SYNAPSE_NUM_PROXIES") or "0"
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"SYNAPSE_NUM_PROXIES must be a whole number, not {raw!r}.") from None
    if value < 0:
        raise SystemExit(f"SYNAPSE_NUM_PROXIES must be 0 or more, not {value}.")
    return value


# The client address (security finding 9; docs/security.md, "The client address"). One
# setting decides who may tell us a client's address: SYNAPSE_NUM_PROXIES. The rate limits
# read it through DRF (the N-th X-Forwarded-For entry from the right, REMOTE_ADDR with 0).
# With 0 nothing in front of Synapse may rewrite the address either: uvicorn's proxy-headers
# middleware (on by default, trusting FORWARDED_ALLOW_IPS, 127.0.0.1 when unset) would set
# REMOTE_ADDR from a loopback client's own X-Forwarded-For, a new budget per request. So
# with 0, gunicorn trusts no forwarder (whatever FORWARDED_ALLOW_IPS says; uvicorn_worker
# passes gunicorn's list to uvicorn) and the uvicorn worker runs without proxy headers.
# With N > 0, FORWARDED_ALLOW_IPS names the proxies (gunicorn's setting, from the
# environment or --forwarded-allow-ips), and uvicorn sets REMOTE_ADDR to the first entry
# from the right that is not one of them: with every proxy named, the address DRF picks.
# Nothing is counted twice: uvicorn rewrites REMOTE_ADDR only from an X-Forwarded-For it
# leaves in place, and DRF, given one, reads the header and not REMOTE_ADDR.
NUM_PROXIES = _num_proxies()
if NUM_PROXIES == 0:
    forwarded_allow_ips = ""


class SynapseWorker(UvicornWorker):
    """uvicorn's (ASGI) worker: ``synapse.asgi`` serves ``/mcp`` beside Django, which runs on
    a pool of ``SYNAPSE_THREADS`` threads per worker (see synapse/asgi.py)."""

    # uvicorn's own access log is off because its lines carry the query string (where a
    # ``?key=mk_…`` or private search text may be); synapse.asgi logs one line per request
    # with the path only, and Django's LOGGING (with the redaction filter) handles every
    # logger. CONFIG_KWARGS are applied last, over what uvicorn_worker takes from gunicorn's
    # settings: with no proxy, no forwarded header is believed, a command line's
    # --forwarded-allow-ips notwithstanding (see NUM_PROXIES above).
    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "access_log": False, "lifespan": "on",
                     **({"proxy_headers": False, "forwarded_allow_ips": []}
                        if NUM_PROXIES == 0 else {})}


WORKER_CLASSES = ("uvicorn", "gthread")

bind = os.environ.get("SYNAPSE_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", max(2, multiprocessing.cpu_count())))
timeout = 60
graceful_timeout = 20
# ``SYNAPSE_WORKER_CLASS``: ``uvicorn`` (the default) serves everything, ``/mcp`` included,
# through synapse.asgi; ``gthread`` serves Django alone over WSGI, on SYNAPSE_THREADS threads
# per worker — the REST API, the web UI and the admin, about 0.3 ms less per request
# (bench/results/floor.md) — and answers ``/mcp`` with a 404 that says where it is served
# (docs/scaling.md, "REST-only nodes").
_worker_class = os.environ.get("SYNAPSE_WORKER_CLASS", "uvicorn")
if _worker_class not in WORKER_CLASSES:
    raise SystemExit(f"SYNAPSE_WORKER_CLASS={_worker_class!r} is none of {WORKER_CLASSES}.")
if _worker_class == "gthread":
    worker_class = "gthread"
    threads = int(os.environ.get("SYNAPSE_THREADS", "4"))
    wsgi_app = "synapse.wsgi:application"
else:
    worker_class = "synapse.gunicorn_conf.SynapseWorker"
    wsgi_app = "synapse.asgi:application"


def when_ready(server):
    """Load what searches need once, in the master, before any worker starts: the query
    encoder (memories.embeddings.preload: the int8 ONNX copy of the model, or the model
    itself when it encodes the questions). Every worker is forked with it (its weights
    shared copy-on-write, not one copy per worker), and no request waits for it
    (``SYNAPSE_PRELOAD_MODEL=false`` loads it in each worker on the first query instead).
    Nothing has run it yet, and it runs on the calling thread, so no thread pool crosses
    the fork. An encoder that cannot load is logged here and raises again where a query
    needs it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapse.settings")
    import django

    django.setup()
    from django.apps import apps

    try:
        apps.get_app_config("memories").preload_model()
    except Exception as error:  # the web workers still serve everything but the model
        server.log.warning("embedding model not preloaded: %s", error)
    from django.db import connections

    connections.close_all()  # no connection of the master's crosses the fork
    # What the master loaded (Django and the encoder; about 550,000 objects when that is
    # the model, with torch) is never garbage: frozen, the workers' collections do not walk
    # it on every pass (recall allocates enough to start many) and do not touch its pages
    # (kept shared).
    gc.freeze()


def post_worker_init(worker):
    """The worker's own load frozen too, before its first request: the application it
    imported after the fork (synapse.asgi with the MCP server, or synapse.wsgi) and the
    URLconf with every view it imports, which Django would otherwise load on the first
    request. Unfrozen, each full collection in a worker walks them all (about 80,000
    objects): a pause of about 40 ms that a 1,000-memory recall now and then waited on
    (its p99: bench/results/core.md, "Ninth run"). Garbage is collected first, so none is
    kept for good."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (imports the URLconf and every view)
    gc.collect()
    gc.freeze()


def child_exit(server, worker):
    """A worker that exited stops counting in prometheus-client's multiprocess live gauges
    (docs/scaling.md, "Metrics"); its counters stay in the sums."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        from synapse.metrics import process_name

        multiprocess.mark_process_dead(process_name(worker.pid))
