"""Read your writes for meaning (issue 37): a memory stored or changed is found by every
search mode on the next request, with no embedding worker running. The write embeds it
with the query encoder and leaves it pending; the worker later puts the model's vector in
its place. No test here runs the worker between a write and the search that follows it."""

import json
import logging

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories import embeddings
from memories.embeddings import (
    embed_batch,
    embed_texts,
    embedding_status,
    embedding_text,
    get_model,
    get_query_encoder,
    model_name,
)
from memories.models import Memory

pytestmark = pytest.mark.django_db

# Embedded by the worker before the test's write: what a live mind already holds.
BACKGROUND = [
    ("pet", "Has a golden retriever called Bruno who loves the lake"),
    ("coffee", "Prefers a double espresso every morning before work"),
    ("editor", "Edits code in Neovim with a dark theme"),
    ("languages", "Speaks German natively and fluent Spanish"),
]
BOAT = {"category": "fact", "key": "boat", "content": "Owns a small sailing dinghy moored "
        "on Lake Constance"}


@pytest.fixture(scope="module")
def encoders():
    """The query encoder (what the web workers hold) and the model (the worker's), loaded
    once for the session."""
    return get_query_encoder(), get_model()


@pytest.fixture
def background(encoders, remember, alice_mind):
    for key, content in BACKGROUND:
        remember(key=key, content=content)
    embed_batch(limit=100, mind=alice_mind)


def keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [hit["key"] for hit in response.json()["results"]]


def store(agent, body, status=201) -> Memory:
    response = agent.post("/memory", body, format="json")
    assert response.status_code == status, response.content
    return Memory.objects.get(pk=response.json()["id"])


def test_a_stored_memory_is_found_by_meaning_on_the_next_request(agent, background):
    store(agent, BOAT)
    # No word in common with the memory: only its meaning finds it.
    question = {"q": "yacht", "threshold": 0.3}
    assert keys(agent.get("/memory/semantic-search", question)) == ["boat"]
    assert keys(agent.get("/memory/search", {"q": "yacht", "mode": "semantic"}))[0] == "boat"
    assert keys(agent.get("/memory/search", {"q": "yacht", "mode": "hybrid"}))[0] == "boat"
    assert keys(agent.get("/memory/search", {"q": "dinghy", "mode": "keyword"})) == ["boat"]
    recall = agent.get("/memory/recall", {"q": "what boat does the user have",
                                          "format": "json"})
    assert recall.status_code == 200
    assert recall.json()["memories"][0]["key"] == "boat"


def test_an_idempotent_store_is_found_by_meaning_too(agent, background):
    response = agent.post("/memory", BOAT, format="json", HTTP_IDEMPOTENCY_KEY="boat-1")
    assert response.status_code == 201
    assert keys(agent.get("/memory/semantic-search", {"q": "yacht", "threshold": 0.3})) == [
        "boat"]


def test_an_update_is_found_by_its_new_meaning_and_not_its_old(agent, background):
    memory = store(agent, {"category": "fact", "key": "home", "content": "Lives in Berlin"})
    old, new = ({"q": "Which city does the user live in?", "threshold": 0.45},
                {"q": "What does the user play?", "threshold": 0.2})
    assert keys(agent.get("/memory/semantic-search", old)) == ["home"]
    response = agent.put(f"/memory/{memory.id}",
                         {"content": "Plays the cello in a string quartet"}, format="json")
    assert response.status_code == 200
    assert keys(agent.get("/memory/semantic-search", old)) == []
    assert keys(agent.get("/memory/semantic-search", new)) == ["home"]
    assert keys(agent.get("/memory/search", {"q": new["q"], "mode": "hybrid"}))[0] == "home"


def test_an_upsert_is_found_by_its_new_meaning_and_not_its_old(agent, background):
    store(agent, {"category": "fact", "key": "home", "content": "Lives in Berlin"})
    store(agent, {"category": "fact", "key": "home",
                  "content": "Plays the cello in a string quartet"}, status=200)
    assert keys(agent.get("/memory/semantic-search",
                          {"q": "Which city does the user live in?", "threshold": 0.45})) == []
    assert keys(agent.get("/memory/semantic-search",
                          {"q": "What does the user play?", "threshold": 0.2})) == ["home"]


def test_a_revert_is_found_by_the_meaning_it_brings_back(agent, background):
    memory = store(agent, {"category": "fact", "key": "home", "content": "Lives in Berlin"})
    agent.put(f"/memory/{memory.id}", {"content": "Plays the cello in a string quartet"},
              format="json")
    response = agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json")
    assert response.status_code == 200, response.content
    assert keys(agent.get("/memory/semantic-search",
                          {"q": "Which city does the user live in?", "threshold": 0.45})) == [
        "home"]


def test_a_change_that_embeds_nothing_new_keeps_the_vector(agent, background):
    memory = store(agent, BOAT)
    before = memory.embedding
    agent.put(f"/memory/{memory.id}", {"priority": "high"}, format="json")
    memory.refresh_from_db()
    assert memory.embedding is not None and np.array_equal(memory.embedding, before)


