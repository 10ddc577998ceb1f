"""Episode contexts (memories.context): what they hold, and that they follow every change of
a timeline — added, edited, moved, trashed, restored, purged — through the queue the
worker empties; and what hybrid search makes of them (memories.search, memories.ranking)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from memories.context import CONTEXT_WINDOW, context_pending, rebuild_all_contexts
from memories.models import ContextQueue, Memory
from memories.query import words_query
from memories.search import keyword_search
from memories.services import memory_bulk_delete, memory_delete, memory_restore, memory_update

pytestmark = pytest.mark.django_db

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


@pytest.fixture
def talk(remember):
    """Eight turns of one conversation at one moment (write order breaks the ties), each
    with one word of its own."""
    return [remember(category="context", key=f"turn_{number}", memory_type="episodic",
                     path="talks/one", occurred_at=T0, content=f"Speaker: {word}")
            for number, word in enumerate(WORDS)]


def context_words(memory: Memory) -> set[str]:
    """The lexemes of a memory's context, as stored."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(array_agg(lexeme), '{}') FROM memories_memory, "
                       "unnest(context_vector) WHERE id = %s", [memory.id])
        return set(cursor.fetchone()[0])


def built(memory: Memory) -> Memory:
    rebuild_all_contexts()
    return Memory.objects.get(pk=memory.pk)


def test_an_episode_holds_the_words_of_two_turns_each_side_and_its_date(talk):
    assert context_pending() > 0
    middle = built(talk[3])
    assert context_pending() == 0
    assert middle.context_ids == [memory.id for memory in talk[1:6]]
    words = context_words(middle)
    assert {"bravo", "charli", "echo", "foxtrot"} <= words  # English stems
    assert "delta" not in words  # its own words stay in its own document
    assert not {"alpha", "golf", "hotel"} & words  # beyond the window
    assert {"8", "may", "2023", "monday", "speaker"} <= words
    first = built(talk[0])
    assert first.context_ids == [memory.id for memory in talk[:3]]
    assert CONTEXT_WINDOW == 2


def test_plain_memories_have_no_context(remember):
    fact = remember(category="fact", key="plain", content="Not an episode")
    assert ContextQueue.objects.filter(memory_id=fact.id).count() == 0
    fact = built(fact)
    assert fact.context_vector is None and fact.context_ids == []


def test_a_turn_added_between_two_rebuilds_the_turns_around_it(talk, remember):
    rebuild_all_contexts()
    late = remember(category="context", key="late", memory_type="episodic", path="talks/one",
                    occurred_at=T0 - timedelta(seconds=1), content="Speaker: zulu")
    queued = set(ContextQueue.objects.values_list("memory_id", flat=True))
    assert queued == {late.id, talk[0].id, talk[1].id}
    assert "zulu" in context_words(built(talk[0])) and "zulu" in context_words(built(talk[1]))
    assert "zulu" not in context_words(built(talk[2]))  # three turns away
    assert built(talk[1]).context_ids == [late.id, *(memory.id for memory in talk[:4])]


def test_an_edit_reaches_the_neighbours_contexts(talk, alice_key):
    from minds.authentication import AgentPrincipal

    rebuild_all_contexts()
    memory_update(memory=talk[4], actor=AgentPrincipal(key=alice_key[0]),
                  content="Speaker: yankee")
    for neighbour in (talk[2], talk[3], talk[5], talk[6]):
        words = context_words(built(neighbour))
        assert "yanke" in words and "echo" not in words, neighbour.key


def test_trash_restore_and_purge_leave_and_rejoin_the_timeline(talk, alice_key):
    from minds.authentication import AgentPrincipal

    actor = AgentPrincipal(key=alice_key[0])
    rebuild_all_contexts()
    memory_delete(memory=talk[3], actor=actor)
    assert built(talk[3]).context_ids == []
    assert built(talk[2]).context_ids == [talk[i].id for i in (0, 1, 2, 4, 5)]
    memory_restore(memory=Memory.objects.get(pk=talk[3].pk), actor=actor)
    assert built(talk[2]).context_ids == [memory.id for memory in talk[:5]]
    assert "delta" in context_words(built(talk[2]))
    memory_bulk_delete(mind=talk[0].mind, actor=actor, ids=[talk[3].id])
    Memory.objects.filter(pk=talk[3].pk).delete()  # purged
    assert "delta" not in context_words(built(talk[2]))
    assert built(talk[4]).context_ids == [talk[i].id for i in (1, 2, 4, 5, 6)]


def test_a_turn_moved_to_another_path_leaves_one_timeline_and_joins_the_other(talk, remember):
    other = remember(category="context", key="elsewhere", memory_type="episodic",
                     path="talks/two", occurred_at=T0, content="Speaker: kilo")
    rebuild_all_contexts()
    Memory.objects.filter(pk=talk[5].pk).update(path="talks/two")  # raw SQL too
    assert "foxtrot" not in context_words(built(talk[4]))
    assert "foxtrot" in context_words(built(other))
    assert built(other).context_ids == [talk[5].id, other.id]  # written first: first


def test_credentials_never_lend_their_words(talk, remember):
    secret = remember(category="credentials", key="token", memory_type="episodic",
                      path="talks/one", occurred_at=T0 + timedelta(hours=1),
                      content="sk-live-hunter2")
    words = context_words(built(talk[7]))
    assert secret.id in built(talk[7]).context_ids
    assert not any("hunter" in word or word == "sk" for word in words)
    assert built(secret).context_vector is None


