"""Concurrent writers against a live server never lose an update or answer 5xx."""

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import httpx
import pytest

from memories.models import Memory, MemoryVersion

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 20


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
