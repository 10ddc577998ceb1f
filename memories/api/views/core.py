"""Core memory actions: list, store, get, update, delete, recall, health."""

import dataclasses
from itertools import chain

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.response import Response

from memories import recall as recall_module
from memories.api.schema import ERRORS, IDEMPOTENCY_HEADER, PROVENANCE_HEADERS
from memories.api.serializers.lifecycle import VersionDetailSerializer
from memories.api.serializers.memory import (
    HealthSerializer,
    MemoryListQuerySerializer,
    MemoryListSerializer,
    MemorySerializer,
    MemoryStoreSerializer,
    MemoryUpdateSerializer,
    RecallJSONSerializer,
    RecallQuerySerializer,
    RetrieveQuery,
    StoreResponseSerializer,
    stream_recall_json,
)
from memories.models import MemoryRow
from memories.recall import (
    BudgetedScan,
    RecallItem,
    build_recall,
    count_recall,
    read_whole,
    recall_items,
    recall_memories,
    stream_text,
)
from memories.services import (
    IdempotencyConflict,
    MemoryConflict,
    StoreResult,
    memory_delete,
    memory_store,
    memory_store_once,
    memory_update,
)
from synapse.api import MIND_PARAMETER, Conflict, page_of
from synapse.db import reading, streamed
from synapse.replicas import replica_reads

# The filters that narrow a recall to part of the mind (RecallQuerySerializer).
RECALL_FILTERS = {"path", "memory_type", "category", "tag"}


def store_answer(result: StoreResult) -> tuple[int, dict]:
    """The status code and body that answer a store."""
    body = {"id": result.memory.id, "status": result.status, "version": result.memory.version,
            "citation": result.memory.citation}
    return (status.HTTP_201_CREATED if result.status == "stored" else status.HTTP_200_OK, body)


