"""The request floor: where ``GET /memory/{id}`` spends its time beyond its SQL, in one run.

    .venv/bin/python bench/floor.py [--requests 2000] [--profile 2000]

One mind of 1,000 memories (the floor does not depend on the size: the two queries are
index lookups). Measured sequentially over keep-alive HTTP, one gunicorn worker each:

1. ``GET /memory/{id}`` on the production server (synapse/gunicorn_conf.py: uvicorn's
   worker, Django on a2wsgi's thread pool, ``/mcp`` beside it);
2. the same on gunicorn's ``gthread`` worker serving Django's WSGI application directly
   (no ASGI hop, no ``/mcp``);
3. on both, ``GET /.well-known/oauth-protected-resource``: Django's whole middleware chain
   and URL resolution, a view that reads no row and no credential — the framework's floor;
4. the SQL ``GET /memory/{id}`` issues (the key lookup and the memory row, captured in
   process), replayed with psycopg on one connection;
5. the production server's two routes again, timed with the benches' client
   (bench.common.HttpClient, on the standard library) and with httpx in turn: what a
   client's own Python adds to every timing.

Then a profile (cProfile) of ``GET /memory/{id}`` in process (Django's test client, the
whole handler) splits its Python time into layers, and so does one of each other hot route
(list, store, upsert, recall whole and under a budget, semantic search of distinct
questions over the mind's memories, given random vectors; ``--route-profile`` requests
each), to show where each spends what its SQL does not; and each route's time outside its
SQL, unprofiled, split by who spends it (Django's database layer, its handler, DRF,
psycopg, the model, Synapse's own code: "Whose time"). Writes bench/results/floor.md.
"""

import argparse
import cProfile
import pstats
import random
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    ROOT,
    DatabaseClock,
    HttpClient,
    Server,
    Stats,
    capture_sql,
    check,
    database_time,
    machine_line,
    raw_connection,
    replay,
    setup_django,
    table,
    teardown,
    timed,
)
from bench.core import fill  # noqa: E402

FLOOR_PATH = "/.well-known/oauth-protected-resource"
# Layers of a request, by the function whose cumulative time is the layer's (cProfile
# keys: file suffix, function name). Nested layers are listed after the layer holding them.
LAYERS = [
    ("the whole handler (Django's get_response)", "django/core/handlers/base.py",
     "get_response"),
    ("middleware before and after the view", None, None),
    ("DRF's dispatch (the view with authentication, permission, rendering)",
     "rest_framework/views.py", "dispatch"),
    ("authentication: the Mind Key (lookup query, hash check, last use)",
     "minds/authentication.py", "authenticate"),
    ("all SQL, from Django's cursor (both queries, waiting included)",
     "django/db/backends/utils.py", "_execute"),
    ("the serializer (MemorySerializer.data)", "rest_framework/serializers.py", "data"),
    ("rendering JSON (JSONRenderer.render)", "rest_framework/renderers.py", "render"),
]


# The other hot routes' layers: (label, file suffix, function, how entries of that name
# combine: "max" the outermost, "sum" distinct functions of one name, e.g. each compiler's
# as_sql). The handler, middleware and dispatch rows come first, as above.
ROUTE_LAYERS = [
    ("authentication: the Mind Key (its query included)", "minds/authentication.py",
     "authenticate", "max"),
    ("all SQL, from Django's cursor (waiting included)", "django/db/backends/utils.py",
     "_execute", "max"),
    ("the ORM building statements (the compilers' as_sql)", "django/db/models/sql/compiler.py",
     "as_sql", "sum"),
    ("validation (query parameters, body: Serializer.is_valid)",
     "rest_framework/serializers.py", "is_valid", "max"),
    ("the write service (memory_store, its SQL included)", "memories/services/memory.py",
     "memory_store", "max"),
    ("the serializer (.data)", "rest_framework/serializers.py", "data", "max"),
    ("the recall text (format_block, each memory's block)", "memories/recall.py",
     "format_block", "max"),
    ("the question's embedding (query_vector)", "memories/search.py", "query_vector", "max"),
    ("the search (semantic_search, its SQL included)", "memories/search.py",
     "semantic_search", "max"),
    ("the hits' rows and snippets (load_hits, its SQL included)", "memories/search.py",
     "load_hits", "max"),
    ("rendering JSON (JSONRenderer.render)", "rest_framework/renderers.py", "render", "max"),
]


