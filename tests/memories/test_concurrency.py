"""Concurrent writers against a live server never lose an update or answer 5xx."""

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from threading import Barrier, Event, Thread

import httpx
import pytest
from django.db import connection, transaction

from memories.models import Memory, MemoryVersion, QuotaCounter
from memories.quotas import SLOTS, Usage, mind_usage
from memories.services import memory_store
from minds.authentication import AgentPrincipal

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 20


@contextmanager
def held_open(write):
    """Run ``write()`` in a transaction on another thread and keep that transaction, and
    the locks it took, open until the block ends."""
    written, release = Event(), Event()

    def holder():
        try:
            with transaction.atomic():
                write()
                written.set()
                release.wait(60)
        finally:
            connection.close()

    thread = Thread(target=holder)
    thread.start()
    try:
        assert written.wait(30)
        yield
    finally:
        release.set()
        thread.join(60)


def test_twenty_clients_upserting_one_key_end_with_one_memory_and_a_version_per_change(
        live_server, alice_key):
    _key, plaintext = alice_key
    start = Barrier(CLIENTS)

    def upsert(number: int) -> httpx.Response:
        body = {"category": "project", "key": "release_status",
                "content": f"Release status variant {number % 5}"}
        with httpx.Client(base_url=live_server.url, timeout=60,
                          headers={"Authorization": f"Bearer {plaintext}"}) as client:
            start.wait()
            return client.post("/memory", json=body)

    with ThreadPoolExecutor(CLIENTS) as pool:
        responses = list(pool.map(upsert, range(CLIENTS)))

    assert [r.status_code for r in responses if r.status_code >= 300] == []
    statuses = [r.json()["status"] for r in responses]
    assert statuses.count("stored") == 1
    memory = Memory.objects.get(category="project", key="release_status")
    assert {r.json()["id"] for r in responses} == {memory.id}
    versions = list(MemoryVersion.objects.filter(memory=memory).order_by("version")
                    .values_list("version", "content"))
    changes = statuses.count("stored") + statuses.count("updated")
    assert [number for number, _ in versions] == list(range(1, changes + 1))
    assert memory.version == changes
    # Each version differs from the one before it: no version without a change.
    assert all(a[1] != b[1] for a, b in zip(versions, versions[1:], strict=False))
    assert memory.content == versions[-1][1]


def test_concurrent_stores_with_one_idempotency_key_write_once(live_server, alice_key):
    _key, plaintext = alice_key
    start = Barrier(8)

    def store(_number: int) -> httpx.Response:
        with httpx.Client(base_url=live_server.url, timeout=60,
                          headers={"Authorization": f"Bearer {plaintext}",
                                   "Idempotency-Key": "same-request"}) as client:
            start.wait()
            return client.post("/memory", json={"category": "note", "content": "once"})

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(store, range(8)))

    assert all(r.status_code in (200, 201, 409) for r in responses)
    successes = [r for r in responses if r.status_code < 300]
    assert successes
    assert {r.json()["id"] for r in successes} == {Memory.objects.get().id}
    assert MemoryVersion.objects.count() == 1


# -- Quota counters (memories.quotas) ---------------------------------------------------------

def _store_new_keys(live_server, plaintext: str, count: int, prefix: str) -> list:
    start = Barrier(count)

    def store(number: int) -> httpx.Response:
        with httpx.Client(base_url=live_server.url, timeout=60,
                          headers={"Authorization": f"Bearer {plaintext}"}) as client:
            start.wait()
            return client.post("/memory", json={"category": "fact", "key": f"{prefix}{number}",
                                                "content": f"Fact number {number}"})

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(store, range(count)))


def test_concurrent_writers_of_one_mind_all_succeed_and_the_counters_are_exact(
        live_server, alice_key):
    key, plaintext = alice_key
    responses = _store_new_keys(live_server, plaintext, CLIENTS, "k")
    assert [r.status_code for r in responses] == [201] * CLIENTS
    assert mind_usage(key.mind) == Usage(
        memories=CLIENTS, versions=CLIENTS,
        content_bytes=sum(len(f"Fact number {n}") for n in range(CLIENTS)))
    # Striped: the writers spread over several counter rows, not one.
    assert QuotaCounter.objects.filter(mind=key.mind).count() > 1


def test_a_writer_holding_its_counter_slot_does_not_hold_up_the_others(live_server, alice_key,
                                                                     monkeypatch):
    """A single counter row per mind would make every other writer wait here, and so would
    a writer that waits for the slot it picked while other slots are free: every writer
    below picks the held slot first, and none may wait for it."""
    key, plaintext = alice_key
    # Its slot row is locked until the transaction ends.
    with held_open(lambda: memory_store(mind=key.mind, actor=AgentPrincipal(key=key),
                                        category="fact", key="slow", content="Held open")):
        with transaction.atomic():
            free = set(QuotaCounter.objects.select_for_update(skip_locked=True)
                       .filter(mind=key.mind).values_list("slot", flat=True))
        (held,) = set(range(SLOTS)) - free
        monkeypatch.setattr("memories.quotas.random.randrange", lambda _stop: held)
        with httpx.Client(base_url=live_server.url, timeout=60,
                          headers={"Authorization": f"Bearer {plaintext}"}) as client:
            def store(number: int) -> int:
                try:
                    return client.post("/memory", timeout=5, json={
                        "category": "fact", "key": f"quick{number}",
                        "content": f"Quick {number}"}).status_code
                except httpx.TimeoutException:
                    return 0
            with ThreadPoolExecutor(8) as pool:
                finished = list(pool.map(store, range(8)))
        assert finished == [201] * 8  # 0: the client gave up after 5 s of waiting
    assert mind_usage(key.mind).memories == Memory.objects.filter(mind=key.mind).count() == 9


def test_writers_at_the_limit_never_take_the_mind_over_it(live_server, alice_key, settings):
    """Each slot holds a share of the limit and no write takes more than its slot's share,
    so concurrent writers cannot overshoot (memories.quotas)."""
    key, plaintext = alice_key
    limit = 10
    settings.SYNAPSE = {**settings.SYNAPSE, "QUOTA_MEMORIES": limit}
    for number in range(5):
        memory_store(mind=key.mind, actor=AgentPrincipal(key=key), category="fact",
                     key=f"before{number}", content=f"Before {number}")
    responses = _store_new_keys(live_server, plaintext, CLIENTS, "late")
    codes = [r.status_code for r in responses]
    assert sorted(codes) == [201] * (limit - 5) + [403] * (CLIENTS - limit + 5)
    assert all(r.json()["error"]["code"] == "quota_exceeded" for r in responses
               if r.status_code == 403)
    assert Memory.objects.filter(mind=key.mind).count() == limit
    assert mind_usage(key.mind).memories == limit


def test_updates_of_two_memories_of_one_mind_do_not_wait_for_each_other(alice_key):
    """An update locks its memory's row, not the mind's: a writer holding its update's
    transaction open leaves another memory of the mind free to change."""
    from memories.services import memory_update

    key, _plaintext = alice_key
    agent = AgentPrincipal(key=key)
    first, second = (memory_store(mind=key.mind, actor=agent, category="fact", key=name,
                                  content="Before").memory for name in ("first", "second"))
    with held_open(lambda: memory_update(memory=first, actor=agent,
                                         content="First, held open")):
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")  # a wait fails instead of hanging
        try:
            _memory, changed = memory_update(memory=second, actor=agent, content="Second")
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        assert changed
    assert dict(Memory.objects.filter(key__in=["first", "second"])
                .values_list("key", "content")) == {"first": "First, held open",
                                                    "second": "Second"}
