"""The embedding worker: what its claim takes, the sweep after a model change, its write,
and the CPU limits it puts on itself (docs/scaling.md, "The embedding worker")."""

import logging
import os
from io import StringIO

import pytest
import torch
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories import embeddings
from memories.embeddings import claimable, embed_batch, get_model, mark_stale, model_path
from memories.models import Memory


@pytest.fixture(scope="module")
def model():
    return get_model()


@pytest.fixture
def same_cpu(settings):
    """Run the command in this process without changing its niceness or torch threads."""
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBED_NICE": 0,
                        "EMBED_THREADS": torch.get_num_threads()}


def trash(memory: Memory) -> None:
    Memory.objects.filter(pk=memory.pk).update(deleted_at=timezone.now())


def vector_of(memory: Memory):
    return Memory.objects.get(pk=memory.pk).embedding


def test_the_claim_reads_the_partial_index_of_marked_memories(remember, alice_mind):
    """On a table of 5,000 embedded memories and one marked, the claim's plan reads the
    partial index; ``embedding_pending OR embedding_model <> …`` could not use it."""
    Memory.objects.bulk_create(
        Memory(mind=alice_mind, category="fact", key=f"done_{n}", content=f"Fact {n}",
               source="agent", confidence=0.7, embedding_pending=False,
               embedding_model=embeddings.model_name()) for n in range(5000))
    remember(content="Waiting for its vector")
    sql, params = (claimable().select_for_update(skip_locked=True).order_by("updated_at")
                   .values("id")[:64].query.sql_with_params())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "memory_embedding_pending" in plan, plan
    assert "Seq Scan" not in plan, plan


def test_the_claim_takes_marked_memories_of_every_mind_and_nothing_else(
        model, remember, bob_mind, bob):
    from memories.services import memory_store

    mine = remember(content="Alice's pending fact")
    bobs = memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's fact").memory
    secret = remember(category="credentials", key="vault", content="s3cr3t")
    trashed = remember(key="gone", content="Soon in the trash")
    trash(trashed)
    done = remember(key="done", content="Already embedded")
    Memory.objects.filter(pk=done.pk).update(embedding_pending=False,
                                             embedding_model=embeddings.model_name())
    assert set(claimable().values_list("id", flat=True)) == {mine.id, bobs.id}
    # Every write left the query encoder's vector (read your writes); the claim replaces
    # only the claimed ones'.
    unclaimed = {memory.id: list(vector_of(memory)) for memory in (trashed, done)}
    assert embed_batch(limit=10) == 2
    assert vector_of(mine) is not None and vector_of(bobs) is not None
    assert vector_of(secret) is None
    assert {memory.id: list(vector_of(memory)) for memory in (trashed, done)} == unclaimed
    assert Memory.objects.get(pk=trashed.pk).embedding_pending
    assert embed_batch(limit=10) == 0


def test_the_write_stores_each_memory_its_own_vector_in_one_statement(model, remember):
    memories = [remember(key=f"topic_{n}", content=text) for n, text in enumerate(
        ["The cat sleeps on the sofa", "Quarterly invoice for the cloud provider",
         "Marathon training plan for April"])]
    with CaptureQueriesContext(connection) as queries:
        assert embed_batch(limit=10) == 3
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 1
    for memory in memories:
        stored = Memory.objects.get(pk=memory.pk)
        expected = embeddings.embed_texts([embeddings.embedding_text(stored)])[0]
        assert stored.embedding_model == embeddings.model_name()
        assert not stored.embedding_pending
        assert sum(a * b for a, b in zip(stored.embedding, expected, strict=True)) > 0.999
        assert stored.version == 1 and stored.updated_at == memory.updated_at