# Who spends a route's time, by the file of the function whose own time (cProfile's tottime)
# it is. The standard library and built-ins are charged to the functions that called them,
# in proportion to each caller's share of their time, up the call graph; so a str.join in
# the recall text is Synapse's, and psycopg's C wait, under psycopg's Connection.wait, is
# PostgreSQL's.
WAITING = "waiting on PostgreSQL"
TEST_CLIENT = "the test client and the bench's loop (in process only)"
DATABASE_LAYER = "Django's database layer (django/db: ORM, cursors, transactions)"
OWNERS = [
    # (owner, the site-packages folders it holds)
    (WAITING, ()),
    ("the model (onnxruntime, torch, tokenizers, numpy)",
     ("onnxruntime", "torch", "transformers", "sentence_transformers", "tokenizers", "numpy",
      "safetensors")),
    ("psycopg, outside waiting", ("psycopg", "psycopg_binary", "pgvector")),
    (DATABASE_LAYER, ()),
    ("Django: handler, middleware, URLs, HTTP objects", ("django", "asgiref", "whitenoise")),
    ("DRF (django-filter included)", ("rest_framework", "django_filters",
                                      "rest_framework_simplejwt")),
    ("Synapse's own code", ()),
    (TEST_CLIENT, ()),
    ("other libraries", ()),
]
_OWNER_OF_FOLDER = {folder: owner for owner, folders in OWNERS for folder in folders}


def owner_of(file: str, function: str) -> str | None:
    """OWNERS' label for a function's own time, or None for the standard library and
    built-ins (charged to their callers)."""
    if "site-packages/" in file:
        parts = file.split("site-packages/", 1)[1].split("/")
        if parts[0] == "psycopg" and parts[-1] == "connection.py" and function == "wait":
            return WAITING
        if parts[0] == "django" and parts[1] == "db":
            return DATABASE_LAYER
        if parts[:2] in (["django", "test"], ["rest_framework", "test.py"]):
            return TEST_CLIENT
        return _OWNER_OF_FOLDER.get(parts[0], "other libraries")
    if file.startswith(str(ROOT)) and file[len(str(ROOT)):].lstrip("/").split("/")[0] in (
            "memories", "minds", "synapse"):
        return "Synapse's own code"
    return None


def whose_time(stats: dict) -> dict[str, float]:
    """Seconds of ``stats`` (profiled) by OWNERS' label: every function's own time, the
    standard library's and built-ins' charged to their callers."""
    shares: dict = {}

    def owners(function_key, seen=frozenset()) -> dict[str, float]:
        if function_key in shares:
            return shares[function_key]
        owner = owner_of(function_key[0], function_key[2])
        if owner is not None:
            shares[function_key] = {owner: 1.0}
            return shares[function_key]
        callers = stats[function_key][4] if function_key in stats else {}
        open_callers = {caller: entry for caller, entry in callers.items()
                        if caller not in seen and caller != function_key}
        total = sum(entry[2] for entry in open_callers.values())
        result: dict[str, float] = {}
        for caller, entry in open_callers.items():
            weight = entry[2] / total if total else 1 / len(open_callers)
            for name, share in owners(caller, seen | {function_key}).items():
                result[name] = result.get(name, 0.0) + share * weight
        if not result:  # the bench's own loop: nothing called it
            result = {TEST_CLIENT: 1.0}
        if len(open_callers) == len(callers):  # not cut short by a cycle: keep it
            shares[function_key] = result
        return result

    seconds: dict[str, float] = {}
    for function_key, entry in stats.items():
        for name, share in owners(function_key).items():
            seconds[name] = seconds.get(name, 0.0) + entry[2] * share
    return seconds


