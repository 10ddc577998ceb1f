"""GET /metrics (synapse.metrics, synapse.metrics_view, the middleware) and the embedding lag
of GET /memory/health, in one process; tests/synapse/test_metrics_multiprocess.py runs
gunicorn's workers and the embedding worker on one metrics folder."""

import logging
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from memories.embeddings import embed_batch, get_model, note_worker_alive
from memories.models import Memory
from minds.services import key_issue
from synapse.timestamps import format_timestamp
from tests.conftest import jwt_client, key_client

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "metrics-token-0123456789-abcdefghijklmnop"
DETAIL = "/memory/<memory_id:memory_id>"


@pytest.fixture
def metrics_on(settings):
    """Metrics turned on. Clients made after this load the middleware."""
    settings.METRICS_TOKEN = TOKEN


@pytest.fixture
def scraper(metrics_on) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return client


def scrape(client) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape: (name, labels) → value."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def assert_error_shape(response, status: int, code: str):
    assert response.status_code == status
    assert response.json() == {"error": {"status": status, "code": code,
                                         "message": response.json()["error"]["message"]}}


# -- off, and who may scrape ---------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
def test_metrics_are_off_by_default(client, settings, method):
    assert settings.METRICS_TOKEN == ""
    response = getattr(APIClient(), method)("/metrics",
                                            HTTP_AUTHORIZATION="Bearer anything")
    assert_error_shape(response, 404, "not_found")
    assert response.json() == APIClient().get("/no-such-route").json()


@pytest.mark.django_db
def test_without_the_token_the_scrape_is_refused(metrics_on):
    response = APIClient().get("/metrics")
    assert_error_shape(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="synapse-metrics"'
    assert "synapse_http" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("header", [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer x",
                                    f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN.upper()}",
                                    "Bearer", "Bearer ü"])
def test_a_wrong_token_is_refused(metrics_on, header):
    response = APIClient().get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["error"]["code"] in ("not_authenticated", "authentication_failed")
    assert "synapse_http" not in response.content.decode()


@pytest.mark.django_db
def test_no_mind_key_token_or_session_opens_the_metrics(metrics_on, alice, alice_key, owner):
    for client in (key_client(alice_key[1]), jwt_client(alice)):
        assert_error_shape(client.get("/metrics"), 401, "authentication_failed")
    assert_error_shape(owner.get("/metrics"), 401, "not_authenticated")
    response = APIClient().get(f"/metrics?key={TOKEN}")
    assert response.status_code == 401


@pytest.mark.django_db
def test_the_metrics_token_opens_nothing_else(scraper, alice_mind):
    assert scraper.get("/memory/recall").status_code == 401
    assert scraper.get(f"/memory?mind={alice_mind.id}").status_code == 401


