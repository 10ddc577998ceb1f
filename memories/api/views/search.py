"""Search and embedding actions: keyword, semantic and hybrid search, by tag, related
memories, embed-batch and its status."""

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from memories import embeddings, search
from memories.api.schema import ERRORS
from memories.api.serializers.memory import MemorySerializer
from memories.api.serializers.search import (
    ByTagQuerySerializer,
    ByTagResponseSerializer,
    EmbedBatchResponseSerializer,
    EmbedBatchSerializer,
    EmbeddingStatusSerializer,
    RelatedHitSerializer,
    RelatedQuerySerializer,
    RelatedResponseSerializer,
    SearchQuerySerializer,
    SearchResponseSerializer,
    SemanticSearchQuerySerializer,
    search_hits,
)
from memories.query import QuerySyntaxError, parse_query, question_query
from synapse.api import MIND_PARAMETER, page_of
from synapse.replicas import replica_reads

RELATED_SCHEMA = {"parameters": [MIND_PARAMETER, RelatedQuerySerializer],
                  "responses": {200: RelatedResponseSerializer, **ERRORS}, "tags": ["search"]}


class SearchActions:
    """search, semantic-search, by-tag, related (and its alias), embed-batch(-status)."""

    def searchable(self):
        """Current memories of this mind, filtered by tag, category and expiry."""
        return self.filter_queryset(self.get_queryset().current())

    @extend_schema(operation_id="memory_search", parameters=[MIND_PARAMETER,
                                                             SearchQuerySerializer],
                   responses={200: SearchResponseSerializer, **ERRORS}, tags=["search"])
    # mode=semantic|hybrid counts as "semantic" (synapse.throttling).
    @action(detail=False, methods=["get"], query_serializer=SearchQuerySerializer,
            throttle_scope="search")
    @replica_reads
    def search(self, request):
        """Full-text search (default), or by meaning (mode=semantic), or both fused
        (mode=hybrid). Malformed syntax is a 400 saying what is wrong in keyword mode;
        hybrid mode reads it as plain words."""
        query = self.query
        text, mode, limit = query["q"], query["mode"], query["limit"]
        memories, config = self.searchable(), self.mind.search_config
        matched, ignored, parts, all_words = "all", [], None, None
        if mode == "semantic":
            hits = search.semantic_search(memories, search.query_vector(text), limit=limit)
            parts = {memory_id: {"semantic": score} for memory_id, score in hits}
        else:
            try:
                # Hybrid mode is never refused: syntax that does not parse is plain words.
                parsed = (question_query if mode == "hybrid" else parse_query)(text, config)
            except QuerySyntaxError as error:
                raise exceptions.ValidationError({"q": [str(error)]}) from error
            if mode == "hybrid":
                result = search.hybrid_search(memories, text, limit=limit, parsed=parsed,
                                              config=config)
            else:
                result = search.keyword_search(memories, parsed, limit=limit)
            hits, matched, ignored = result.hits, result.matched, result.ignored_terms
            all_words = result.all_words
            parts = result.parts or {memory_id: {"keyword": score} for memory_id, score in hits}
        if not hits:
            matched = "none"
        results = search_hits(search.load_hits(self.mind.pk, hits, text, config),
                              parts if query["explain"] else None, all_words)
        return Response({"query": text, "mode": mode, "matched": matched,
                         "ignored_terms": ignored, "count": len(results), "results": results})

    @extend_schema(operation_id="memory_semantic_search",
                   parameters=[MIND_PARAMETER, SemanticSearchQuerySerializer],
                   responses={200: SearchResponseSerializer, **ERRORS}, tags=["search"])
    @action(detail=False, methods=["get"], url_path="semantic-search",
            query_serializer=SemanticSearchQuerySerializer, throttle_scope="semantic")
    @replica_reads
    def semantic_search(self, request):
        """Memories nearest in meaning to ``q`` (local embeddings); score = cosine
        similarity. A memory written through the API is found at once; one written by
        sync or import once the worker has embedded it (see embed-batch-status)."""
        query = self.query
        hits = search.semantic_search(self.searchable(), search.query_vector(query["q"]),
                                      limit=query["limit"], threshold=query.get("threshold"))
        results = search_hits(search.load_hits(self.mind.pk, hits, query["q"],
                                               self.mind.search_config))
        return Response({"query": query["q"], "mode": "semantic",
                         "matched": "all" if results else "none", "ignored_terms": [],
                         "count": len(results), "results": results})

    @extend_schema(operation_id="memory_by_tag", parameters=[MIND_PARAMETER,
                                                             ByTagQuerySerializer],
                   responses={200: ByTagResponseSerializer, **ERRORS}, tags=["search"])
    @action(detail=False, methods=["get"], url_path="by-tag",
            query_serializer=ByTagQuerySerializer, throttle_scope="search")
    def by_tag(self, request):
        """Current, unexpired memories carrying a tag, in recall order."""
        memories = self.filter_queryset(self.get_queryset().in_recall())
        page, counts = page_of(memories.recall_order().without_vectors(), self.query)
        return Response({"tag": self.query["tag"].strip().lower(), **counts,
                         "results": MemorySerializer(page, many=True).data})

    @extend_schema(operation_id="memory_related", **RELATED_SCHEMA)
    @action(detail=False, methods=["get"], url_path="related/<memory_id:memory_id>",
            query_serializer=RelatedQuerySerializer, throttle_scope="search")
    def related(self, request, memory_id: str):
        """Memories sharing tags with this one, or nearest to it in meaning; each listed
        once, the memory itself never."""
        memory = self.get_object()
        candidates = self.get_queryset().in_recall().exclude(pk=memory.pk)
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

    @extend_schema(operation_id="memory_related_alias", **RELATED_SCHEMA)
    def related_alias(self, request, memory_id: str):
        """Memories sharing tags with this one, or nearest to it in meaning; each listed
        once, the memory itself never."""
        return self.related(request, memory_id)

    @extend_schema(operation_id="memory_embed_batch", parameters=[MIND_PARAMETER],
                   request=EmbedBatchSerializer,
                   responses={200: EmbedBatchResponseSerializer, **ERRORS}, tags=["embeddings"])
    @action(detail=False, methods=["post"], url_path="embed-batch")
    def embed_batch(self, request):
        """Embed up to ``limit`` of this mind's memories that have no current embedding,
        now, in this request (the worker does the same in the background)."""
        serializer = EmbedBatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind = self.mind
        embedded = embeddings.embed_batch(limit=serializer.validated_data["limit"], mind=mind)
        return Response({"embedded": embedded, **embeddings.embedding_status(mind=mind)})

    @extend_schema(operation_id="memory_embed_batch_status", parameters=[MIND_PARAMETER],
                   responses={200: EmbeddingStatusSerializer, **ERRORS}, tags=["embeddings"])
    @action(detail=False, methods=["get"], url_path="embed-batch-status")
    def embed_batch_status(self, request):
        """This mind's embedding totals: done, pending, the model, and whether a worker
        is running."""
        return Response(embeddings.embedding_status(mind=self.mind))
