"""The memory page shows the agent and instance each version's and event's request claimed,
and filters its versions and activity by them (?agent=, ?instance=)."""

import pytest

from tests.conftest import text

pytestmark = pytest.mark.django_db

CODEX = {"HTTP_X_SYNAPSE_AGENT": "codex", "HTTP_X_SYNAPSE_AGENT_INSTANCE": "04f9b8c2",
         "HTTP_X_SYNAPSE_DEVICE": "MacBook; Darwin 24.1.0"}
CLAUDE = {"HTTP_X_SYNAPSE_AGENT": "claude-desktop", "HTTP_X_SYNAPSE_AGENT_INSTANCE": "a1"}


def written_by_two_agents(agent) -> str:
    memory_id = agent.post("/memory", {"category": "fact", "key": "office",
                                       "content": "Bonn"}, format="json", **CODEX).json()["id"]
    agent.put(f"/memory/{memory_id}", {"content": "Paris"}, format="json", **CLAUDE)
    agent.put(f"/memory/{memory_id}", {"content": "Rome"}, format="json")
    return memory_id


def test_the_memory_page_shows_the_claimed_agent_of_each_version_and_event(owner, ui, agent):
    memory_id = written_by_two_agents(agent)
    response = owner.get(ui(f"memories/{memory_id}"))
    html = text(response)
    assert [v.agent for v in response.context["versions"]] == ["", "claude-desktop", "codex"]
    assert '<a href="?agent=codex#versions">codex</a>' in html
    assert "?instance=04f9b8c2#versions" in html and "MacBook; Darwin 24.1.0" in html
    assert html.count('data-testid="activity-agent"') == 2
    assert '?agent=claude-desktop#activity' in html


def test_the_memory_page_filters_versions_and_activity_by_agent_and_instance(owner, ui,
                                                                             agent):
    memory_id = written_by_two_agents(agent)
    by_agent = owner.get(ui(f"memories/{memory_id}"), {"agent": "codex"})
    assert [v.version for v in by_agent.context["versions"]] == [1]
    assert [(event.action, event.agent) for event, _label in by_agent.context["activity"]] == [
        ("store", "codex")]
    assert 'value="codex"' in text(by_agent) and "Show all" in text(by_agent)
    by_instance = owner.get(ui(f"memories/{memory_id}"), {"instance": "a1"})
    assert [v.version for v in by_instance.context["versions"]] == [2]
    nobody = owner.get(ui(f"memories/{memory_id}"), {"agent": "nobody"})
    assert list(nobody.context["versions"]) == [] and nobody.context["activity"] == []
    everything = owner.get(ui(f"memories/{memory_id}"))
    assert len(everything.context["versions"]) == 3


# -- The mind's activity page ----------------------------------------------------------------

def test_the_activity_page_lists_every_change_of_the_mind_with_its_claims(owner, ui, agent,
                                                                          alice_mind):
    memory_id = written_by_two_agents(agent)
    other = agent.post("/memory", {"category": "note", "key": "gone", "content": "x"},
                       format="json", **CLAUDE).json()["id"]
    agent.delete(f"/memory/{other}")
    response = owner.get(ui("activity"))
    html = text(response)
    rows = [(event.action, event.agent, event.memory_id)
            for event, _label, _memory in response.context["events"]]
    assert rows == [("delete", "", other), ("store", "claude-desktop", other),
                    ("update", "", memory_id), ("update", "claude-desktop", memory_id),
                    ("store", "codex", memory_id), ("key_issue", "", "")]
    assert html.count(f'href="/ui/minds/{alice_mind.id}/memories/{memory_id}"') == 3
    assert "fact/office" in html and "on MacBook; Darwin 24.1.0" in html
    assert 'aria-current="page">Activity</a>' in html


def test_the_activity_page_filters_by_agent_and_instance(owner, ui, agent):
    written_by_two_agents(agent)
    by_agent = owner.get(ui("activity"), {"agent": "claude-desktop"})
    assert [(e.action, e.agent) for e, _label, _m in by_agent.context["events"]] == [
        ("update", "claude-desktop")]
    by_instance = owner.get(ui("activity"), {"instance": "04f9b8c2"})
    assert [(e.action, e.agent_instance) for e, _label, _m in by_instance.context["events"]] \
        == [("store", "04f9b8c2")]
    nobody = text(owner.get(ui("activity"), {"agent": "nobody"}))
    assert "No change claimed by this agent or instance." in nobody


def test_the_activity_page_names_a_purged_memory_by_id_only(owner, ui, agent):
    from datetime import timedelta

    from django.utils import timezone

    from memories.services import memory_purge_trash

    memory_id = agent.post("/memory", {"category": "fact", "key": "secret_plan",
                                       "content": "x"}, format="json").json()["id"]
    agent.delete(f"/memory/{memory_id}")
    assert memory_purge_trash(older_than=timezone.now() + timedelta(seconds=1)) == 1
    html = text(owner.get(ui("activity")))
    assert f"{memory_id} (no longer here)" in html and "secret_plan" not in html


def test_the_activity_page_reads_a_page_in_the_same_queries_however_many_memories(
        owner, ui, agent):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for number in range(3):
        agent.post("/memory", {"category": "note", "content": f"n{number}"}, format="json")
    with CaptureQueriesContext(connection) as few:
        owner.get(ui("activity"))
    for number in range(3, 20):
        agent.post("/memory", {"category": "note", "content": f"n{number}"}, format="json")
    with CaptureQueriesContext(connection) as many:
        response = owner.get(ui("activity"))
    assert len(response.context["events"]) == 21  # and the key's issue
    assert len(many.captured_queries) == len(few.captured_queries)
