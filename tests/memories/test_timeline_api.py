"""GET /memory/timeline and GET /memory/{id}/neighbours: order and ties, pages after and
before an episode or a time, refusals, tenants and read-only keys."""

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest

from memories.models import Memory
from memories.services import memory_delete
from tests.conftest import jwt_client

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PATH = "talks/one"


@pytest.fixture
def turns(episode):
    # Written out of order; t3, t4 and t5 share a moment (written in that order).
    return {key: episode(key, at) for key, at in [
        ("t2", T0 + timedelta(minutes=2)), ("t1", T0 + timedelta(minutes=1)),
        ("t3", T0 + timedelta(minutes=3)), ("t4", T0 + timedelta(minutes=3)),
        ("t5", T0 + timedelta(minutes=3)), ("t6", T0 + timedelta(minutes=6))]}


def stamp(moment: datetime) -> str:
    return quote(moment.isoformat().replace("+00:00", "Z"))


def page(client, query: str = "", path: str = PATH) -> dict:
    response = client.get(f"/memory/timeline?path={path}{query}")
    assert response.status_code == 200, response.content
    return response.json()


def keys(body: dict, field: str = "results") -> list[str]:
    return [memory["key"] for memory in body[field]]


# -- the timeline ---------------------------------------------------------------------------

def test_the_timeline_is_in_the_order_things_happened_ties_in_write_order(agent, turns):
    body = page(agent)
    assert keys(body) == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert (body["path"], body["count"], body["has_more"]) == (PATH, 6, False)
    first = body["results"][0]
    assert (first["id"], first["memory_type"], first["path"], first["occurred_at"]) == (
        turns["t1"].id, "episodic", PATH, "2026-05-01T12:01:00Z")


def test_pages_follow_each_other_after_the_last_episode(agent, turns):
    first = page(agent, "&limit=2")
    assert keys(first) == ["t1", "t2"] and first["has_more"] is True
    second = page(agent, f"&limit=2&after={first['results'][-1]['id']}")
    assert keys(second) == ["t3", "t4"] and second["has_more"] is True
    third = page(agent, f"&limit=2&after={second['results'][-1]['id']}")
    assert keys(third) == ["t5", "t6"] and third["has_more"] is False


def test_a_page_after_an_episode_inside_a_tie_starts_with_the_next_of_the_tie(agent, turns):
    assert keys(page(agent, f"&after={turns['t3'].id}")) == ["t4", "t5", "t6"]
    assert keys(page(agent, f"&before={turns['t5'].id}")) == ["t1", "t2", "t3", "t4"]


def test_pages_before_an_episode_read_backwards_but_answer_in_timeline_order(agent, turns):
    body = page(agent, f"&limit=2&before={turns['t4'].id}")
    assert keys(body) == ["t2", "t3"] and body["has_more"] is True
    body = page(agent, f"&limit=2&before={body['results'][0]['id']}")
    assert keys(body) == ["t1"] and body["has_more"] is False


def test_pages_after_and_before_a_time(agent, turns):
    tie = T0 + timedelta(minutes=3)
    assert keys(page(agent, f"&after={stamp(tie)}")) == ["t3", "t4", "t5", "t6"]
    assert keys(page(agent, f"&before={stamp(tie)}")) == ["t1", "t2"]
    assert keys(page(agent, f"&after={int((T0 + timedelta(minutes=4)).timestamp())}")) == [
        "t6"]
    assert keys(page(agent, f"&after={stamp(T0 + timedelta(days=1))}")) == []


def test_only_current_episodes_of_exactly_that_path_of_this_mind(agent, remember, episode,
                                                                 turns, alice):
    episode("elsewhere", T0, path="talks/two")
    episode("below", T0, path=f"{PATH}/sub")
    episode("root", T0, path="")
    remember(category="fact", key="fact", content="a fact", path=PATH)
    memory_delete(memory=turns["t6"], actor=alice)
    assert keys(page(agent)) == ["t1", "t2", "t3", "t4", "t5"]
    assert keys(page(agent, path="talks")) == []
    assert keys(page(agent, path=f"{PATH}/sub")) == ["below"]
    root = agent.get("/memory/timeline").json()
    assert (root["path"], keys(root)) == ("", ["root"])


def test_the_path_is_taken_in_its_normal_form(agent, turns):
    body = page(agent, path="/Talks/One/")
    assert body["path"] == PATH and body["count"] == 6


def test_another_mind_sees_its_own_timeline_only(bob_agent, turns):
    assert page(bob_agent)["results"] == []


def test_a_read_only_key_and_a_human_read_the_timeline(reader, alice, alice_mind, turns):
    assert keys(page(reader, "&limit=1")) == ["t1"]
    assert keys(page(jwt_client(alice), f"&mind={alice_mind.id}&limit=1")) == ["t1"]