def profiled(call, requests: int) -> dict:
    """A cProfile run of ``call``: {(file, line, name): (cc, nc, tt, ct, callers)}."""
    profiler = cProfile.Profile()
    profiler.enable()
    for index in range(requests):
        call(index)
    profiler.disable()
    return pstats.Stats(profiler).stats


def cumulative(stats: dict, suffix: str, name: str, combine: str = "max") -> float | None:
    """Seconds in the functions so named (cumulative), or None when none ran: the
    outermost of them (``Serializer.data`` calls ``BaseSerializer.data``: the largest), or
    their sum."""
    times = [entry[3] for (file, _line, function), entry in stats.items()
             if file.endswith(suffix) and function == name]
    if not times:
        return None
    return sum(times) if combine == "sum" else max(times)


def profile_layers(call, requests: int) -> list[tuple[str, float]]:
    """Milliseconds per request spent in each layer, from a cProfile run of ``call``."""
    stats = profiled(call, requests)
    measured = {label: cumulative(stats, suffix, name) * 1000 / requests
                for label, suffix, name in LAYERS if suffix}
    handler = measured[LAYERS[0][0]]
    dispatch = measured[LAYERS[2][0]]
    result = []
    for label, suffix, _name in LAYERS:
        result.append((label, measured[label] if suffix else handler - dispatch))
    return result


def route_layers(stats: dict, requests: int) -> dict[str, float | None]:
    """Milliseconds per request in the handler, the middleware, DRF's dispatch and each of
    ROUTE_LAYERS (None: the route never ran it), from ``requests`` profiled requests."""

    def ms(suffix, name, combine="max"):
        seconds = cumulative(stats, suffix, name, combine)
        return None if seconds is None else seconds * 1000 / requests

    handler = ms("django/core/handlers/base.py", "get_response")
    dispatch = ms("rest_framework/views.py", "dispatch")
    result = {"the whole handler": handler, "middleware before and after the view":
              handler - dispatch, "DRF's dispatch (everything in the view)": dispatch}
    for label, suffix, name, combine in ROUTE_LAYERS:
        result[label] = ms(suffix, name, combine)
    return result


@dataclass
class Route:
    """One hot route in process: unprofiled p50s (the request, what it waited on
    PostgreSQL, the rest), its layers and its owners' milliseconds under cProfile."""
    p50: float
    sql_p50: float
    outside_p50: float
    layers: dict[str, float | None]
    owners: dict[str, float]

    def outside_shares(self) -> dict[str, float]:
        """Each owner's share of the profiled time outside waiting on PostgreSQL."""
        rest = {owner: ms for owner, ms in self.owners.items() if owner != WAITING}
        total = sum(rest.values())
        return {owner: ms / total for owner, ms in rest.items()}


