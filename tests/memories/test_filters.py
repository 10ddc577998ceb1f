"""memories/filters.py: MemoryFilter applies the filters it is given and skips the rest."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.filters import MemoryFilter
from memories.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(alice_mind, alice, remember):
    remember(key="servers", tags=["infra"], priority="critical")
    remember(key="roadmap", category="project", actor=alice)
    remember(key="old", category="project", expires_at=timezone.now() - timedelta(days=1))
    return Memory.objects.for_mind(alice_mind).current()


def keys(memories) -> list[str]:
    return [memory.key for memory in memories]


@pytest.mark.parametrize("data, expected", [
    ({"category": "project"}, ["old", "roadmap"]),
    ({"tag": " INFRA "}, ["servers"]),
    ({"priority": "critical"}, ["servers"]),
    ({"verified": True}, ["roadmap"]),
    ({"verified": False, "category": "fact"}, ["servers"]),
    ({"include_expired": False}, ["roadmap", "servers"]),
    ({}, ["old", "roadmap", "servers"]),
])
def test_each_filter_given_narrows_and_the_others_are_skipped(corpus, data, expected):
    assert sorted(keys(MemoryFilter(data=data, queryset=corpus).qs)) == expected


def test_ordering_by_priority_means_most_important_first(corpus):
    ordered = MemoryFilter(data={"ordering": "priority"}, queryset=corpus).qs
    assert keys(ordered)[0] == "servers"
    assert keys(MemoryFilter(data={"ordering": "-priority"}, queryset=corpus).qs)[-1] == \
        "servers"

