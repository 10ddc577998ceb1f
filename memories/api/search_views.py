"""Search and embedding routes (SPEC §4 "Search", "Bulk and embeddings"): keyword,
semantic and hybrid search, by tag, related memories, embed-batch and its status."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from memories import search
from memories.api.serializers import MAX_TAG_LENGTH, MemorySerializer
from memories.api.views import ERRORS, MemoryScopedView
from memories.embeddings import embed_batch, embed_query, embedding_status
from memories.models import Category
from synapse.api import MIND_PARAMETER, StrictSerializer

MAX_QUERY_LENGTH = 1000
MAX_LIMIT = 100


# -- Parameters and answers ----------------------------------------------------------------

class SearchFiltersSerializer(serializers.Serializer):
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH, required=False)
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=20)
    include_expired = serializers.BooleanField(required=False, default=False)


class SearchQuerySerializer(SearchFiltersSerializer):
    q = serializers.CharField(max_length=MAX_QUERY_LENGTH,
                              help_text="Words are ANDed; \"exact phrase\", prefix*, a OR b, "
                                        "-excluded. See docs/search.md.")
    mode = serializers.ChoiceField(choices=["keyword", "semantic", "hybrid"], default="keyword")


class SemanticSearchQuerySerializer(SearchFiltersSerializer):
    q = serializers.CharField(max_length=MAX_QUERY_LENGTH)
    threshold = serializers.FloatField(min_value=-1.0, max_value=1.0, required=False,
                                       help_text="Minimum cosine similarity (-1 … 1).")


class ByTagQuerySerializer(serializers.Serializer):
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH)
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=10_000_000, default=0)


class RelatedQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=10)


class SearchHitSerializer(MemorySerializer):
    score = serializers.FloatField()
    snippet = serializers.CharField(allow_null=True,
                                    help_text="HTML-safe; matched words in <mark>.")

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "score", "snippet"]


class SearchResponseSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    matched = serializers.ChoiceField(
        choices=["all", "some", "none"],
        help_text="all: every word matched; some: no memory held every word, so memories "
                  "with some of them are ranked (natural-language fallback).")
    ignored_terms = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()
    results = SearchHitSerializer(many=True)


class ByTagResponseSerializer(serializers.Serializer):
    tag = serializers.CharField()
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = MemorySerializer(many=True)


class RelatedHitSerializer(MemorySerializer):
    score = serializers.FloatField()
    shared_tags = serializers.ListField(child=serializers.CharField())
    similarity = serializers.FloatField(allow_null=True)

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "score", "shared_tags", "similarity"]


class RelatedResponseSerializer(serializers.Serializer):
    id = serializers.CharField()
    count = serializers.IntegerField()
    results = RelatedHitSerializer(many=True)


class EmbedBatchSerializer(StrictSerializer):
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


class EmbeddingStatusSerializer(serializers.Serializer):
    model = serializers.CharField()
    dimensions = serializers.IntegerField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    pending = serializers.IntegerField()
    running = serializers.BooleanField()
    loaded_in_this_process = serializers.BooleanField()


class EmbedBatchResponseSerializer(EmbeddingStatusSerializer):
    embedded = serializers.IntegerField()


def _hits(loaded) -> list[dict]:
    rows = []
    for memory, score, snippet in loaded:
        memory.score, memory.snippet = round(score, 6), snippet
        rows.append(memory)
    return SearchHitSerializer(rows, many=True).data


# -- Views ---------------------------------------------------------------------------------

class SearchScopedView(MemoryScopedView):
    throttle_scope = "search"  # mode=semantic|hybrid counts as "semantic" (synapse.throttling)

    def searchable(self, query: dict):
        """Current memories of this mind, filtered by tag, category and expiry."""
        memories = self.memories().current()
        if query.get("tag"):
            memories = memories.filter(tags__contains=[query["tag"].strip().lower()])
        if query.get("category"):
            memories = memories.filter(category=query["category"])
        if not query.get("include_expired"):
            memories = memories.unexpired()
        return memories


class SearchView(SearchScopedView):
    query_serializer = SearchQuerySerializer

    @extend_schema(operation_id="memory_search", parameters=[MIND_PARAMETER,
                                                             SearchQuerySerializer],
                   responses={200: SearchResponseSerializer, **ERRORS}, tags=["search"])
    def get(self, request):
        """Full-text search (default), or by meaning (mode=semantic), or both fused
        (mode=hybrid). Malformed syntax is a 400 saying what is wrong."""
        query = self.query
        text, mode, limit = query["q"], query["mode"], query["limit"]
        memories = self.searchable(query)
        matched, ignored = "all", []
        if mode == "semantic":
            hits = search.semantic_search(memories, embed_query(text), limit=limit)
        else:
            try:
                parsed = search.parse_query(text)
            except search.QuerySyntaxError as error:
                raise exceptions.ValidationError({"q": [str(error)]}) from error
            if mode == "hybrid":
                result = search.hybrid_search(memories, text, limit=limit, parsed=parsed)
            else:
                result = search.keyword_search(memories, parsed, limit=limit)
            hits, matched, ignored = result.hits, result.matched, result.ignored_terms
        if not hits:
            matched = "none"
        results = _hits(search.load_hits(hits, text))
        return Response({"query": text, "mode": mode, "matched": matched,
                         "ignored_terms": ignored, "count": len(results), "results": results})


class SemanticSearchView(SearchScopedView):
    throttle_scope = "semantic"
    query_serializer = SemanticSearchQuerySerializer

    @extend_schema(operation_id="memory_semantic_search",
                   parameters=[MIND_PARAMETER, SemanticSearchQuerySerializer],
                   responses={200: SearchResponseSerializer, **ERRORS}, tags=["search"])
    def get(self, request):
        """Memories nearest in meaning to ``q`` (local embeddings); score = cosine
        similarity. Memories not embedded yet are not found (see embed-batch-status)."""
        query = self.query
        hits = search.semantic_search(self.searchable(query), embed_query(query["q"]),
                                      limit=query["limit"], threshold=query.get("threshold"))
        results = _hits(search.load_hits(hits, query["q"]))
        return Response({"query": query["q"], "mode": "semantic",
                         "matched": "all" if results else "none", "ignored_terms": [],
                         "count": len(results), "results": results})


class ByTagView(SearchScopedView):
    query_serializer = ByTagQuerySerializer

    @extend_schema(operation_id="memory_by_tag", parameters=[MIND_PARAMETER,
                                                             ByTagQuerySerializer],
                   responses={200: ByTagResponseSerializer, **ERRORS}, tags=["search"])
    def get(self, request):
        """Current, unexpired memories carrying a tag, in recall order."""
        query = self.query
        tag = query["tag"].strip().lower()
        memories = self.memories().in_recall().filter(tags__contains=[tag])
        if query.get("category"):
            memories = memories.filter(category=query["category"])
        limit, offset = query["limit"], query["offset"]
        page = list(memories.recall_order().defer("search_vector", "embedding")
                    [offset:offset + limit])
        count = memories.count() if len(page) == limit or offset else len(page)
        return Response({"tag": tag, "count": count, "limit": limit, "offset": offset,
                         "results": MemorySerializer(page, many=True).data})


class RelatedView(SearchScopedView):
    query_serializer = RelatedQuerySerializer

    @extend_schema(operation_id="memory_related", parameters=[MIND_PARAMETER,
                                                              RelatedQuerySerializer],
                   responses={200: RelatedResponseSerializer, **ERRORS}, tags=["search"])
    def get(self, request, memory_id: str):
        """Memories sharing tags with this one, or nearest to it in meaning; each listed
        once, the memory itself never."""
        memory = self.get_memory(memory_id)
        candidates = self.memories().in_recall().exclude(pk=memory.pk)
        related = search.related_memories(memory, candidates, limit=self.query["limit"])
        rows = []
        for hit in related:
            hit.memory.score = round(hit.score, 6)
            hit.memory.shared_tags = hit.shared_tags
            hit.memory.similarity = (None if hit.similarity is None
                                     else round(hit.similarity, 6))
            rows.append(hit.memory)
        return Response({"id": memory.id, "count": len(rows),
                         "results": RelatedHitSerializer(rows, many=True).data})


@extend_schema_view(get=extend_schema(operation_id="memory_related_alias"))
class RelatedAliasView(RelatedView):
    """`/memory/{id}/related`: the same answer as `/memory/related/{id}`."""


class EmbedBatchView(MemoryScopedView):
    @extend_schema(operation_id="memory_embed_batch", parameters=[MIND_PARAMETER],
                   request=EmbedBatchSerializer,
                   responses={200: EmbedBatchResponseSerializer, **ERRORS}, tags=["embeddings"])
    def post(self, request):
        """Embed up to ``limit`` of this mind's memories that have no current embedding,
        now, in this request (the worker does the same in the background)."""
        serializer = EmbedBatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind = self.get_mind()
        embedded = embed_batch(limit=serializer.validated_data["limit"], mind=mind)
        return Response({"embedded": embedded, **embedding_status(mind=mind)})


class EmbedBatchStatusView(MemoryScopedView):
    @extend_schema(operation_id="memory_embed_batch_status", parameters=[MIND_PARAMETER],
                   responses={200: EmbeddingStatusSerializer, **ERRORS}, tags=["embeddings"])
    def get(self, request):
        """This mind's embedding totals: done, pending, the model, and whether a worker
        is running."""
        return Response(embedding_status(mind=self.get_mind()))
