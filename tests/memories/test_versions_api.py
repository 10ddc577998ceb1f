"""GET /memory/{id}/versions and POST /memory/{id}/revert."""

import pytest

from memories.models import AuditEvent, Memory

pytestmark = pytest.mark.django_db


def _history(remember):
    memory = remember(key="editor", content="Vim", tags=["tools"])
    remember(key="editor", content="Emacs", tags=["tools"], priority="high")
    remember(key="editor", content="Helix", tags=["tools", "modal"])
    return memory


def test_versions_list_every_version_with_content_fields_actor_and_time(agent, remember):
    memory = _history(remember)
    response = agent.get(f"/memory/{memory.id}/versions")
    assert response.status_code == 200
    body = response.json()
    assert body["current_version"] == 3
    assert [v["version"] for v in body["versions"]] == [1, 2, 3]
    assert [v["content"] for v in body["versions"]] == ["Vim", "Emacs", "Helix"]
    assert [v["priority"] for v in body["versions"]] == ["normal", "high", "high"]
    assert body["versions"][2]["tags"] == ["tools", "modal"]
    assert all(v["actor"].startswith("key:alice agent") for v in body["versions"])
    assert all(v["created_at"].endswith("Z") for v in body["versions"])


def test_revert_creates_a_new_version_equal_to_the_old_one(agent, remember):
    memory = _history(remember)
    response = agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json")
    assert response.status_code == 200
    assert response.json()["version"] == 4
    memory.refresh_from_db()
    assert (memory.content, memory.priority, memory.tags, memory.version) == (
        "Vim", "normal", ["tools"], 4)
    versions = agent.get(f"/memory/{memory.id}/versions").json()["versions"]
    assert [v["content"] for v in versions] == ["Vim", "Emacs", "Helix", "Vim"]
    assert AuditEvent.objects.filter(memory_id=memory.id, action="revert").count() == 1


def test_recall_and_list_show_only_the_current_version(agent, remember):
    memory = _history(remember)
    agent.post(f"/memory/{memory.id}/revert", {"version": 2}, format="json")
    recall = agent.get("/memory/recall").content.decode()
    assert "Emacs" in recall and "Vim" not in recall and "Helix" not in recall
    listed = agent.get("/memory").json()["results"]
    assert [m["content"] for m in listed] == ["Emacs"]


def test_revert_to_a_missing_version_is_400_naming_the_field(agent, remember):
    memory = _history(remember)
    response = agent.post(f"/memory/{memory.id}/revert", {"version": 9}, format="json")
    assert response.status_code == 400
    assert "version" in response.json()["error"]["fields"]
    assert Memory.objects.get(pk=memory.id).version == 3


@pytest.mark.parametrize("body", [{}, {"version": 0}, {"version": "two"}, {"version": 1, "x": 1}])
def test_revert_with_bad_body_is_400(agent, remember, body):
    memory = _history(remember)
    response = agent.post(f"/memory/{memory.id}/revert", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_revert_of_a_memory_in_the_trash_is_409(agent, remember):
    memory = _history(remember)
    agent.delete(f"/memory/{memory.id}")
    response = agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json")
    assert response.status_code == 409
    assert "restore" in response.json()["error"]["message"]


def test_versions_of_another_minds_memory_are_404(bob_agent, remember):
    memory = _history(remember)
    assert bob_agent.get(f"/memory/{memory.id}/versions").status_code == 404
    response = bob_agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json")
    assert response.status_code == 404
    assert Memory.objects.get(pk=memory.id).version == 3


def test_read_only_key_cannot_revert(reader, remember):
    memory = _history(remember)
    versions = reader.get(f"/memory/{memory.id}/versions")
    assert versions.status_code == 200
    assert [v["content"] for v in versions.json()["versions"]] == ["Vim", "Emacs", "Helix"]
    assert reader.post(f"/memory/{memory.id}/revert", {"version": 1},
                       format="json").status_code == 403
    assert Memory.objects.get(pk=memory.id).version == 3


def test_credentials_versions_are_readable_by_the_owning_mind(agent):
    stored = agent.post("/memory", {"category": "credentials", "key": "db", "content": "pw-1"},
                        format="json").json()
    agent.post("/memory", {"category": "credentials", "key": "db", "content": "pw-2"},
               format="json")
    versions = agent.get(f"/memory/{stored['id']}/versions").json()["versions"]
    assert [v["content"] for v in versions] == ["pw-1", "pw-2"]


def test_versions_come_a_page_at_a_time(agent, remember):
    memory = remember(key="counter", content="v1")
    for number in range(2, 8):
        remember(key="counter", content=f"v{number}")
    body = agent.get(f"/memory/{memory.id}/versions?limit=3&offset=2").json()
    assert (body["count"], body["limit"], body["offset"]) == (7, 3, 2)
    assert [v["version"] for v in body["versions"]] == [3, 4, 5]
    assert body["current_version"] == 7
    last = agent.get(f"/memory/{memory.id}/versions?limit=3&offset=6").json()
    assert [v["version"] for v in last["versions"]] == [7] and last["count"] == 7


def test_versions_default_to_a_page_of_fifty(agent, remember):
    memory = remember(key="counter", content="v1")
    for number in range(2, 53):
        remember(key="counter", content=f"v{number}")
    body = agent.get(f"/memory/{memory.id}/versions").json()
    assert (body["count"], body["limit"], len(body["versions"])) == (52, 50, 50)


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "offset=-1", "limit=x", "page=2"])
def test_versions_with_bad_page_parameters_are_400(agent, remember, query):
    memory = _history(remember)
    response = agent.get(f"/memory/{memory.id}/versions?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