@pytest.mark.django_db
def test_other_methods_are_refused(scraper):
    response = scraper.post("/metrics")
    assert_error_shape(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.django_db
def test_the_token_never_reaches_a_log(scraper, caplog):
    with caplog.at_level(logging.DEBUG):
        scrape(scraper)
        APIClient().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x")
        APIClient().get(f"/metrics?key={TOKEN}")
    assert caplog.records  # the refusals are logged (django.request), without the token
    assert TOKEN not in caplog.text


def test_a_short_token_stops_the_start(tmp_path):
    env = {**os.environ, "SYNAPSE_DATA_DIR": str(tmp_path), "SYNAPSE_METRICS_TOKEN": "short"}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "SYNAPSE_METRICS_TOKEN must be at least 32 characters" in result.stderr
    assert "short" not in result.stderr.replace("SYNAPSE_METRICS_TOKEN", "")


# -- what is counted -----------------------------------------------------------------------

@pytest.mark.django_db
def test_the_text_format_parses_and_names_every_family(scraper):
    families = {family.name for family in text_string_to_metric_families(
        scraper.get("/metrics").content.decode())}
    assert {"synapse_http_request_duration_seconds", "synapse_http_errors",
            "synapse_embedding_queue_depth", "synapse_embedding_queue_lag_seconds",
            "synapse_embedding_worker_running", "synapse_embedding_memories",
            "synapse_embedding_batches", "synapse_embedding_busy_seconds",
            "synapse_database_up"} <= families


@pytest.mark.django_db
def test_a_memory_request_is_counted_under_its_route_template(scraper, metrics_on, alice_key,
                                                              remember):
    memory = remember(content="Counted once")
    agent = key_client(alice_key[1])
    before = scrape(scraper)
    assert agent.get(f"/memory/{memory.id}").status_code == 200
    assert agent.get(f"/memory/{memory.id}").status_code == 200
    assert agent.get("/memory/mem_doesnotexist0000000000").status_code == 404
    after = scrape(scraper)
    count = "synapse_http_request_duration_seconds_count"
    assert value(after, count, route=DETAIL, method="GET", status_class="2xx") \
        - value(before, count, route=DETAIL, method="GET", status_class="2xx") == 2
    assert value(after, count, route=DETAIL, method="GET", status_class="4xx") \
        - value(before, count, route=DETAIL, method="GET", status_class="4xx") == 1
    errors = "synapse_http_errors_total"
    assert value(after, errors, route=DETAIL, method="GET", status="404") \
        - value(before, errors, route=DETAIL, method="GET", status="404") == 1
    # Both answers fall in the buckets: the +Inf bucket counts them all.
    bucket = "synapse_http_request_duration_seconds_bucket"
    assert value(after, bucket, route=DETAIL, method="GET", status_class="2xx", le="+Inf") \
        == value(after, count, route=DETAIL, method="GET", status_class="2xx")


@pytest.mark.django_db
def test_no_id_path_or_client_text_becomes_a_label(scraper, metrics_on, alice, alice_key,
                                                   alice_mind, remember):
    memory = remember(content="Private words")
    agent = key_client(alice_key[1])
    agent.get(f"/memory/{memory.id}/versions")
    agent.get("/memory/search?q=private+words")
    agent.get(f"/no/such/{memory.id}")
    agent.generic("BREW", "/memory")
    jwt_client(alice).get(f"/minds/{alice_mind.id}")
    samples = scrape(scraper)
    labels = {(name, value) for _sample, label_set in samples for name, value in label_set}
    text = " ".join(value for _name, value in labels)
    for secret in (memory.id, alice_mind.id, alice_key[0].id, "private", "BREW", "/no/such"):
        assert secret not in text
    routes = {value for name, value in labels if name == "route"}
    assert {"/memory/<memory_id:memory_id>/versions", "/memory/search",
            "/minds/<str:mind_id>", "unmatched", "/memory"} <= routes
    assert ("method", "other") in labels


@pytest.mark.django_db
def test_the_queue_depth_counts_memories_awaiting_their_embedding(scraper, remember,
                                                                  alice_mind, bob_mind, bob):
    samples = scrape(scraper)
    assert value(samples, "synapse_embedding_queue_depth") == 0
    assert value(samples, "synapse_embedding_queue_lag_seconds") == 0
    assert value(samples, "synapse_database_up") == 1
    first = remember(key="one", content="First fact")
    remember(key="two", content="Second fact")
    remember(category="credentials", key="vault", content="never embedded")
    trashed = remember(key="three", content="Going to the trash")
    Memory.objects.filter(id=trashed.id).update(deleted_at=timezone.now())
    # Another tenant's memories wait in the same queue.
    from memories.services import memory_store
    from minds.authentication import AgentPrincipal

    bob_key = key_issue(mind=bob_mind, name="bob agent", created_by=bob)[0]
    memory_store(mind=bob_mind, actor=AgentPrincipal(key=bob_key), category="fact",
                 content="Bob's fact", expires_given=False)
    Memory.objects.filter(id=first.id).update(updated_at=timezone.now() - timedelta(hours=2))
    samples = scrape(scraper)
    assert value(samples, "synapse_embedding_queue_depth") == 3
    assert value(samples, "synapse_embedding_queue_lag_seconds") >= 2 * 3600
    assert value(samples, "synapse_embedding_worker_running") == 0


@pytest.mark.django_db
def test_worker_throughput_and_heartbeat(scraper, remember, alice_mind):
    get_model()
    for number in range(3):
        remember(key=f"fact_{number}", content=f"Fact number {number}")
    before = scrape(scraper)
    assert embed_batch(limit=10, mind=alice_mind) == 3
    assert embed_batch(limit=10, mind=alice_mind) == 0  # nothing to do: not a batch
    note_worker_alive(seconds=30)
    after = scrape(scraper)
    assert value(after, "synapse_embedding_memories_total") \
        - value(before, "synapse_embedding_memories_total") == 3
    assert value(after, "synapse_embedding_batches_total") \
        - value(before, "synapse_embedding_batches_total") == 1
    assert value(after, "synapse_embedding_busy_seconds_total") \
        > value(before, "synapse_embedding_busy_seconds_total")
    assert value(after, "synapse_embedding_queue_depth") == 0
    assert value(after, "synapse_embedding_worker_running") == 1


@pytest.mark.django_db
def test_static_files_and_the_scrape_itself_have_routes_of_their_own(scraper):
    APIClient().get("/static/does-not-exist.css")
    scrape(scraper)
    samples = scrape(scraper)
    routes = {dict(labels).get("route") for _name, labels in samples}
    assert "/metrics" in routes
    assert "/static/" in routes


# -- GET /memory/health --------------------------------------------------------------------

def test_health_reports_the_embedding_lag(agent, remember):
    embeddings = agent.get("/memory/health").json()["embeddings"]
    assert embeddings["pending"] == 0
    assert embeddings["lag_seconds"] is None and embeddings["oldest_pending_at"] is None
    waited = remember(key="old", content="Waiting since this morning")
    remember(key="new", content="Just written")
    since = timezone.now() - timedelta(minutes=5)
    Memory.objects.filter(id=waited.id).update(updated_at=since)
    body = agent.get("/memory/health").json()
    assert body["status"] == "ok" and body["database"]["ok"] is True
    embeddings = body["embeddings"]
    assert embeddings["pending"] == 2
    assert embeddings["oldest_pending_at"] == format_timestamp(since)
    assert 300 <= embeddings["lag_seconds"] < 24 * 3600


def test_health_lag_is_this_minds_own(agent, bob_agent):
    bob_agent.post("/memory", {"category": "fact", "content": "Bob waits"}, format="json")
    embeddings = agent.get("/memory/health").json()["embeddings"]
    assert embeddings["pending"] == 0 and embeddings["lag_seconds"] is None
    assert bob_agent.get("/memory/health").json()["embeddings"]["pending"] == 1


def test_health_lag_ends_when_the_memories_are_embedded(agent, remember, alice_mind):
    get_model()
    remember(content="Soon embedded")
    assert agent.get("/memory/health").json()["embeddings"]["lag_seconds"] is not None
    embed_batch(limit=10, mind=alice_mind)
    embeddings = agent.get("/memory/health").json()["embeddings"]
    assert embeddings["pending"] == 0 and embeddings["lag_seconds"] is None