def timed_in_process(call, requests: int) -> tuple[list[float], list[float]]:
    """Milliseconds of each of ``requests`` calls of ``call(i)``, and of each what it
    waited on PostgreSQL (bench.common.DatabaseClock)."""
    total, sql = [], []
    for index in range(requests):
        with DatabaseClock() as clock:
            started = time.perf_counter()
            call(index)
            total.append((time.perf_counter() - started) * 1000)
        sql.append(clock.seconds * 1000)
    return total, sql


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profile", type=int, default=2000, help="requests profiled")
    parser.add_argument("--route-profile", type=int, default=300,
                        help="requests profiled for each other route")
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench/results/floor.md"))
    args = parser.parse_args()

    data_dir = setup_django()
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from minds.services import key_issue, mind_create

    owner = get_user_model().objects.create_user("floor", password=uuid.uuid4().hex)
    mind = mind_create(owner=owner, name="Floor")
    fill(mind, 1_000, random.Random(7))
    embed_at_random(mind)
    _key, plain = key_issue(mind=mind, name="floor")
    headers = {"Authorization": f"Bearer {plain}"}
    ids = [str(memory_id) for memory_id in mind.memories.values_list("id", flat=True)]

    inproc = APIClient()
    inproc.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")

    def get_inproc(i):
        assert inproc.get(f"/memory/{ids[i % len(ids)]}").status_code == 200

    sql = [capture_sql(lambda i=i: get_inproc(i)) for i in range(len(ids))]
    raw = raw_connection()
    n = args.requests
    rows = []
    servers = {
        "uvicorn + a2wsgi (production)": Server(workers=1),
        "gunicorn gthread, WSGI only": Server(workers=1, extra_env={
            "SYNAPSE_WORKER_CLASS": "gthread", "SYNAPSE_THREADS": "4"}),
    }
    try:
        for server in servers.values():
            server.wait("/memory/health", headers)
        for label, server in servers.items():
            http = HttpClient(server.url)

            def get(i, http=http):
                response = http.get(f"/memory/{ids[i % len(ids)]}", headers=headers)
                assert response.status_code == 200, response.text

            def floor(_i, http=http):
                assert http.get(FLOOR_PATH).status_code == 200

            for call, name in ((get, f"GET /memory/{{id}} — {label}"),
                               (floor, f"GET {FLOOR_PATH} — {label}")):
                for warm in range(50):
                    call(-warm - 1)
                stats = Stats(name, timed(call, n))
                raw_stats = (Stats(name, timed(lambda i: replay(raw, sql[i % len(sql)]), n))
                             if call is get else None)
                inside = Stats(name, database_time(get_inproc, n)) if call is get else None
                rows.append((stats, raw_stats, inside))
                print(f"{name}: p50 {stats.p50:.2f} p95 {stats.pct(95):.2f} ms", flush=True)
            http.close()
        clients = client_cost(next(iter(servers.values())), ids, headers, n)
    finally:
        for server in servers.values():
            server.stop()

    for warm in range(50):
        get_inproc(warm)
    in_process = Stats("GET /memory/{id} in process (test client)", timed(get_inproc, n))
    layers = profile_layers(get_inproc, args.profile)
    routes = other_routes(inproc, args.route_profile)

    lines = [
        "# The request floor (bench/floor.py)", "",
        f"{machine_line()} · one gunicorn worker per server · a mind of 1,000 memories · "
        f"{n} sequential keep-alive requests per row after 50 warm-up requests.", "",
        "Raw SQL: the statements `GET /memory/{id}` issued in process (the key lookup and the "
        "memory row), replayed with psycopg on one connection in the same run; SQL in the "
        "request: what the same request, made in process, waited on PostgreSQL "
        "(bench.common.DatabaseClock). The "
        f"`{FLOOR_PATH}` rows are Django's whole stack with a view that reads no row: the "
        "framework's floor on that server. Timed with bench.common.HttpClient (the "
        "standard library's http.client; \"The client\", below: what httpx would add).", "",
        table(rows), "",
        f"In process (Django's test client, no HTTP): p50 {in_process.p50:.2f} ms, p95 "
        f"{in_process.pct(95):.2f} ms.", "",
        "## The client", "",
        "The production server's two routes timed with each client, one request with each "
        "in turn: what the client's own Python adds to every timing (httpx's request and "
        "response models and h11; the benches time with bench.common.HttpClient).", "",
        "| route | HttpClient p50 | p95 | httpx p50 | p95 | httpx − HttpClient, p50 | p95 |",
        "|---|---|---|---|---|---|---|",
        *[f"| {route} | {lean.p50:.2f} | {lean.pct(95):.2f} | {other.p50:.2f} | "
          f"{other.pct(95):.2f} | {other.p50 - lean.p50:+.2f} | "
          f"{other.pct(95) - lean.pct(95):+.2f} |" for route, (lean, other) in clients.items()],
        "",
        f"## Profile: {args.profile} requests in process under cProfile", "",
        "Milliseconds per request in each layer (cumulative: a layer includes the ones "
        "nested in it; cProfile slows Python code more than waiting, so read shares, not "
        "absolute times).", "",
        "| layer | ms per request | share of the handler |", "|---|---|---|",
    ]
    handler = layers[0][1]
    for label, value in layers:
        lines.append(f"| {label} | {value:.3f} | {100 * value / handler:.0f} % |")
    names = list(routes)
    lines += [
        "", f"## The other hot routes: {args.route_profile} requests each in process under "
        "cProfile", "",
        "The same mind; each column one route, in process (the test client). First row: the "
        "route's p50 unprofiled; then milliseconds per request in each layer under cProfile "
        "(cumulative: a layer includes what it calls, SQL included where it says so) and its "
        "share of the handler. `–`: the route does not run it.", "",
        *routes_header("layer", names),
        table_row("p50 unprofiled (ms)", [f"{routes[name].p50:.2f}" for name in names]),
    ]
    for label in routes[names[0]].layers:
        cells = []
        for name in names:
            value, whole = routes[name].layers[label], routes[name].layers["the whole handler"]
            cells.append("–" if value is None else f"{value:.2f} ({100 * value / whole:.0f} %)")
        lines.append(table_row(label, cells))
    lines += whose_table(routes, args.route_profile)
    output = Path(args.output)
    output.write_text("\n".join(lines) + "\n")
    print(output.read_text())
    raw.close()
    teardown(data_dir, args.keep_data)


