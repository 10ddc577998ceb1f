"""The embedding queue: marks, batches, two workers, model changes, and the API routes."""

import threading
import time
from collections import Counter

import pytest
from django.core.management import call_command
from django.db import connection

from memories import embeddings
from memories.embeddings import embed_batch, get_model, model_path, note_worker_alive
from memories.models import Memory


@pytest.fixture(scope="module")
def model():
    """The real model, loaded once (it stays loaded for the rest of the session)."""
    return get_model()


def test_a_stored_memory_waits_for_the_worker_and_then_carries_a_vector(model, remember,
                                                                        alice_mind):
    memory = remember(content="Likes long walks")
    # Pending, with the query encoder's vector meanwhile (read your writes).
    assert memory.embedding_pending and memory.embedding is not None
    assert embed_batch(limit=10, mind=alice_mind) == 1
    memory.refresh_from_db()
    assert not memory.embedding_pending
    assert memory.embedding_model == embeddings.model_name()
    assert len(memory.embedding) == 384
    assert embed_batch(limit=10, mind=alice_mind) == 0


def test_credentials_are_never_embedded(model, remember, alice_mind):
    secret = remember(category="credentials", key="vault", content="s3cr3t")
    remember(content="An ordinary fact")
    assert embed_batch(limit=10, mind=alice_mind) == 1
    secret.refresh_from_db()
    assert secret.embedding is None and not secret.embedding_pending


def test_a_changed_memory_is_embedded_again(model, agent, remember, alice_mind):
    memory = remember(content="Lives in Berlin")
    embed_batch(limit=10, mind=alice_mind)
    agent.put(f"/memory/{memory.id}", {"content": "Lives in Hamburg"}, format="json")
    memory.refresh_from_db()
    assert memory.embedding_pending and memory.embedding is not None
    assert embed_batch(limit=10, mind=alice_mind) == 1


def test_changing_the_model_setting_makes_every_memory_pending_again(model, settings,
                                                                     remember, alice_mind):
    for number in range(3):
        remember(key=f"fact_{number}", content=f"Fact number {number}")
    embed_batch(limit=10, mind=alice_mind)
    assert embeddings.embedding_status(mind=alice_mind)["pending"] == 0
    # The same weights under another name (a local folder) count as another model.
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": model_path()}
    assert embeddings.embedding_status(mind=alice_mind)["pending"] == 3
    assert embed_batch(limit=10, mind=alice_mind) == 3
    assert set(Memory.objects.for_mind(alice_mind).values_list("embedding_model", flat=True)) \
        == {model_path()}


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_embed_the_same_memory_twice(model, remember, alice_mind,
                                                       monkeypatch):
    for number in range(120):
        remember(key=f"turn_{number}", content=f"Conversation turn number {number}")
    claims: Counter = Counter()
    by_thread: Counter = Counter()
    real_embed = embeddings.embed_texts

    def counting_embed(texts):
        claims.update(texts)
        by_thread[threading.current_thread().name] += len(texts)
        time.sleep(0.02)  # keep both workers inside their transactions at once
        return real_embed(texts)

    monkeypatch.setattr(embeddings, "embed_texts", counting_embed)
    start = threading.Barrier(2, timeout=60)
    failures = []

    def worker():
        try:
            start.wait()
            while embed_batch(limit=7):
                pass
        except Exception as error:  # reported below; a thread cannot fail the test itself
            failures.append(error)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=worker, name=f"worker-{n}") for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == []
    assert len(claims) == 120 and set(claims.values()) == {1}
    assert len(by_thread) == 2 and all(count > 0 for count in by_thread.values())
    assert not Memory.objects.for_mind(alice_mind).filter(embedding_pending=True).exists()