def test_after_a_model_change_the_sweep_queues_what_another_model_embedded(
        model, settings, remember):
    memories = [remember(key=f"fact_{n}", content=f"Fact number {n}") for n in range(5)]
    secret = remember(category="credentials", key="pin", content="1234")
    trashed = remember(key="trashed", content="In the trash")
    assert embed_batch(limit=10) == 6
    trash(trashed)
    before = {m.pk: (m.version, m.change_txid) for m in Memory.objects.all()}
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": model_path()}
    # Not claimable until swept: the claim reads the marked memories only.
    assert embed_batch(limit=10) == 0
    assert mark_stale(chunk=2) == 5  # ranges of two ids: the walk covers every range
    assert mark_stale(chunk=2) == 0
    assert set(claimable().values_list("id", flat=True)) == {m.id for m in memories}
    assert {m.pk: (m.version, m.change_txid) for m in Memory.objects.all()} == before
    assert vector_of(secret) is None
    assert embed_batch(limit=10) == 5
    assert set(Memory.objects.filter(pk__in=[m.pk for m in memories])
               .values_list("embedding_model", flat=True)) == {model_path()}
    assert Memory.objects.get(pk=trashed.pk).embedding_model == embeddings.BUNDLED_MODEL


@pytest.mark.django_db(transaction=True)  # the command manages its own connections
def test_the_worker_command_re_embeds_everything_after_a_model_change(model, settings,
                                                                      remember, same_cpu):
    for number in range(4):
        remember(key=f"note_{number}", content=f"Note {number}")
    call_command("embed_worker", "--once", "--batch-size", "3", stdout=StringIO())
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {
        embeddings.BUNDLED_MODEL}
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": model_path()}
    call_command("embed_worker", "--once", "--batch-size", "3", stdout=StringIO())
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {model_path()}
    assert not Memory.objects.filter(embedding_pending=True).exists()


def test_the_worker_lowers_its_priority_and_bounds_the_model_threads(settings, monkeypatch):
    """``os.nice`` is replaced by a stand-in (a process cannot lower its niceness again, and
    this one may already run at 19); torch's thread count is the real one."""
    niceness = {"value": 0}
    calls = []

    def fake_nice(increment):
        calls.append(increment)
        niceness["value"] = min(19, niceness["value"] + increment)
        return niceness["value"]

    monkeypatch.setattr(os, "nice", fake_nice)
    threads = torch.get_num_threads()
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBED_NICE": 10, "EMBED_THREADS": 1}
    try:
        assert embeddings.limit_worker_cpu() == (10, 1)
        assert torch.get_num_threads() == 1 and os.environ["RAYON_NUM_THREADS"] == "1"
        # Already nicer than the setting (started with ``nice -n 15``): never lowered.
        niceness["value"], calls[:] = 15, []
        assert embeddings.limit_worker_cpu() == (15, 1)
        assert all(increment == 0 for increment in calls)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.django_db(transaction=True)
def test_the_worker_command_applies_its_limits(model, settings, remember, caplog):
    threads = torch.get_num_threads()
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBED_NICE": 0, "EMBED_THREADS": 1}
    remember(content="One to embed")
    try:
        with caplog.at_level(logging.INFO, logger="synapse.embeddings"):
            call_command("embed_worker", "--once", stdout=StringIO())
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    started = [record.getMessage() for record in caplog.records
               if record.getMessage().startswith("embedding worker at niceness")]
    assert len(started) == 1 and "with 1 model threads" in started[0], started
    assert not Memory.objects.filter(embedding_pending=True).exists()


@pytest.mark.django_db(transaction=True)  # the command manages its own connections
def test_the_worker_deletes_oauth_clients_nobody_approved_in_a_day(model, same_cpu):
    from datetime import timedelta

    from oauth2_provider.models import Application

    def client(name: str) -> Application:
        return Application.objects.create(
            name=name, redirect_uris="http://127.0.0.1:9/cb",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE)

    stale, fresh = client("stale"), client("fresh")
    Application.objects.filter(pk=stale.pk).update(
        created=timezone.now() - timedelta(days=2))
    call_command("embed_worker", "--once", stdout=StringIO())
    assert list(Application.objects.values_list("name", flat=True)) == [fresh.name]
