"""Expiry: expired memories leave recall but stay listable; GET /memory/expiring?within=
(7 days when left out)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def timeline(remember):
    now = timezone.now()
    return {
        "expired": remember(key="expired", content="Old sprint goal",
                            expires_at=now - timedelta(hours=1)),
        "in_6h": remember(key="in_6h", content="Standup moved to 3pm",
                          expires_at=now + timedelta(hours=6)),
        "in_3d": remember(key="in_3d", content="Conference next week",
                          expires_at=now + timedelta(days=3)),
        "in_30d": remember(key="in_30d", content="Quarter plan",
                           expires_at=now + timedelta(days=30)),
        "never": remember(key="never", content="Name is Alice"),
    }


def _keys(response):
    return [memory["key"] for memory in response.json()["results"]]


def test_expired_memory_leaves_recall_but_stays_listable(agent, timeline):
    recall = agent.get("/memory/recall").content.decode()
    assert "Old sprint goal" not in recall and "Standup moved to 3pm" in recall
    assert "expired" in [m["key"] for m in agent.get("/memory?limit=500").json()["results"]]
    assert agent.get(f"/memory/{timeline['expired'].id}").status_code == 200
    assert Memory.objects.filter(pk=timeline["expired"].id).exists()


@pytest.mark.parametrize("within, expected", [
    ("12h", ["in_6h"]), ("7d", ["in_6h", "in_3d"]), ("604800", ["in_6h", "in_3d"]),
    ("60d", ["in_6h", "in_3d", "in_30d"]), ("30m", []),
])
def test_expiring_lists_what_expires_within_the_window_soonest_first(agent, timeline, within,
                                                                     expected):
    response = agent.get(f"/memory/expiring?within={within}")
    assert response.status_code == 200
    assert _keys(response) == expected
    assert response.json()["count"] == len(expected)


def test_expiring_reports_the_window_in_seconds(agent, timeline):
    assert agent.get("/memory/expiring?within=7d").json()["within"] == 604800


def test_expiring_without_a_window_looks_seven_days_ahead(agent, timeline):
    response = agent.get("/memory/expiring")
    assert response.status_code == 200
    assert _keys(response) == ["in_6h", "in_3d"]
    assert response.json()["within"] == 7 * 24 * 3600


def test_the_default_window_ends_at_seven_days(agent, remember):
    now = timezone.now()
    remember(key="inside", expires_at=now + timedelta(days=7, minutes=-5))
    remember(key="outside", expires_at=now + timedelta(days=7, minutes=5))
    assert _keys(agent.get("/memory/expiring")) == ["inside"]


@pytest.mark.parametrize("query", ["?within=", "?within=soon", "?within=7y", "?within=-5",
                                   "?within=7d&sort=key"])
def test_expiring_with_bad_window_is_400(agent, query):
    response = agent.get(f"/memory/expiring{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_expiring_leaves_out_deleted_memories_and_other_minds(agent, bob_agent, timeline):
    agent.delete(f"/memory/{timeline['in_6h'].id}")
    assert _keys(agent.get("/memory/expiring?within=7d")) == ["in_3d"]
    assert _keys(bob_agent.get("/memory/expiring?within=60d")) == []
