"""Limits: rate limits by scope (429 + Retry-After), size caps (clear 4xx), statement timeout."""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django.urls import Resolver404, resolve
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory

from synapse.api import SynapseAPIView
from synapse.throttling import request_scope
from tests.conftest import PASSWORD, key_client

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LOW_RATES = {"write": "2/min", "search": "2/min", "semantic": "2/min", "export": "2/hour",
             "recall": "2/min", "sync": "2/min", "import": "2/hour", "login": "2/min"}


@pytest.fixture
def low_rates(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": LOW_RATES}


def require_route(path: str) -> None:
    try:
        resolve(path)
    except Resolver404:
        pytest.skip(f"{path} is not routed yet")


def assert_throttled(response) -> None:
    assert response.status_code == 429, response.content[:300]
    assert 1 <= int(response["Retry-After"]) <= 3600
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (429, "throttled")


def test_third_write_in_a_minute_is_429_with_retry_after(low_rates, agent):
    for index in range(2):
        response = agent.post("/memory", {"category": "note", "content": f"note {index}"},
                              format="json")
        assert response.status_code == 201
    assert_throttled(agent.post("/memory", {"category": "note", "content": "one too many"},
                                format="json"))


def test_write_limit_counts_per_mind_key_not_per_mind(low_rates, agent, alice_mind, alice):
    from minds.services import key_issue

    for index in range(2):
        agent.post("/memory", {"category": "note", "content": f"note {index}"}, format="json")
    assert agent.post("/memory", {"category": "note", "content": "x"},
                      format="json").status_code == 429
    other_key = key_client(key_issue(mind=alice_mind, name="second", created_by=alice)[1])
    assert other_key.post("/memory", {"category": "note", "content": "x"},
                          format="json").status_code == 201


def test_write_limit_counts_per_user_apart_from_keys(low_rates, agent, human, alice_mind):
    for index in range(2):
        agent.post("/memory", {"category": "note", "content": f"agent {index}"}, format="json")
    url = f"/memory?mind={alice_mind.id}"
    for index in range(2):
        assert human.post(url, {"category": "note", "content": f"human {index}"},
                          format="json").status_code == 201
    assert_throttled(human.post(url, {"category": "note", "content": "again"}, format="json"))


def test_reads_are_not_write_limited(low_rates, agent):
    for _ in range(5):
        assert agent.get("/memory").status_code == 200


def test_login_attempts_are_limited_per_client_address(low_rates, alice):
    client = APIClient()
    for _ in range(2):
        response = client.post("/auth/login", {"username": "alice", "password": "wrong"},
                                format="json")
        assert response.status_code == 401
    # Even the right password waits: guessing must not be able to go on at full speed.
    assert_throttled(client.post("/auth/login", {"username": "alice", "password": PASSWORD},
                                 format="json"))


@pytest.mark.parametrize("path, params", [
    ("/memory/search", {"q": "docker"}),
    ("/memory/search", {"q": "docker", "mode": "semantic"}),
    ("/memory/semantic-search", {"q": "docker"}),
    ("/memory/mind-export", {}),
    ("/memory/recall", {"q": "docker"}),
    ("/memory/recall", {"q": "docker", "budget": 500}),
    ("/memory/contradictions", {}),
    ("/memory/recall", {}),
    ("/memory/recall", {"format": "json"}),
])
def test_search_semantic_and_export_scopes_are_limited(low_rates, agent, path, params):
    require_route(path)
    for _ in range(2):
        assert agent.get(path, params).status_code == 200
    assert_throttled(agent.get(path, params))


@pytest.mark.parametrize("path, body", [
    ("/memory/sync", {"memories": []}),
    ("/memory/mind-import", {"format": "synapse.mind-export", "format_version": 1,
                             "memories": []}),
])
def test_sync_and_import_have_their_own_scope(low_rates, settings, agent, path, body):
    # Writes stay open: only the sync (or import) budget runs out.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **LOW_RATES, "write": "100/min"}}
    for _ in range(2):
        assert agent.post(path, body, format="json").status_code == 200
    assert_throttled(agent.post(path, body, format="json"))
    assert agent.post("/memory", {"category": "note", "content": "still open"},
                      format="json").status_code == 201


def test_recall_with_a_budget_is_not_limited(low_rates, agent):
    for _ in range(5):
        assert agent.get("/memory/recall", {"budget": 500}).status_code == 200


def test_recall_with_a_query_spends_the_semantic_budget(low_rates, agent):
    for _ in range(2):
        assert agent.get("/memory/search", {"q": "docker", "mode": "hybrid"}).status_code == 200
    assert_throttled(agent.get("/memory/recall", {"q": "docker"}))
    assert_throttled(agent.get("/memory/contradictions"))


def test_rate_limit_counters_live_in_the_shared_database_table(low_rates, agent, alice_key):
    agent.post("/memory", {"category": "note", "content": "counted"}, format="json")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM synapse_ratelimit WHERE key = %s",
                       [f"write:key:{alice_key[0].id}"])
        assert cursor.fetchone()[0] == 1
        cursor.execute("SELECT relpersistence FROM pg_class WHERE relname = 'synapse_ratelimit'")
        assert cursor.fetchone()[0] == "u"  # UNLOGGED: no WAL flush per limited request


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_concurrent_writes_never_slips_past_the_limit(live_server, settings,
                                                                 alice_key):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "write": "5/min"}}
    headers = {"Authorization": f"Bearer {alice_key[1]}"}

    def post(number: int) -> int:
        return httpx.post(f"{live_server.url}/memory", headers=headers, timeout=60, json={
            "category": "note", "key": f"burst_{number}", "content": "burst"}).status_code

    with ThreadPoolExecutor(max_workers=20) as pool:
        codes = list(pool.map(post, range(20)))
    assert (codes.count(201), codes.count(429)) == (5, 15), codes


