"""MemorySerializer builds its answer directly (the hot routes' serializer): it must be
exactly what DRF's fields give for every kind of memory, key for key and in order."""

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework import serializers

from memories.api.serializers.memory import MemorySerializer
from memories.api.serializers.search import RelatedHitSerializer, SearchHitSerializer
from memories.models import Memory

pytestmark = pytest.mark.django_db


def drf_way(memory: Memory, **context) -> dict:
    return serializers.ModelSerializer.to_representation(
        MemorySerializer(context=context), memory)


@pytest.fixture
def assorted(remember, agent):
    """Memories with every optional field set and unset: verified, expiring, an episode
    at a path, credentials, one in the trash, one superseded by a newer one."""
    plain = remember(key="plain", tags=[])
    rich = remember(key="rich", category="preference", priority="high", tags=["a", "b"],
                    confidence=0.25, path="projects/x",
                    expires_at=datetime.now(UTC) + timedelta(days=3))
    assert agent.post(f"/memory/{rich.id}/verify").status_code in (200, 403)
    Memory.objects.filter(pk=rich.pk).update(verified=True, verified_at=datetime.now(UTC))
    episode = remember(key="met", memory_type="episodic",
                       occurred_at=datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC))
    secret = remember(key="token", category="credentials", content="s3cret")
    trashed = remember(key="gone")
    assert agent.delete(f"/memory/{trashed.id}").status_code == 200
    old = remember(key="old")
    Memory.objects.filter(pk=old.pk).update(superseded_at=datetime.now(UTC),
                                            superseded_by=plain)
    return Memory.objects.filter(pk__in=[m.pk for m in (plain, rich, episode, secret,
                                                        trashed, old)]).order_by("key")


def test_the_direct_answer_is_drf_s_for_every_kind_of_memory(assorted):
    seen = set()
    for memory in assorted:
        for context in ({}, {"reveal_credentials": True}):
            direct = MemorySerializer(memory, context=context).data
            expected = drf_way(memory, **context)
            assert list(direct.items()) == list(expected.items()), memory.key
            seen |= {name for name, value in direct.items() if value not in (None, [], "")}
    # Every field was compared with a value in it at least once.
    assert seen == set(MemorySerializer.Meta.fields)
    listed = MemorySerializer(list(assorted), many=True).data
    assert listed == [drf_way(memory) for memory in assorted]


def test_a_subclass_with_more_fields_keeps_drf_s_way(assorted):
    class Scored(MemorySerializer):
        score = serializers.FloatField()

        class Meta(MemorySerializer.Meta):
            fields = [*MemorySerializer.Meta.fields, "score"]

    memory = assorted.first()
    memory.score = 0.5
    data = Scored(memory).data
    assert data["score"] == 0.5
    assert {name: data[name] for name in MemorySerializer.Meta.fields} == drf_way(memory)


def test_search_and_related_hits_answer_as_drf_s_fields(assorted):
    """The hits of search and related build their answer directly too: the memory's fields,
    then their own, exactly as DRF's fields give them (explain only when asked for)."""
    for position, memory in enumerate(assorted):
        memory.score = 0.25 * position + 0.123456
        memory.snippet = None if position % 2 else f"<mark>{memory.key}</mark>"
        if position % 3 == 0:
            memory.explain = {"keyword": 0.5, "semantic": position / 7}
        memory.shared_tags = ["a", "b"][:position % 3]
        memory.similarity = None if position % 2 else 0.75
        for hit_serializer in (SearchHitSerializer, RelatedHitSerializer):
            direct = hit_serializer(memory).data
            expected = serializers.ModelSerializer.to_representation(hit_serializer(), memory)
            assert list(direct.items()) == list(expected.items()), memory.key
        assert ("explain" in SearchHitSerializer(memory).data) == (position % 3 == 0)


def test_a_memory_row_tuple_answers_as_its_model_does(assorted):
    """List and recall read MemoryRow tuples, not models: the same answer, field for
    field, revealed or not."""
    from memories.models import MemoryRow

    rows = [MemoryRow(*values) for values in assorted.values_list(*MemoryRow._fields)]
    assert [row.id for row in rows] == [memory.id for memory in assorted]
    for row, memory in zip(rows, assorted, strict=True):
        for context in ({}, {"reveal_credentials": True}):
            assert (list(MemorySerializer(row, context=context).data.items())
                    == list(drf_way(memory, **context).items())), memory.key
        assert (row.citation, row.is_credentials) == (memory.citation, memory.is_credentials)
