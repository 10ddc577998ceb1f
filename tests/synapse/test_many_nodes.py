"""Two web nodes on one PostgreSQL (docs/scaling.md, "Many web nodes"): two gunicorn
servers on different ports, requests alternated between them, as behind a round-robin load
balancer. Nothing a request relies on lives in a process: rate limits are rows of
``synapse_ratelimit`` (synapse.throttling) and Idempotency-Key answers rows of
``memories_idempotentrequest``, so both hold across the nodes as on one."""

import itertools
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.security.live import Server

pytestmark = [pytest.mark.slow]

WRITES = 10  # per key and hour on these nodes: none comes back during the test


@pytest.fixture(scope="module")
def nodes(scale_cluster):
    env = {"SYNAPSE_RATE_WRITE": f"{WRITES}/hour"}
    servers = [Server(scale_cluster, workers=1, threads=2, env=env) for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def new_key(scale_cluster):
    """A Mind Key of the live mind of its own: its own rate-limit budget."""
    names = itertools.count()

    def issue() -> str:
        return scale_cluster.manage("issue_key", scale_cluster.mind_id, "--name",
                                    f"node test {next(names)}")

    return issue


def clients(nodes, key: str) -> list[httpx.Client]:
    return [httpx.Client(base_url=node.url, timeout=60,
                         headers={"Authorization": f"Bearer {key}"}) for node in nodes]


def test_a_rate_limit_holds_across_two_nodes(nodes, new_key):
    """Requests alternated between the nodes spend one budget: WRITES pass, whichever node
    they reach, then both refuse. Per-process counters would let 2 × WRITES through."""
    both = clients(nodes, new_key())
    answers = [both[number % 2].post("/memory", json={"category": "fact",
                                                       "key": f"limited_{number}",
                                                       "content": "spent"})
               for number in range(WRITES + 4)]
    assert [answer.status_code for answer in answers] == [201] * WRITES + [429] * 4
    assert all(int(answer.headers["Retry-After"]) > 0 for answer in answers[WRITES:])
    # Read on one node what the other wrote.
    written = answers[0].json()["id"]
    assert both[1].get(f"/memory/{written}").json()["key"] == "limited_0"


def test_an_idempotency_key_is_replayed_by_the_other_node(nodes, new_key):
    first, second = clients(nodes, new_key())
    body = {"category": "fact", "key": "once", "content": "stored once"}
    answer = first.post("/memory", json=body, headers={"Idempotency-Key": "node-a"})
    assert answer.status_code == 201 and "Idempotent-Replayed" not in answer.headers
    replay = second.post("/memory", json=body, headers={"Idempotency-Key": "node-a"})
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json() == answer.json()
    other = second.post("/memory", json={**body, "content": "another body"},
                        headers={"Idempotency-Key": "node-a"})
    assert other.status_code == 409


def test_one_idempotency_key_sent_to_both_nodes_at_once_stores_once(nodes, new_key):
    both = clients(nodes, new_key())
    body = {"category": "fact", "key": "raced", "content": "sent three times to each node"}

    def send(number: int) -> httpx.Response:
        return both[number % 2].post("/memory", json=body,
                                     headers={"Idempotency-Key": "raced-key"})

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(send, range(6)))
    # A retry arriving while the first is still running may be told to retry (409); every
    # other answer is the first one, given again.
    done = [answer for answer in answers if answer.status_code == 201]
    assert {answer.status_code for answer in answers} <= {201, 409}
    assert len({answer.json()["id"] for answer in done}) == 1
    assert len([answer for answer in done
                if "Idempotent-Replayed" not in answer.headers]) == 1
    memory = both[0].get(f"/memory/{done[0].json()['id']}").json()
    assert memory["version"] == 1 and memory["key"] == "raced"
