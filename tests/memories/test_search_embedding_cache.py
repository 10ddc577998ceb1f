"""The per-process cache of query embeddings (memories.search.QueryEmbeddingCache)."""

import pytest
from django.test import override_settings

from memories import search
from memories.embeddings import embed_query, get_model


@pytest.fixture(scope="module")
def model():
    return get_model()


def test_a_cached_vector_equals_a_fresh_one(model):
    cache = search.QueryEmbeddingCache(size=4)
    first = cache.get("where does Bruno swim?")
    again = cache.get("where does Bruno swim?")
    assert first == again == embed_query("where does Bruno swim?")
    assert len(cache) == 1


def test_the_cache_keeps_the_most_recently_used_and_no_more(monkeypatch):
    asked = []

    def fake_embed(text):
        asked.append(text)
        return [float(len(asked)), 0.5]

    monkeypatch.setattr(search, "embed_query", fake_embed)
    cache = search.QueryEmbeddingCache(size=2)
    cache.get("a")
    cache.get("b")
    cache.get("a")  # a is now the most recent
    cache.get("c")  # drops b, the least recently used
    assert len(cache) == 2
    assert asked == ["a", "b", "c"]
    assert cache.get("a") == [1.0, 0.5]
    cache.get("b")
    assert asked == ["a", "b", "c", "b"]
    assert len(cache) == 2


def test_the_cache_is_keyed_by_the_model_too(monkeypatch, settings):
    asked = []
    monkeypatch.setattr(search, "embed_query", lambda text: asked.append(text) or [1.0])
    cache = search.QueryEmbeddingCache(size=8)
    cache.get("same words")
    with override_settings(SYNAPSE={**settings.SYNAPSE, "EMBEDDING_MODEL": "another-model"}):
        cache.get("same words")
    cache.get("same words")
    assert asked == ["same words", "same words"]


def test_returned_vectors_are_copies(monkeypatch):
    monkeypatch.setattr(search, "embed_query", lambda text: [1.0, 2.0])
    cache = search.QueryEmbeddingCache(size=2)
    cache.get("q").append(3.0)
    cache.get("q")[0] = 9.0
    assert cache.get("q") == [1.0, 2.0]