def test_the_memory_stays_pending_until_the_worker_puts_the_models_vector(agent, encoders,
                                                                         alice_mind):
    memory = store(agent, BOAT)
    assert memory.embedding_pending
    assert memory.embedding_model == model_name() and len(memory.embedding) == 384
    status = embedding_status(mind=alice_mind)
    assert (status["pending"], status["done"]) == (1, 0)
    # What the write embedded is what the worker embeds: the same text.
    written = np.asarray(memory.embedding)
    model = np.asarray(embed_texts([embedding_text(memory)])[0])
    assert float(written @ model) > 0.99

    assert embed_batch(limit=10) == 1  # the worker's claim, across every mind
    memory.refresh_from_db()
    assert not memory.embedding_pending and memory.embedding_model == model_name()
    assert np.allclose(memory.embedding, model, atol=1e-6)
    assert embedding_status(mind=alice_mind)["pending"] == 0
    assert keys(agent.get("/memory/semantic-search", {"q": "yacht", "threshold": 0.3})) == [
        "boat"]


def counting_encoder(monkeypatch) -> list[str]:
    """The texts the write-time embedding gives the int8 query encoder, from now on."""
    calls: list[str] = []
    encoder = get_query_encoder()

    class Counting:
        def encode(self, texts):
            calls.extend(texts)
            return encoder.encode(texts)

    monkeypatch.setattr(embeddings, "get_query_encoder", Counting)
    return calls


def test_the_write_embeds_what_the_worker_embeds_with_the_int8_encoder(agent, encoders,
                                                                      monkeypatch):
    calls = counting_encoder(monkeypatch)
    memory = store(agent, {**BOAT, "tags": ["Boats"]})
    assert calls == [embedding_text(memory)] == ["boat (boats): " + BOAT["content"]]


def test_with_the_model_as_query_encoder_the_write_stores_the_models_own_vector(
        agent, encoders, settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "QUERY_ENCODER": "model"}
    memory = store(agent, BOAT)
    assert memory.embedding_pending and memory.embedding_model == model_name()
    assert np.allclose(memory.embedding, embed_texts([embedding_text(memory)])[0], atol=1e-6)


def test_credentials_are_never_embedded_on_write(agent, encoders, monkeypatch):
    calls = counting_encoder(monkeypatch)
    secret = store(agent, {"category": "credentials", "key": "vault", "content": "s3cr3t"})
    assert (secret.embedding, secret.embedding_model, secret.embedding_pending) == (
        None, "", False)
    assert calls == []
    agent.put(f"/memory/{secret.id}", {"content": "n3w-s3cr3t"}, format="json")
    secret.refresh_from_db()
    assert (secret.embedding, secret.embedding_pending) == (None, False)
    assert calls == []


def test_a_failing_encoder_never_fails_the_write(agent, background, monkeypatch, caplog):
    memory = store(agent, {"category": "fact", "key": "home", "content": "Lives in Berlin"})

    class Broken:
        def encode(self, texts):
            raise RuntimeError("onnxruntime fell over")

    monkeypatch.setattr(embeddings, "get_query_encoder", Broken)
    with caplog.at_level(logging.WARNING, logger="synapse.embeddings"):
        boat = store(agent, BOAT)
        response = agent.put(f"/memory/{memory.id}",
                             {"content": "Plays the cello in a string quartet"}, format="json")
    assert response.status_code == 200
    assert (boat.embedding, boat.embedding_model, boat.embedding_pending) == (None, "", True)
    memory.refresh_from_db()
    # The old meaning's vector is gone with the old content: never found by what it was.
    assert (memory.embedding, memory.embedding_pending) == (None, True)
    assert "onnxruntime fell over" in caplog.text and "Berlin" not in caplog.text
    monkeypatch.undo()
    assert keys(agent.get("/memory/semantic-search",
                          {"q": "Which city does the user live in?", "threshold": 0.45})) == []
    # The worker catches up.
    assert embed_batch(limit=10) == 2
    assert keys(agent.get("/memory/semantic-search", {"q": "yacht", "threshold": 0.3})) == [
        "boat"]


def test_the_vector_travels_in_the_insert_and_the_update_themselves(agent, encoders):
    with CaptureQueriesContext(connection) as stored:
        memory = store(agent, BOAT)
    with CaptureQueriesContext(connection) as updated:
        agent.put(f"/memory/{memory.id}", {"content": "Owns a canoe"}, format="json")
    for captured in (stored, updated):
        writes = [query["sql"] for query in captured.captured_queries
                  if query["sql"].startswith(('INSERT INTO "memories_memory" ',
                                              'UPDATE "memories_memory" '))]
        assert len(writes) == 1, writes
        assert '"embedding"' in writes[0]


def test_import_and_sync_leave_the_embedding_to_the_worker(agent, bob_agent, bob_mind,
                                                         encoders, monkeypatch):
    """Bulk paths: the worker embeds what they write (docs/search.md, "Read your writes")."""
    store(agent, BOAT)
    document = json.loads(b"".join(agent.get("/memory/mind-export").streaming_content))
    calls = counting_encoder(monkeypatch)
    # Into an empty mind: a restore (bulk insert); into one that holds memories: a merge
    # with the sync rules.
    assert bob_agent.post("/memory/mind-import", document, format="json").status_code == 200
    Memory.objects.for_mind(bob_mind).filter(key="boat").update(content="changed")
    assert bob_agent.post("/memory/mind-import", document, format="json").status_code == 200
    assert calls == []
    for memory in Memory.objects.for_mind(bob_mind):
        assert (memory.embedding, memory.embedding_pending) == (None, True)