class CoreActions:
    """list, create, retrieve, update, destroy; recall and health."""

    def get_query_serializer_class(self):
        if self.action == "list":
            return MemoryListQuerySerializer
        if self.action == "retrieve":
            return RetrieveQuery
        return super().get_query_serializer_class()

    @extend_schema(operation_id="memory_list", parameters=[MIND_PARAMETER,
                                                           MemoryListQuerySerializer],
                   responses={200: MemoryListSerializer, **ERRORS}, tags=["memory"])
    @replica_reads
    def list(self, request):
        """List memories (current versions, not in the trash), filtered and paginated."""
        memories = self.filter_queryset(self.get_queryset().current())
        page, counts = page_of(memories.values_list(*MemoryRow._fields), self.query)
        return Response({**counts, "results": MemorySerializer(
            [MemoryRow(*values) for values in page], many=True).data})

    @extend_schema(operation_id="memory_store", request=MemoryStoreSerializer,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS, IDEMPOTENCY_HEADER],
                   responses={201: StoreResponseSerializer, 200: StoreResponseSerializer,
                              409: OpenApiResponse(description="Idempotency-Key reused with "
                                                   "another body; key_out_of_scope: a "
                                                   "path-scoped key storing a (category, key) "
                                                   "held outside its paths"), **ERRORS},
                   tags=["memory"])
    def create(self, request):
        """Store a memory, or update the one with the same (category, key). A path-scoped
        Mind Key stores under its first prefix by default; a path outside its prefixes is
        a 403 ``path_out_of_scope``."""
        serializer = MemoryStoreSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        fields = {**data, "expires_given": "expires_at" in data, "provenance": self.provenance}
        mind = self.mind
        idempotency_key = request.headers.get("Idempotency-Key")
        if idempotency_key is None:
            status_code, body = store_answer(memory_store(mind=mind, actor=request.user,
                                                          **fields))
            return Response(body, status=status_code)
        if not 1 <= len(idempotency_key) <= 200:
            raise exceptions.ValidationError(
                {"Idempotency-Key": ["Must be 1 to 200 characters."]})
        try:
            answer = memory_store_once(mind=mind, actor=request.user,
                                       idempotency_key=idempotency_key,
                                       request_body=request.data, answer=store_answer, **fields)
        except IdempotencyConflict as error:
            raise Conflict(str(error)) from error
        response = Response(answer.body, status=answer.status_code)
        if answer.replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    @extend_schema(operation_id="memory_get", parameters=[MIND_PARAMETER, RetrieveQuery],
                   responses={200: PolymorphicProxySerializer(
                       component_name="MemoryOrVersion", resource_type_field_name=None,
                       serializers=[MemorySerializer, VersionDetailSerializer]), **ERRORS},
                   tags=["memory"])
    def retrieve(self, request, memory_id: str):
        """One memory; the owning mind reads credentials content in plaintext here. With
        ``version``, exactly that version instead (the answer of
        GET /memory/{id}/versions/{version}): what a citation ``mem_…@vN`` names."""
        if "version" in self.query:
            return self.version_detail(request, memory_id, self.query["version"])
        memory = self.get_object(vectors=False)
        return Response(MemorySerializer(memory, context={"reveal_credentials": True}).data)

    @extend_schema(operation_id="memory_update", request=MemoryUpdateSerializer,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: MemorySerializer,
                              409: OpenApiResponse(description="(category, key) taken"),
                              **ERRORS}, tags=["memory"])
    def update(self, request, memory_id: str):
        """Partial update: content, tags, priority, confidence, expires_at, key, category."""
        serializer = MemoryUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = self.get_object()
        try:
            memory, _changed = memory_update(memory=memory, actor=request.user,
                                             provenance=self.provenance,
                                             **serializer.validated_data)
        except MemoryConflict as error:
            raise Conflict(str(error)) from error
        return Response(MemorySerializer(memory, context={"reveal_credentials": True}).data)

    @extend_schema(operation_id="memory_delete", parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: MemorySerializer, **ERRORS}, tags=["memory"])
    def destroy(self, request, memory_id: str):
        """Move a memory to the trash (restorable)."""
        memory = memory_delete(memory=self.get_object(), actor=request.user,
                               provenance=self.provenance)
        return Response(MemorySerializer(memory).data)

    @extend_schema(
        operation_id="memory_recall", parameters=[MIND_PARAMETER, RecallQuerySerializer],
        responses={(200, "text/plain"): OpenApiTypes.STR,
                   (200, "application/json"): RecallJSONSerializer, **ERRORS},
        tags=["memory"],
        description="Everything an agent needs at session start, most important first. "
                    "With `budget`, the headers `X-Recall-Tokens` and `X-Recall-Omitted` "
                    "report the tokens used and the memories left out.")
    # With ?q= it counts as "semantic"; without a budget as "recall" (synapse.throttling).
    @action(detail=False, methods=["get"], query_serializer=RecallQuerySerializer,
            throttle_scope="recall")
    @replica_reads
    def recall(self, request):
        mind, query = self.mind, self.query
        memories = self.filter_queryset(recall_memories(mind))
        budget, path = query.get("budget"), query.get("path", "")
        as_json = query["format"] == "json"
        # Rows as tuples: what a text block shows, or what the JSON shows of a memory.
        row = MemoryRow if as_json else RecallItem
        limit = recall_module.WHOLE_LIMIT
        if query.get("q"):
            from memories.search import rank_for_recall

            ranked, rest = rank_for_recall(mind=mind, memories=memories, query=query["q"],
                                           row=row)
            if budget is None:
                # Up to WHOLE_LIMIT memories are answered whole, read in one query; past
                # that the rest is read again over a cursor and streamed after the ranked
                # (held in memory with one chunk of the rest), from the primary (as below).
                ordered = ranked + read_whole(rest, row=row, limit=max(0, limit - len(ranked)))
                if len(ordered) > limit:
                    stream = chain(ranked, recall_items(rest.using(DEFAULT_DB_ALIAS), row=row))
                    return self._stream_everything(mind, count_recall(memories), stream,
                                                   as_json=as_json, path=path)
            else:
                ordered = BudgetedScan(rest, budget=budget, row=row, first=ranked)
        elif budget is None:
            rows = memories.recall_order()
            ordered = read_whole(rows, row=row)
            if len(ordered) > limit:
                # Too many to hold: counted, then read again from the start over a cursor,
                # planned for reading every row when a filter narrows it to part of the
                # mind (recall.read_through). A read of a whole large mind, streamed
                # after this view returns: from the primary, as exports (a standby may
                # cancel a long read that conflicts with its replay; docs/scaling.md).
                rows = rows.using(DEFAULT_DB_ALIAS)
                whole = bool(RECALL_FILTERS & request.query_params.keys())
                stream = recall_items(rows, whole=whole, row=row)
                return self._stream_everything(mind, count_recall(memories), stream,
                                               as_json=as_json, path=path)
        else:
            # A budgeted scan reads in recall order until nothing more fits, and no more
            # rows than it shows plus one chunk (recall.BudgetedScan).
            ordered = BudgetedScan(memories.recall_order(), budget=budget, row=row)
        # A budgeted scan may stop early: the counts say how many it left out, ranked by
        # ``q`` or not.
        totals = count_recall(memories) if budget is not None else None
        # A budgeted scan reads over a cursor, in a transaction (synapse.db) on the
        # database it reads from (a replica, or the primary); a recall small enough to hold
        # was read whole above.
        with reading(ordered, using=memories.db) as rows:
            recall = build_recall(mind=mind, memories=rows, budget=budget, totals=totals,
                                  path=path, scan=ordered if budget is not None else None)
        headers = {"X-Recall-Tokens": str(recall.tokens),
                   "X-Recall-Omitted": str(recall.omitted),
                   "X-Recall-Count": str(len(recall.memories))}
        if as_json:
            verified = sum(1 for memory in recall.memories if memory.verified)
            body = {"mind": {"id": mind.id, "name": mind.name},
                    "total": len(recall.memories), "verified": verified,
                    "unverified": len(recall.memories) - verified, "tokens": recall.tokens,
                    "omitted": recall.omitted,
                    "left_out_low": dataclasses.asdict(recall.left_out_low),
                    "memories": MemorySerializer(recall.memories, many=True).data}
            return Response(body, headers=headers)
        response = HttpResponse(recall.text, content_type="text/plain; charset=utf-8")
        for name, value in headers.items():
            response[name] = value
        return response

    @staticmethod
    def _stream_everything(mind, totals, ordered, *, as_json: bool, path: str):
        """Without a budget recall shows every memory. Beyond STREAM_CHUNK memories the
        answer is streamed, so a mind of any size is answered in bounded memory; its token
        count is known only at the end: in the JSON body (last), not in a header. It is
        read in one transaction over a cursor (synapse.db.streamed)."""
        if as_json:
            response = StreamingHttpResponse(
                streamed(stream_recall_json(mind=mind, totals=totals, memories=ordered,
                                            path=path)),
                content_type="application/json")
        else:
            response = StreamingHttpResponse(
                streamed(stream_text(mind=mind, totals=totals, memories=ordered, path=path)),
                content_type="text/plain; charset=utf-8")
        response["X-Recall-Omitted"] = "0"
        response["X-Recall-Count"] = str(totals.total)
        return response

    @extend_schema(operation_id="memory_health", parameters=[MIND_PARAMETER],
                   responses={200: HealthSerializer, **ERRORS}, tags=["memory"])
    @action(detail=False, methods=["get"])
    def health(self, request):
        """Database, embedding model and backlog status, and this mind's recall policy."""
        mind = self.mind
        # Whether pgvector is there, never which versions run: agents learn nothing that
        # would match an exploit to the server.
        with connection.cursor() as cursor:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')")
            (has_vector,) = cursor.fetchone()
        from memories.embeddings import embedding_status

        return Response({
            "status": "ok",
            "mind": {"id": mind.id, "name": mind.name},
            "database": {"ok": True, "pgvector": has_vector,
                         "embedded": bool(settings.DATABASES["default"].get("EMBEDDED_DATA_DIR"))},
            "embeddings": embedding_status(mind=mind),
            "recall_policy": {"unverified": mind.unverified_in_recall,
                              "description": mind.get_unverified_in_recall_display()},
        })