@pytest.mark.parametrize("anchor", ["bobs", "fact", "other_path", "trashed", "mem_nothere"])
@pytest.mark.parametrize("side", ["after", "before"])
def test_an_anchor_that_is_not_an_episode_of_this_timeline_is_a_404(
        agent, bob_agent, bob_mind, remember, episode, turns, alice, anchor, side):
    if anchor == "bobs":
        bob_agent.post("/memory", {"category": "context", "content": "bob's turn",
                                   "memory_type": "episodic", "path": PATH}, format="json")
        anchor_id = Memory.objects.get(mind=bob_mind).id
    elif anchor == "fact":
        anchor_id = remember(category="fact", content="a fact", path=PATH).id
    elif anchor == "other_path":
        anchor_id = episode("elsewhere", T0, path="talks/two").id
    elif anchor == "trashed":
        anchor_id = episode("gone", T0).id
        memory_delete(memory=Memory.objects.get(pk=anchor_id), actor=alice)
    else:
        anchor_id = anchor
    response = agent.get(f"/memory/timeline?path={PATH}&{side}={anchor_id}")
    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (404, "not_found")
    assert "bob's turn" not in response.content.decode()


@pytest.mark.parametrize("query, fields", [
    ("after=mem_a&before=mem_b", {"after", "before"}),
    ("after=yesterday", {"after"}), ("before=2026-05-01T12:00:00", {"before"}),
    ("limit=0", {"limit"}), ("limit=501", {"limit"}), ("path=a//b", {"path"}),
    ("path=..", {"path"}), ("memory_type=episodic", {"memory_type"}), ("n=2", {"n"}),
])
def test_malformed_timeline_parameters_are_a_400_naming_them(agent, turns, query, fields):
    response = agent.get(f"/memory/timeline?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and set(error["fields"]) == fields


def test_the_page_limit_is_500(agent, episode):
    for number in range(3):
        episode(f"e{number}", T0)
    assert page(agent, "&limit=500")["count"] == 3
    assert page(agent, "&limit=2")["has_more"] is True


def test_the_default_page_is_50(agent, episode):
    for number in range(51):
        episode(f"e{number:02d}", T0 + timedelta(seconds=number))
    body = page(agent)
    assert (body["count"], body["has_more"], keys(body)[-1]) == (50, True, "e49")


def test_credentials_on_a_timeline_stay_redacted(agent, remember):
    remember(category="credentials", key="token", content="hunter2-secret",
             memory_type="episodic", path=PATH)
    text = agent.get(f"/memory/timeline?path={PATH}").content.decode()
    assert "hunter2-secret" not in text and "token" in text


# -- neighbours -----------------------------------------------------------------------------

def neighbours(client, memory_id: str, query: str = "") -> dict:
    response = client.get(f"/memory/{memory_id}/neighbours{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_neighbours_are_the_episodes_just_before_and_after(agent, turns):
    body = neighbours(agent, turns["t4"].id)
    assert body["memory"] == turns["t4"].id
    assert (keys(body, "before"), keys(body, "after")) == (["t2", "t3"], ["t5", "t6"])
    body = neighbours(agent, turns["t4"].id, "?n=1")
    assert (keys(body, "before"), keys(body, "after")) == (["t3"], ["t5"])
    body = neighbours(agent, turns["t1"].id, "?n=20")
    assert (keys(body, "before"), keys(body, "after")) == ([], ["t2", "t3", "t4", "t5",
                                                               "t6"])


def test_neighbours_are_any_writers_episodes_of_the_same_path(agent, human, alice_mind,
                                                              episode, turns):
    stored = human.post(f"/memory?mind={alice_mind.id}", {
        "category": "context", "key": "t7", "content": "the human's turn",
        "memory_type": "episodic", "path": PATH,
        "occurred_at": "2026-05-01T12:07:00Z"}, format="json")
    assert stored.status_code == 201
    episode("elsewhere", T0 + timedelta(minutes=7), path="talks/two")
    body = neighbours(agent, turns["t6"].id)
    assert (keys(body, "before"), keys(body, "after")) == (["t4", "t5"], ["t7"])


def test_neighbours_of_a_memory_that_is_not_episodic_is_a_400(agent, remember):
    fact = remember(category="fact", content="a fact", path=PATH)
    response = agent.get(f"/memory/{fact.id}/neighbours")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (400, "not_episodic")
    assert fact.id in error["message"]


def test_neighbours_of_another_minds_or_a_trashed_memory_is_a_404(bob_agent, agent, alice,
                                                                  turns):
    assert bob_agent.get(f"/memory/{turns['t3'].id}/neighbours").status_code == 404
    memory_delete(memory=turns["t3"], actor=alice)
    response = agent.get(f"/memory/{turns['t3'].id}/neighbours")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_read_only_key_reads_neighbours(reader, turns):
    assert keys(neighbours(reader, turns["t2"].id, "?n=1"), "after") == ["t3"]


@pytest.mark.parametrize("query", ["?n=0", "?n=21", "?n=two", "?limit=2"])
def test_malformed_neighbours_parameters_are_a_400(agent, turns, query):
    response = agent.get(f"/memory/{turns['t2'].id}/neighbours{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
