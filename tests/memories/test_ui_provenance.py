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
