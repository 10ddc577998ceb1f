"""memories/stats.py: mind_stats counts one mind's memories, every group with its zeros."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Category, Priority, Source
from memories.services import memory_delete, memory_purge_trash, memory_set_verified
from memories.stats import mind_stats

pytestmark = pytest.mark.django_db


def test_a_mind_without_memories_counts_zero_in_every_group(alice_mind):
    stats = mind_stats(mind=alice_mind)
    assert (stats["total"], stats["verified"], stats["unverified"], stats["expired"],
            stats["in_trash"], stats["superseded"], stats["purged"]) == (0, 0, 0, 0, 0, 0, 0)
    assert set(stats["by_category"]) == set(Category.values)
    assert set(stats["by_priority"]) == set(Priority.values)
    assert set(stats["by_source"]) == set(Source.values)
    assert not any(stats["by_category"].values())


def test_counts_follow_verification_expiry_the_trash_and_purges(alice_mind, alice, remember,
                                                                bob_mind, bob):
    kept = remember(key="a", category="project", priority="critical")
    memory_set_verified(memory=kept, user=alice, verified=True)
    remember(key="b", category="project")
    remember(key="c", expires_at=timezone.now() - timedelta(days=1))
    memory_delete(memory=remember(key="e"), actor=alice)
    memory_purge_trash(older_than=timezone.now())  # e leaves a tombstone
    memory_delete(memory=remember(key="d"), actor=alice)  # d stays in the trash
    remember(mind=bob_mind, actor=bob, key="bobs")  # another mind counts nothing here

    stats = mind_stats(mind=alice_mind)
    assert (stats["total"], stats["verified"], stats["unverified"]) == (3, 1, 2)
    assert stats["expired"] == 1
    assert (stats["in_trash"], stats["purged"]) == (1, 1)
    assert stats["by_category"]["project"] == 2 and stats["by_category"]["fact"] == 1
    assert stats["by_priority"]["critical"] == 1
    assert stats["by_source"]["agent"] == 3 and stats["by_source"]["user"] == 0