def whose_table(routes: dict[str, Route], requests: int) -> list[str]:
    """The section "Whose time": each route's time outside its SQL, split by who spends it."""
    names = list(routes)
    owners = [owner for owner, _folders in OWNERS if owner != WAITING
              and any(routes[name].owners.get(owner, 0) >= 0.005 for name in names)]
    lines = [
        "", "## Whose time: each route's time outside its SQL, by owner", "",
        "The same requests, unprofiled: p50 of the request, of what it waited on PostgreSQL "
        "(bench.common.DatabaseClock) and of the rest, per request. Then the rest split by "
        f"who spends it, from {requests} more requests of each route, profiled (the table "
        "above): each function's own "
        "time (cProfile's tottime) goes to the package its file belongs to, the standard "
        "library's and built-ins' to their callers; each owner's share of the profiled time "
        "outside waiting, applied to the unprofiled p50 outside SQL (ms, then the share). "
        "cProfile slows Python calls more than C, so the model's share (C) reads low and "
        "the Python owners' shares compare with each other best. The test client's share "
        "is this bench's in-process client: over HTTP a server does that work instead "
        "(floor.md's first table: Django's empty view).", "",
        *routes_header("", names),
        table_row("p50 in process (ms)", [f"{routes[name].p50:.2f}" for name in names]),
        table_row("p50 waiting on PostgreSQL",
                  [f"{routes[name].sql_p50:.2f}" for name in names]),
        table_row("p50 outside SQL", [f"{routes[name].outside_p50:.2f}" for name in names]),
    ]
    for owner in owners:
        cells = []
        for name in names:
            share = routes[name].outside_shares().get(owner, 0.0)
            cells.append(f"{share * routes[name].outside_p50:.2f} ({100 * share:.0f} %)")
        lines.append(table_row(owner, cells))
    return lines


def routes_header(first: str, names: list[str]) -> list[str]:
    """A Markdown table's head: ``first``, then a column per route."""
    return [table_row(first, [f"`{name}`" for name in names]), "|---|" + "---|" * len(names)]


def table_row(label: str, cells: list[str]) -> str:
    return f"| {label} | " + " | ".join(cells) + " |"


