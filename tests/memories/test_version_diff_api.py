"""Each version's parent (and reverted_from), GET /memory/{id}/versions/{n} and
GET /memory/{id}/diff?from=&to=, over real HTTP, with the tenant scoping of the versions."""

import pytest

from memories.diff import DIFF_MAX_LINES
from memories.models import MemoryVersion

pytestmark = pytest.mark.django_db


def _history(agent, remember):
    memory = remember(key="editor", content="Vim\nis\nmodal", tags=["tools"])
    agent.put(f"/memory/{memory.id}", {"content": "Vim\nis not\nmodal", "priority": "high"},
              format="json")
    agent.put(f"/memory/{memory.id}", {"content": "Helix"}, format="json")
    return memory


def test_each_version_names_its_parent_across_updates_and_a_revert(agent, remember):
    memory = _history(agent, remember)
    assert agent.post(f"/memory/{memory.id}/revert", {"version": 1},
                      format="json").status_code == 200
    agent.put(f"/memory/{memory.id}", {"content": "Kakoune"}, format="json")
    versions = agent.get(f"/memory/{memory.id}/versions").json()["versions"]
    assert [(v["version"], v["parent"], v["reverted_from"]) for v in versions] == [
        (1, None, None), (2, 1, None), (3, 2, None), (4, 3, 1), (5, 4, None)]
    stored = MemoryVersion.objects.get(memory=memory, version=4)
    assert (stored.parent, stored.reverted_from) == (3, 1)


def test_one_version_has_the_fields_of_a_list_item(agent, remember):
    memory = _history(agent, remember)
    listed = agent.get(f"/memory/{memory.id}/versions").json()["versions"][1]
    response = agent.get(f"/memory/{memory.id}/versions/2")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["current_version"]) == (memory.id, 3)
    assert {name: body[name] for name in listed} == listed
    assert body["content"] == "Vim\nis not\nmodal"


def test_a_version_that_does_not_exist_is_a_404(agent, remember):
    memory = _history(agent, remember)
    response = agent.get(f"/memory/{memory.id}/versions/4")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert agent.get(f"/memory/{memory.id}/versions/0").status_code == 404


def test_the_diff_marks_content_lines_and_names_changed_fields(agent, remember):
    memory = _history(agent, remember)
    response = agent.get(f"/memory/{memory.id}/diff?from=1&to=2")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["from"], body["to"]) == (memory.id, 1, 2)
    assert body["changes"] == [
        {"field": "priority", "from": "normal", "to": "high"},
        {"field": "content", "too_large": False, "hunks": [{
            "old_start": 1, "new_start": 1, "lines": [
                {"op": " ", "text": "Vim"}, {"op": "-", "text": "is"},
                {"op": "+", "text": "is not"}, {"op": " ", "text": "modal"}]}]}]


def test_the_diff_backwards_and_of_one_version_with_itself(agent, remember):
    memory = _history(agent, remember)
    backwards = agent.get(f"/memory/{memory.id}/diff?from=3&to=1").json()["changes"]
    assert backwards[-1]["hunks"][0]["lines"] == [
        {"op": "-", "text": "Helix"}, {"op": "+", "text": "Vim"}, {"op": "+", "text": "is"},
        {"op": "+", "text": "modal"}]
    assert agent.get(f"/memory/{memory.id}/diff?from=2&to=2").json()["changes"] == []


def test_the_diff_folds_long_unchanged_runs_into_hunks_with_line_numbers(agent, remember):
    lines = [f"line {number}" for number in range(1, 31)]
    memory = remember(key="notes", content="\n".join(lines))
    changed = list(lines)
    changed[1], changed[25] = "second", "twenty-sixth"
    agent.put(f"/memory/{memory.id}", {"content": "\n".join(changed)}, format="json")
    hunks = agent.get(f"/memory/{memory.id}/diff?from=1&to=2").json()["changes"][0]["hunks"]
    assert [(h["old_start"], h["new_start"], len(h["lines"])) for h in hunks] == [
        (1, 1, 6), (23, 23, 8)]
    assert hunks[1]["lines"][3:5] == [{"op": "-", "text": "line 26"},
                                      {"op": "+", "text": "twenty-sixth"}]


def test_content_past_the_diff_bounds_is_too_large_without_hunks(agent, remember):
    # More changed lines than the web UI's diff matches (DIFF_MAX_LINES).
    lines = DIFF_MAX_LINES // 2 + 1
    memory = remember(key="big", content="a\n" * lines)
    agent.put(f"/memory/{memory.id}", {"content": "b\n" * lines}, format="json")
    body = agent.get(f"/memory/{memory.id}/diff?from=1&to=2").json()
    assert body["changes"] == [{"field": "content", "too_large": True, "hunks": []}]


def test_content_within_the_bounds_is_diffed(agent, remember):
    lines = DIFF_MAX_LINES // 2 - 1
    memory = remember(key="big", content="a\n" * lines)
    agent.put(f"/memory/{memory.id}", {"content": "b\n" * lines}, format="json")
    change = agent.get(f"/memory/{memory.id}/diff?from=1&to=2").json()["changes"][0]
    assert change["too_large"] is False
    assert len(change["hunks"][0]["lines"]) == 2 * lines


@pytest.mark.parametrize("query", ["", "?from=1", "?to=2", "?from=x&to=2", "?from=0&to=2",
                                   "?from=1&to=2&context=3"])
def test_a_diff_without_valid_versions_is_a_400(agent, remember, query):
    memory = _history(agent, remember)
    response = agent.get(f"/memory/{memory.id}/diff{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_a_diff_with_an_absent_version_is_a_404(agent, remember):
    memory = _history(agent, remember)
    response = agent.get(f"/memory/{memory.id}/diff?from=1&to=9")
    assert response.status_code == 404
    assert "no version 9" in response.json()["error"]["message"]


def test_another_minds_key_gets_404_for_versions_and_diffs(agent, bob_agent, remember):
    memory = _history(agent, remember)
    for url in (f"/memory/{memory.id}/versions/1", f"/memory/{memory.id}/diff?from=1&to=2"):
        response = bob_agent.get(url)
        assert response.status_code == 404, url
        assert "Vim" not in response.content.decode()


def test_a_human_reads_them_with_mind(human, alice_mind, bob_mind, agent, remember):
    memory = _history(agent, remember)
    assert human.get(f"/memory/{memory.id}/versions/1?mind={alice_mind.id}").json()[
        "content"] == "Vim\nis\nmodal"
    assert human.get(f"/memory/{memory.id}/diff?from=1&to=3&mind={alice_mind.id}"
                     ).status_code == 200
    assert human.get(f"/memory/{memory.id}/versions/1").status_code == 400
    assert human.get(f"/memory/{memory.id}/versions/1?mind={bob_mind.id}").status_code == 404


def test_the_diff_of_a_scalar_field_keeps_its_json_type(agent, remember):
    memory = remember(key="editor", content="Vim", tags=["tools"])
    agent.put(f"/memory/{memory.id}", {"tags": ["tools", "modal"], "confidence": 0.4,
                                       "expires_at": "2030-01-01T00:00:00Z"}, format="json")
    changes = agent.get(f"/memory/{memory.id}/diff?from=1&to=2").json()["changes"]
    assert changes == [
        {"field": "tags", "from": ["tools"], "to": ["tools", "modal"]},
        {"field": "confidence", "from": 0.7, "to": 0.4},
        {"field": "expires_at", "from": None, "to": "2030-01-01T00:00:00Z"}]