@pytest.mark.django_db(transaction=True)  # the command manages its own connections
def test_the_worker_command_embeds_everything_pending_and_exits_with_once(model, remember,
                                                                          alice_mind, settings):
    # In this process: keep its niceness and torch threads (tests/memories/test_embed_worker).
    import torch

    settings.SYNAPSE = {**settings.SYNAPSE, "EMBED_NICE": 0,
                        "EMBED_THREADS": torch.get_num_threads()}
    for number in range(5):
        remember(key=f"note_{number}", content=f"Note {number}")
    call_command("embed_worker", "--once", "--batch-size", "2", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert embeddings.embedding_status(mind=alice_mind)["pending"] == 0


# -- API -----------------------------------------------------------------------------------

def test_embed_batch_embeds_up_to_the_limit_and_reports_what_is_left(model, agent, remember):
    for number in range(3):
        remember(key=f"item_{number}", content=f"Item {number}")
    response = agent.post("/memory/embed-batch", {"limit": 2}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["embedded"] == 2 and body["pending"] == 1 and body["done"] == 2
    assert body["total"] == 3 and body["model"] == "all-MiniLM-L6-v2"


def test_embed_batch_only_touches_the_callers_mind(model, agent, bob_mind, bob):
    from memories.services import memory_store

    memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's fact")
    assert agent.post("/memory/embed-batch", {}, format="json").json()["embedded"] == 0
    assert Memory.objects.for_mind(bob_mind).get().embedding_pending


@pytest.mark.parametrize("body", [{"limit": 0}, {"limit": 1001}, {"limit": "many"},
                                  {"size": 3}])
def test_embed_batch_refuses_bad_input(agent, body):
    response = agent.post("/memory/embed-batch", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]


def test_a_read_only_key_cannot_start_embedding(reader):
    assert reader.post("/memory/embed-batch", {}, format="json").status_code == 403


def test_embed_batch_status_reports_totals_and_a_running_worker(agent, remember):
    remember(content="Pending one")
    remember(category="credentials", key="pin", content="1234")
    body = agent.get("/memory/embed-batch-status").json()
    assert body["total"] == 1 and body["pending"] == 1 and body["done"] == 0
    assert body["running"] is False and body["dimensions"] == 384
    note_worker_alive(seconds=30)
    assert agent.get("/memory/embed-batch-status").json()["running"] is True


def test_a_human_reads_the_status_of_a_mind_they_own(human, alice_mind, bob_mind, remember):
    remember(content="Pending one")
    response = human.get("/memory/embed-batch-status", {"mind": alice_mind.id})
    assert response.status_code == 200
    body = response.json()
    assert (body["total"], body["pending"], body["done"]) == (1, 1, 0)
    assert human.get("/memory/embed-batch-status", {"mind": bob_mind.id}).status_code == 404


@pytest.mark.django_db
def test_an_episode_s_date_is_part_of_what_the_model_reads_and_moving_it_re_embeds(
        remember, alice_key):
    from datetime import UTC, datetime

    from memories.embeddings import embedding_text
    from memories.services import memory_update
    from minds.authentication import AgentPrincipal

    episode = remember(category="context", key="turn_3", content="Caroline: I went there",
                       memory_type="episodic", occurred_at=datetime(2023, 5, 8, 13, 56,
                                                                    tzinfo=UTC))
    fact = remember(category="fact", key="city", content="Lives in Lisbon")
    # An identifier key (turn_3) is left out; a key that reads as words is kept.
    assert embedding_text(episode) == "On 8 May 2023, Caroline: I went there"
    assert embedding_text(fact) == "city: Lives in Lisbon"
    embed_batch(limit=10)
    memory_update(memory=Memory.objects.get(pk=episode.pk), actor=AgentPrincipal(
        key=alice_key[0]), occurred_at=datetime(2023, 6, 1, tzinfo=UTC))
    assert Memory.objects.get(pk=episode.pk).embedding_pending
    assert not Memory.objects.get(pk=fact.pk).embedding_pending


@pytest.mark.parametrize(("key", "tags", "expected"), [
    ("preference_communication", [], "preference communication: Short answers"),
    ("preference-communication", ["style"], "preference communication (style): Short answers"),
    ("d1t3", [], "Short answers"),
    ("turn_conv44_d1_3", ["style"], "(style): Short answers"),
    # A derived key: its first words repeat the content, its hash is noise.
    ("short_answers_3f9a2b1c0d", [], "Short answers"),
])
def test_the_model_reads_a_key_only_when_it_reads_as_words(key, tags, expected):
    from memories.embeddings import embedding_text

    memory = Memory(category="preference", key=key, tags=tags, content="Short answers")
    assert embedding_text(memory) == expected
