"""Serializers of search, by tag, related memories and embeddings (parameters and answers)."""

from rest_framework import serializers

from memories.api.serializers.memory import (
    MAX_TAG_LENGTH,
    EmbeddingStatusSerializer,
    MemorySerializer,
    PlaceFilters,
)
from memories.models import Category
from synapse.api import PageQuery, PageSerializer, StrictSerializer

MAX_QUERY_LENGTH = 1000
MAX_LIMIT = 100


class SearchFiltersSerializer(PlaceFilters):
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH, required=False)
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=20)
    include_expired = serializers.BooleanField(required=False, default=False)


class SearchQuerySerializer(SearchFiltersSerializer):
    q = serializers.CharField(max_length=MAX_QUERY_LENGTH,
                              help_text="Words are ANDed; \"exact phrase\", prefix*, a OR b, "
                                        "-excluded. See docs/search.md.")
    mode = serializers.ChoiceField(choices=["keyword", "semantic", "hybrid"], default="keyword")
    explain = serializers.BooleanField(
        default=False, help_text="Add each hit's share of its score: keyword, semantic, "
                                 "neighbour and rerank in hybrid mode (docs/search.md).")


class SemanticSearchQuerySerializer(SearchFiltersSerializer):
    q = serializers.CharField(max_length=MAX_QUERY_LENGTH)
    threshold = serializers.FloatField(min_value=-1.0, max_value=1.0, required=False,
                                       help_text="Minimum cosine similarity (-1 … 1).")


class ByTagQuerySerializer(PageQuery, PlaceFilters):
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH)
    category = serializers.ChoiceField(choices=Category.choices, required=False)


class RelatedQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=10)


class SearchHitSerializer(MemorySerializer):
    score = serializers.FloatField()
    snippet = serializers.CharField(allow_null=True,
                                    help_text="HTML-safe; matched words in <mark>.")
    explain = serializers.DictField(
        child=serializers.FloatField(), required=False,
        help_text="With explain=true: the parts that add up to the score (keyword, semantic, "
                  "neighbour, rerank in hybrid mode; the one side's score otherwise).")
    matched_all = serializers.BooleanField(
        allow_null=True,
        help_text="Keyword and hybrid mode: whether this memory holds every word of the query "
                  "(keyword mode lists those first, then memories holding some of the words); "
                  "null in semantic mode.")

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "score", "snippet", "matched_all", "explain"]

    def to_representation(self, hit) -> dict:
        """DRF's answer, built directly (as MemorySerializer's; a test holds them equal):
        DRF's way took longer than the search's snippets on a page of 20 hits."""
        data = self.memory_fields(hit)
        data["score"] = float(hit.score)
        data["snippet"] = None if hit.snippet is None else str(hit.snippet)
        matched_all = getattr(hit, "matched_all", None)
        data["matched_all"] = None if matched_all is None else bool(matched_all)
        explain = getattr(hit, "explain", None)
        if explain is not None:
            data["explain"] = {str(name): None if value is None else float(value)
                               for name, value in explain.items()}
        return data


class SearchResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    matched = serializers.ChoiceField(
        choices=["all", "some", "none"],
        help_text="all: the first result holds every word (keyword mode fills the page with "
                  "memories holding some of the words after those holding all: see each "
                  "result's matched_all); some: no memory held every word, so memories with "
                  "some of them are ranked (natural-language fallback); none: no result.")
    ignored_terms = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()
    results = SearchHitSerializer(many=True)


class ByTagResponseSerializer(PageSerializer):
    tag = serializers.CharField()
    results = MemorySerializer(many=True)


class RelatedHitSerializer(MemorySerializer):
    score = serializers.FloatField()
    shared_tags = serializers.ListField(child=serializers.CharField())
    similarity = serializers.FloatField(allow_null=True)

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "score", "shared_tags", "similarity"]

    def to_representation(self, hit) -> dict:
        """DRF's answer, built directly (as SearchHitSerializer's)."""
        data = self.memory_fields(hit)
        data["score"] = float(hit.score)
        data["shared_tags"] = [str(tag) for tag in hit.shared_tags]
        data["similarity"] = None if hit.similarity is None else float(hit.similarity)
        return data


class RelatedResponseSerializer(serializers.Serializer):
    id = serializers.CharField()
    count = serializers.IntegerField()
    results = RelatedHitSerializer(many=True)


class EmbedBatchSerializer(StrictSerializer):
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


class EmbedBatchResponseSerializer(EmbeddingStatusSerializer):
    embedded = serializers.IntegerField()


def search_hits(loaded, parts: dict[str, dict[str, float]] | None = None,
                all_words: set[str] | None = None) -> list[dict]:
    """``(hit, score, snippet)`` triples (memories.search.load_hits) as the answer lists
    them; with ``parts`` (explain=true), each hit's parts of its score; with ``all_words``
    (keyword and hybrid mode), whether each holds every word of the query."""
    rows = []
    for memory, score, snippet in loaded:
        memory.score, memory.snippet = round(score, 6), snippet
        memory.matched_all = None if all_words is None else memory.id in all_words
        if parts is not None:
            memory.explain = {name: round(value, 6)
                              for name, value in parts.get(memory.id, {}).items()}
        rows.append(memory)
    return SearchHitSerializer(rows, many=True).data
