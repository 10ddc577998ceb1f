"""Episode timelines (memories.timeline): order, ties, pages and neighbours."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.timeline import NotAnEpisode, neighbours, position, timeline, timeline_page
from tests.conftest import planner_without

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def mind(alice_mind):
    return alice_mind


@pytest.fixture
def turns(episode):
    # Written out of order; t3 and t4 share a moment (written t3 first).
    return {key: episode(key, at) for key, at in [
        ("t2", T0 + timedelta(minutes=2)), ("t1", T0 + timedelta(minutes=1)),
        ("t3", T0 + timedelta(minutes=3)), ("t4", T0 + timedelta(minutes=3)),
        ("t5", T0 + timedelta(minutes=5))]}


def keys(memories):
    return [memory.key for memory in memories]


def test_timeline_orders_by_moment_then_write_order(mind, turns):
    assert keys(timeline(mind, "talks/one").timeline_order()) == ["t1", "t2", "t3", "t4", "t5"]


def test_other_paths_and_types_are_not_on_the_timeline(mind, remember, episode, turns):
    episode("elsewhere", T0, path="talks/two")
    episode("below", T0, path="talks/one/sub")
    remember(category="fact", key="fact", content="a fact", path="talks/one")
    assert keys(timeline(mind, "talks/one").timeline_order()) == ["t1", "t2", "t3", "t4", "t5"]


def test_pages_after_and_before_an_episode_and_a_moment(mind, turns):
    memories = timeline(mind, "talks/one")
    first = timeline_page(memories, limit=2)
    assert keys(first.memories) == ["t1", "t2"] and first.has_more
    following = timeline_page(memories, limit=2, after=turns["t3"])
    assert keys(following.memories) == ["t4", "t5"] and not following.has_more
    earlier = timeline_page(memories, limit=2, before=turns["t4"])
    assert keys(earlier.memories) == ["t2", "t3"] and earlier.has_more
    at_moment = timeline_page(memories, limit=10, after=T0 + timedelta(minutes=3))
    assert keys(at_moment.memories) == ["t3", "t4", "t5"]
    before_moment = timeline_page(memories, limit=10, before=T0 + timedelta(minutes=3))
    assert keys(before_moment.memories) == ["t1", "t2"]


def test_neighbours_across_a_tie_in_one_query(mind, turns):
    memory = timeline(mind, "talks/one").get(key="t3")
    with CaptureQueriesContext(connection) as queries:
        before, after = neighbours(memory, 2)
    assert len(queries) == 1
    assert keys(before) == ["t1", "t2"] and keys(after) == ["t4", "t5"]
    before, after = neighbours(timeline(mind, "talks/one").get(key="t4"), 1)
    assert keys(before) == ["t3"] and keys(after) == ["t5"]


def test_neighbours_of_a_memory_that_is_no_episode(remember):
    fact = remember(category="fact", content="a fact")
    with pytest.raises(NotAnEpisode):
        neighbours(fact, 2)


def test_timeline_queries_are_index_range_scans(mind, turns):
    memory = timeline(mind, "talks/one").get(key="t3")
    earlier = timeline_page(timeline(mind, "talks/one"), limit=2, before=memory)
    assert keys(earlier.memories) == ["t1", "t2"]
    # Whether the index can serve the page in order, not which plan the statistics of a
    # busy shared test database favour: every other way is priced out (a plan that needs
    # a sort still shows one, so the test fails without the index).
    with planner_without("enable_seqscan", "enable_bitmapscan", "enable_sort"):
        plan = timeline(mind, "talks/one").filter(
            position("<", memory.occurred_at, memory.seq)).order_by(
            "-occurred_at", "-seq")[:2].explain()
    assert "memory_timeline" in plan and "Sort" not in plan, plan


def test_bulk_written_episodes_of_one_moment_keep_the_order_written(mind):
    from memories.models import Memory

    Memory.objects.bulk_create([
        Memory(mind=mind, category="context", key=f"bulk_{number}", content=f"turn {number}",
               source="agent", confidence=0.7, memory_type="episodic", path="talks/bulk",
               occurred_at=T0) for number in (3, 1, 2)])
    assert keys(timeline(mind, "talks/bulk").timeline_order()) == ["bulk_3", "bulk_1", "bulk_2"]