def client_cost(server, ids: list[str], headers: dict, n: int) -> dict:
    """``GET /memory/{id}`` and the floor route on ``server`` timed with bench.common's
    HttpClient and with httpx, one request with each in turn: {route: (HttpClient's
    Stats, httpx's Stats)}."""
    import httpx

    lean, other = HttpClient(server.url), httpx.Client(base_url=server.url, timeout=30)
    routes = {"GET /memory/{id}": lambda i: f"/memory/{ids[i % len(ids)]}",
              f"GET {FLOOR_PATH}": lambda _i: FLOOR_PATH}
    result = {}
    try:
        for route, path in routes.items():
            samples = {lean: [], other: []}
            for index in range(-50, n):
                for client in (lean, other):
                    started = time.perf_counter()
                    response = client.get(path(index), headers=headers)
                    elapsed = (time.perf_counter() - started) * 1000
                    assert response.status_code == 200, response.text
                    if index >= 0:  # after 50 rounds of warm-up
                        samples[client].append(elapsed)
            result[route] = (Stats(route, samples[lean]), Stats(route, samples[other]))
            print(f"{route}: HttpClient p50 {result[route][0].p50:.2f}, httpx p50 "
                  f"{result[route][1].p50:.2f} ms", flush=True)
    finally:
        lean.close()
        other.close()
    return result


def embed_at_random(mind) -> None:
    """Give the mind's memories random vectors of the configured model (semantic search
    measures them; what they mean does not matter to its cost), and count the mind's rows
    in its quota counters, which semantic search reads."""
    from django.db import connection

    from memories.embeddings import model_name
    from memories.quotas import recount

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memory m SET embedding = r.vector, embedding_model = %s, "
            "embedding_pending = false FROM (SELECT id, (SELECT array_agg(random() - 0.5) "
            "FROM generate_series(1, 384) WHERE id IS NOT NULL)::vector AS vector "
            "FROM memories_memory WHERE mind_id = %s) r WHERE m.id = r.id",
            [model_name(), mind.id])
        cursor.execute("ANALYZE memories_memory")
    recount()


def other_routes(client, requests: int) -> dict[str, Route]:
    """Each hot route in process: its unprofiled p50s, its layers (route_layers) and who
    spends its time (whose_time), from ``requests`` requests timed and as many profiled."""
    keys = iter(range(10**9))
    calls = {
        "GET /memory?limit=50": lambda i: check(client.get("/memory?limit=50")),
        "POST /memory (store)": lambda i: check(client.post("/memory", {
            "category": "note", "key": f"floor_new_{next(keys)}",
            "content": f"A new note about the floor, number {i}"}, format="json"), 201),
        "POST /memory (upsert)": lambda i: check(client.post("/memory", {
            "category": "note", "key": f"floor_upsert_{i % 20}",
            "content": f"The note changed again, number {next(keys)}"}, format="json"),
            200 if i >= 20 else 201),
        "GET /memory/recall": lambda i: check(client.get("/memory/recall")),
        "GET /memory/recall?budget=2000": lambda i: check(
            client.get("/memory/recall?budget=2000")),
        # A new question each time: the process's cache of query embeddings never answers.
        "GET /memory/semantic-search": lambda i: check(client.get(
            "/memory/semantic-search", {"q": f"what happened at the floor, time {next(keys)}"})),
    }
    result = {}
    for name, call in calls.items():
        for warm in range(20):
            call(warm)
        total, sql = timed_in_process(lambda i, call=call: call(20 + i), requests)
        stats = profiled(lambda i, call=call: call(20 + requests + i), requests)
        result[name] = Route(
            p50=Stats(name, total).p50, sql_p50=Stats(name, sql).p50,
            outside_p50=Stats(name, [a - b for a, b in zip(total, sql, strict=True)]).p50,
            layers=route_layers(stats, requests),
            owners={owner: seconds * 1000 / requests
                    for owner, seconds in whose_time(stats).items()})
        print(f"{name}: p50 {result[name].p50:.2f} ms in process", flush=True)
    return result


if __name__ == "__main__":
    main()