def test_the_queue_takes_repeats_and_the_worker_empties_it(talk, remember):
    """The queue has no unique index — writers queueing the same neighbour both append, so
    none waits on another's insert — and one rebuild serves every repeat."""
    rebuild_all_contexts()
    for number in range(3):
        remember(category="context", key=f"burst_{number}", memory_type="episodic",
                 path="talks/one", occurred_at=T0 + timedelta(minutes=1),
                 content=f"Speaker: again {number}")
    repeats = ContextQueue.objects.filter(memory_id=talk[7].id).count()
    assert repeats == 2  # the first two bursts are within two turns of it
    queued = context_pending()
    assert rebuild_all_contexts() == queued and context_pending() == 0
    assert {"0", "1"} <= context_words(Memory.objects.get(pk=talk[7].pk))


# -- Search --------------------------------------------------------------------------------

def search(client, query: str, mode: str, **extra):
    response = client.get("/memory/search", {"q": query, "mode": mode, **extra})
    assert response.status_code == 200, response.content
    return response.json()


def test_hybrid_finds_a_turn_by_its_neighbours_words_keyword_mode_does_not(agent, talk):
    rebuild_all_contexts()
    # "delta" is turn 3's own word; turns 1-5 carry it in their contexts.
    keyword = [hit["key"] for hit in search(agent, "delta", "keyword")["results"]]
    assert keyword == ["turn_3"]
    hybrid = [hit["key"] for hit in search(agent, "delta", "hybrid", limit=8)["results"]]
    assert hybrid[0] == "turn_3"
    assert set(hybrid[1:5]) == {"turn_1", "turn_2", "turn_4", "turn_5"}


def test_explain_names_each_part_of_a_hybrid_score(agent, talk):
    rebuild_all_contexts()
    body = search(agent, "delta", "hybrid", explain="true", limit=3)
    for hit in body["results"]:
        parts = hit["explain"]
        assert set(parts) == {"keyword", "semantic", "neighbour", "rerank"}
        assert sum(parts.values()) == pytest.approx(hit["score"], abs=1e-5)
    assert body["results"][0]["explain"]["keyword"] > body["results"][1]["explain"]["keyword"]
    assert "explain" not in search(agent, "delta", "hybrid")["results"][0]
    keyword = search(agent, "delta", "keyword", explain="true")["results"][0]
    assert set(keyword["explain"]) == {"keyword"}


def test_a_memory_without_a_context_ranks_by_its_own_document_alone(alice_mind, remember):
    # Hybrid search's keyword side reads a memory's document joined to its context; a
    # memory without one (every one here: no episodes) must rank exactly as by its own
    # document: same rows, same counts, same scores as with contexts left out.
    for number, (key, content, tags) in enumerate([
            ("garden_plan", "Plant tomatoes and basil in the garden in May", ["garden"]),
            ("garden_tools", "The garden shed holds a spade and a rake", []),
            ("basil_recipe", "Pesto: basil, pine nuts, garlic, parmesan", ["recipe"]),
            ("tomato_note", "Tomatoes need sun; the garden's south bed gets most", []),
            ("unrelated", "The car's tyres are changed in October", [])]):
        remember(key=key, content=content, tags=tags, priority=["high", "normal"][number % 2])
    memories = Memory.objects.for_mind(alice_mind).current()
    assert not memories.filter(context_vector__isnull=False).exists()
    for text in ("garden", "garden basil", "tomatoes garden sun", "basil"):
        with_contexts = keyword_search(memories, words_query(text), limit=10, partial=True,
                                       context=True)
        alone = keyword_search(memories, words_query(text), limit=10, partial=True)
        assert with_contexts.hits and with_contexts.hits == alone.hits


def test_a_context_of_long_messages_lends_no_words(remember):
    """A project chat's neighbours (long messages) drown a turn's own words: an episode
    whose context holds more than CONTEXT_MAX_LEXEMES is ranked on its own document."""
    from memories.search import CONTEXT_MAX_LEXEMES

    long = " ".join(f"term{number}" for number in range(CONTEXT_MAX_LEXEMES))
    turns = [remember(category="context", key=f"m{number}", memory_type="episodic",
                      path="chats/one", occurred_at=T0 + timedelta(minutes=number),
                      content=f"zulu {long}" if number == 1 else f"Short reply {number}")
             for number in range(3)]
    rebuild_all_contexts()
    memories = Memory.objects.for_mind(turns[0].mind).current()
    found = keyword_search(memories, words_query("zulu"), limit=5, context=True)
    assert [hit for hit, _ in found.hits] == [turns[1].id]  # not its neighbours
    # Short neighbours still lend their words.
    short = [remember(category="context", key=f"s{number}", memory_type="episodic",
                      path="chats/two", occurred_at=T0 + timedelta(minutes=number),
                      content="yankee" if number == 0 else f"Short reply {number}")
             for number in range(2)]
    rebuild_all_contexts()
    found = keyword_search(memories, words_query("yankee"), limit=5, context=True)
    assert {hit for hit, _ in found.hits} == {short[0].id, short[1].id}
