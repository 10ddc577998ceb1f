"""Citations (docs/api.md#citations): every answer names the version it returned as
``mem_…@vN``, and that address reads exactly that version back."""

import re

import pytest

pytestmark = pytest.mark.django_db

CITATION = re.compile(r"(mem_[A-Za-z0-9]+)@v(\d+)")


def store(agent, **fields):
    body = {"category": "preference", "key": "meeting_room", "content": "Room Orion",
            **fields}
    response = agent.post("/memory", body, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def test_a_store_names_the_version_it_stored_and_an_upsert_the_next(agent):
    first = store(agent)
    assert first["citation"] == f"{first['id']}@v1"
    again = store(agent)
    assert (again["status"], again["citation"]) == ("unchanged", f"{first['id']}@v1")
    updated = store(agent, content="Room Polaris")
    assert (updated["status"], updated["citation"]) == ("updated", f"{first['id']}@v2")


def test_every_memory_representation_carries_its_citation(agent):
    memory_id = store(agent)["id"]
    updated = agent.put(f"/memory/{memory_id}", {"content": "Room Polaris"}, format="json")
    assert updated.json()["citation"] == f"{memory_id}@v2"
    assert agent.get(f"/memory/{memory_id}").json()["citation"] == f"{memory_id}@v2"
    assert [m["citation"] for m in agent.get("/memory").json()["results"]] == \
        [f"{memory_id}@v2"]
    recalled = agent.get("/memory/recall?format=json").json()["memories"]
    assert [m["citation"] for m in recalled] == [f"{memory_id}@v2"]
    found = agent.get("/memory/search", {"q": "polaris"}).json()["results"]
    assert [hit["citation"] for hit in found] == [f"{memory_id}@v2"]


def test_each_text_recall_block_cites_the_version_it_shows(agent):
    memory_id = store(agent)["id"]
    store(agent, content="Room Polaris")
    store(agent, category="fact", key="city", content="Lisbon")
    text = agent.get("/memory/recall").content.decode()
    headers = [line for line in text.splitlines() if line.startswith("[0")]
    cited = dict(CITATION.search(line).groups() for line in headers)
    assert cited[memory_id] == "2" and len(cited) == 2
    assert all(line.split()[4] == CITATION.search(line).group() for line in headers)


@pytest.mark.parametrize("address", ["{id}@v1", "{id}?version=1"])
def test_a_citation_reads_exactly_that_version_back(agent, address):
    memory_id = store(agent)["id"]
    store(agent, content="Room Polaris")
    response = agent.get("/memory/" + address.format(id=memory_id))
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["version"], body["content"], body["current_version"]) == \
        (memory_id, 1, "Room Orion", 2)
    assert body == agent.get(f"/memory/{memory_id}/versions/1").json()


def test_a_cited_version_stays_readable_in_the_trash(agent):
    memory_id = store(agent)["id"]
    assert agent.delete(f"/memory/{memory_id}").status_code == 200
    assert agent.get(f"/memory/{memory_id}").status_code == 404
    assert agent.get(f"/memory/{memory_id}@v1").json()["content"] == "Room Orion"


def test_citations_of_absent_versions_and_bad_numbers_are_refused(agent):
    memory_id = store(agent)["id"]
    assert agent.get(f"/memory/{memory_id}@v2").status_code == 404
    assert agent.get(f"/memory/{memory_id}?version=2").status_code == 404
    for bad in ("0", "-1", "two", "1.5"):
        response = agent.get(f"/memory/{memory_id}?version={bad}")
        assert response.status_code == 400, bad
        assert "version" in response.json()["error"]["fields"]
    assert agent.get(f"/memory/{memory_id}@vtwo").status_code == 404


def test_another_minds_credential_cannot_read_a_citation(agent, bob_agent):
    memory_id = store(agent)["id"]
    assert bob_agent.get(f"/memory/{memory_id}@v1").status_code == 404
    assert bob_agent.get(f"/memory/{memory_id}?version=1").status_code == 404
