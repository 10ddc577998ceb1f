"""A text-search language per mind (memories.text_search, migration 0011): German and French
memories found by their stems with accents ignored, English folding accents too, and a
change of language re-indexing the mind through the worker."""

import pytest
from django.db import connection

from memories.context import rebuild_all_contexts
from memories.models import Memory
from memories.text_search import reindex_memories
from minds.models import SEARCH_LANGUAGES, Mind
from minds.services import mind_update

pytestmark = pytest.mark.django_db


def found(agent, query: str, mode: str = "keyword") -> list[str]:
    response = agent.get("/memory/search", {"q": query, "mode": mode})
    assert response.status_code == 200, response.content
    return [hit["key"] for hit in response.json()["results"]]


def speak(mind: Mind, language: str) -> Mind:
    mind = mind_update(mind=mind, search_language=language)
    while reindex_memories(limit=2):
        pass
    return Mind.objects.get(pk=mind.pk)


def test_every_language_has_its_configuration_and_it_folds_accents():
    with connection.cursor() as cursor:
        cursor.execute("SELECT cfgname FROM pg_ts_config WHERE cfgname LIKE 'synapse%%'")
        made = {row[0] for row in cursor.fetchall()}
        assert made == {f"synapse_{language}" for language in SEARCH_LANGUAGES}
        cursor.execute("SELECT to_tsvector('synapse_simple', 'Crème Brûlée'), "
                       "to_tsvector('synapse_french', 'les éléphants étudient')")
        simple, french = cursor.fetchone()
    assert simple == "'brulee':2 'creme':1"
    assert french == "'eleph':2 'etudient':3 'le':1"  # stemmed, accents gone


def test_german_memories_are_found_by_their_stems_with_accents_ignored(agent, alice_mind,
                                                                      remember):
    speak(alice_mind, "german")
    remember(key="haeuser", content="Die alten Häuser am Fluss wurden renoviert.")
    remember(key="bruecke", content="Über die Brücke fahren täglich viele Autos.")
    assert found(agent, "Haus") == ["haeuser"]  # Häuser → haus
    assert found(agent, "Flüsse") == ["haeuser"]  # Flüsse and Fluss share a stem
    assert found(agent, "Brucke") == ["bruecke"]  # the accent does not matter
    assert found(agent, "fahre taglich") == ["bruecke"]  # fahren → fahr; täglich
    assert Memory.objects.get(key="haeuser").search_config == "synapse_german"


def test_french_memories_are_found_by_their_stems_with_accents_ignored(agent, alice_mind,
                                                                      remember):
    speak(alice_mind, "french")
    remember(key="eleves", content="Les élèves étudiaient la géographie à l'école.")
    remember(key="cafe", content="Un café crème au petit déjeuner.")
    assert found(agent, "élève") == ["eleves"]
    assert found(agent, "eleve") == ["eleves"]
    assert found(agent, "étudier") == ["eleves"]  # étudiaient → etudi
    assert found(agent, "ecole geographie") == ["eleves"]
    assert found(agent, "cafe") == ["cafe"]
    assert found(agent, "dejeuner", mode="hybrid")[0] == "cafe"


def test_english_stays_the_default_and_folds_accents(agent, alice_mind, remember):
    assert alice_mind.search_language == "english"
    remember(key="cv", content="Sent my résumé to the café owners")
    assert found(agent, "resume") == ["cv"]
    assert found(agent, "owner") == ["cv"]  # English stems, as before
    assert Memory.objects.get(key="cv").search_config == "synapse_english"


def test_a_new_language_reindexes_the_mind_through_the_worker(agent, alice_mind, remember,
                                                              bob_mind):
    for number in range(5):
        remember(key=f"row_{number}", content=f"Die Häuser Nummer {number} sind alt.")
    bob_memory = remember(mind=bob_mind, actor=bob_mind.owners().get(), key="theirs",
                          content="Die Häuser sind neu.")
    assert found(agent, "Haus") == []  # stemmed as English: 'hauser'
    mind = mind_update(mind=alice_mind, search_language="german")
    assert mind.reindex_pending
    assert found(agent, "Haus") == []  # not before the worker has moved the rows
    assert reindex_memories(limit=3) == 3
    assert Mind.objects.get(pk=mind.pk).reindex_pending
    assert len(found(agent, "Haus")) == 3  # the lag: each row moves with its batch
    assert reindex_memories(limit=3) == 2
    assert not Mind.objects.get(pk=mind.pk).reindex_pending
    assert len(found(agent, "Haus")) == 5
    assert reindex_memories() == 0
    # Another mind keeps its own language.
    assert Memory.objects.get(pk=bob_memory.pk).search_config == "synapse_english"


def test_an_episode_context_is_stemmed_in_its_minds_language(alice_mind, remember):
    speak(alice_mind, "german")
    turns = [remember(category="context", key=f"turn_{number}", memory_type="episodic",
                      path="talks/one", content=text)
             for number, text in enumerate(["Wir besuchten die Häuser.", "Schön!",
                                            "Und dann?"])]
    rebuild_all_contexts()
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(lexeme) FROM memories_memory, "
                       "unnest(context_vector) WHERE id = %s", [turns[1].id])
        words = set(cursor.fetchone()[0])
    assert "haus" in words and "besucht" in words
    # Switching back re-queues the episodes: their contexts are stemmed the new way.
    speak(Mind.objects.get(pk=alice_mind.pk), "english")
    rebuild_all_contexts()
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(lexeme) FROM memories_memory, "
                       "unnest(context_vector) WHERE id = %s", [turns[1].id])
        assert "hauser" in set(cursor.fetchone()[0])