def test_the_budget_refills_one_request_per_interval(settings, agent):
    from synapse.throttling import spend

    assert [spend("probe", "3/s") for _ in range(3)] == [None, None, None]
    wait = spend("probe", "3/s")
    assert wait is not None and 0 < wait <= 1 / 3
    time.sleep(wait + 0.05)
    assert spend("probe", "3/s") is None
    assert spend("probe", "3/s") is not None
    assert spend("closed", "0/min") == 60.0


class _Probe(SynapseAPIView):
    throttle_scope = {"GET": "search", "POST": "export"}


@pytest.mark.parametrize("method, query, scope", [
    ("get", "", "search"), ("get", "?mode=semantic", "semantic"),
    ("get", "?mode=hybrid", "semantic"), ("post", "", "export")])
def test_views_choose_their_scope_by_method(method, query, scope):
    from rest_framework.request import Request

    request = Request(getattr(APIRequestFactory(), method)("/probe" + query))
    assert request_scope(request, _Probe()) == scope


def test_plain_views_limit_writes_only():
    from rest_framework.request import Request

    view = SynapseAPIView()
    factory = APIRequestFactory()
    assert request_scope(Request(factory.get("/memory")), view) is None
    for method in ("post", "put", "patch", "delete"):
        assert request_scope(Request(getattr(factory, method)("/memory")), view) == "write"


# -- Size caps -----------------------------------------------------------------------------

def test_oversized_body_is_413_in_the_error_shape(agent, settings):
    settings.MAX_BODY_BYTES = 2000
    response = agent.post("/memory", {"category": "note", "content": "x" * 5000}, format="json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_content_over_50000_characters_is_400_naming_content(agent):
    response = agent.post("/memory", {"category": "note", "content": "x" * 50_001},
                          format="json")
    assert response.status_code == 400
    assert "content" in response.json()["error"]["fields"]


def test_page_size_over_500_is_400_naming_limit(agent):
    response = agent.get("/memory", {"limit": 501})
    assert response.status_code == 400
    assert "limit" in response.json()["error"]["fields"]


@pytest.mark.parametrize("path", ["/memory/recall", "/memory/search",
                                  "/memory/semantic-search"])
def test_overlong_query_is_400_naming_q(agent, path):
    require_route(path)
    response = agent.get(path, {"q": "word " * 2000})
    assert response.status_code == 400
    assert "q" in response.json()["error"]["fields"]


def test_bulk_delete_over_1000_ids_is_400(agent):
    require_route("/memory/bulk-delete")
    ids = [f"mem_{index:020d}" for index in range(1001)]
    response = agent.post("/memory/bulk-delete", {"ids": ids}, format="json")
    assert response.status_code == 400
    assert "ids" in response.json()["error"]["fields"]


def test_oversized_sync_is_refused_with_a_4xx(agent):
    require_route("/memory/sync")
    memories = [{"category": "note", "key": f"k{index}", "content": "x"}
                for index in range(20_001)]
    response = agent.post("/memory/sync", {"memories": memories}, format="json")
    assert 400 <= response.status_code < 500
    assert "error" in response.json()


# -- Statement timeout ---------------------------------------------------------------------

def test_every_connection_carries_the_configured_statement_timeout():
    configured = int(os.environ.get("DATABASE_STATEMENT_TIMEOUT_MS", 30000))
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting::int FROM pg_settings WHERE name = 'statement_timeout'")
        assert cursor.fetchone()[0] == configured


def test_a_runaway_statement_is_cancelled_by_the_configured_timeout():
    script = ("import django; django.setup()\n"
              "from django.db import connection, OperationalError\n"
              "try:\n"
              "    connection.cursor().execute('SELECT pg_sleep(20)')\n"
              "    print('finished')\n"
              "except OperationalError as error:\n"
              "    print('cancelled:', error)\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "synapse.settings",
           "DATABASE_STATEMENT_TIMEOUT_MS": "300"}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert "cancelled: canceling statement due to statement timeout" in result.stdout, \
        result.stdout + result.stderr


class _Runaway(SynapseAPIView):
    def get(self, request):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(20)")
        return Response({})


def test_a_cancelled_statement_is_a_clean_error_without_sql(alice_key):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 200")
    request = APIRequestFactory().get("/runaway",
                                      HTTP_AUTHORIZATION=f"Bearer {alice_key[1]}")
    response = _Runaway.as_view()(request)
    response.render()
    body = json.loads(response.content)
    assert response.status_code == 503
    assert body["error"]["code"] == "timeout"
    assert "pg_sleep" not in response.content.decode()
    assert "SELECT" not in response.content.decode()
