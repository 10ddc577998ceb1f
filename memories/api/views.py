"""Core memory routes (SPEC §4 "Core"): store, list, get, update, delete, recall, health."""

import itertools
import json

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.http import HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.response import Response

from memories import recall as recall_module
from memories.api.serializers import (
    HealthSerializer,
    MemoryListQuerySerializer,
    MemoryListSerializer,
    MemorySerializer,
    MemoryStoreSerializer,
    MemoryUpdateSerializer,
    RecallJSONSerializer,
    RecallQuerySerializer,
    StoreResponseSerializer,
    stream_recall_json,
)
from memories.models import IdempotentRequest, Memory
from memories.recall import build_recall, count_recall, recall_items, stream_text
from memories.services import MemoryConflict, memory_delete, memory_store, memory_update
from synapse.api import MIND_PARAMETER, Conflict, SynapseAPIView

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="A retried request with the same key returns the first answer and writes "
                "nothing twice (kept 24 hours).")
ERRORS = {400: OpenApiResponse(description="Invalid input (error shape)"),
          401: OpenApiResponse(description="Missing or wrong credentials"),
          403: OpenApiResponse(description="Not allowed for these credentials"),
          404: OpenApiResponse(description="No such memory in this mind")}


class MemoryScopedView(SynapseAPIView):
    """A view over the memories of the request's mind."""

    def memories(self):
        return Memory.objects.for_mind(self.get_mind())

    def get_memory(self, memory_id: str) -> Memory:
        """A memory of this mind outside the trash; anything else is a 404."""
        memory = self.memories().alive().filter(pk=memory_id).select_related("mind").first()
        if memory is None:
            raise exceptions.NotFound("No such memory.")
        return memory


class MemoryCollectionView(MemoryScopedView):
    query_serializers = {"GET": MemoryListQuerySerializer}

    @extend_schema(operation_id="memory_list", parameters=[MIND_PARAMETER,
                                                           MemoryListQuerySerializer],
                   responses={200: MemoryListSerializer, **ERRORS}, tags=["memory"])
    def get(self, request):
        """List memories (current versions, not in the trash), filtered and paginated."""
        query = self.query
        memories = self.memories().current()
        for name in ("category", "priority", "source"):
            if query.get(name):
                memories = memories.filter(**{name: query[name]})
        if query.get("tag"):
            memories = memories.filter(tags__contains=[query["tag"].strip().lower()])
        if query.get("verified") is not None:
            memories = memories.filter(verified=query["verified"])
        if query.get("updated_since"):
            memories = memories.filter(updated_at__gte=query["updated_since"])
        if not query["include_expired"]:
            memories = memories.unexpired()
        ordering = query["ordering"]
        if ordering.lstrip("-") == "priority":
            # "priority" means most important first; "-priority" least important first.
            field = "-priority_rank" if ordering.startswith("-") else "priority_rank"
            memories = memories.order_by(field, "-updated_at", "id")
        else:
            memories = memories.order_by(ordering, "id")
        limit, offset = query["limit"], query["offset"]
        page = list(memories[offset:offset + limit])
        count = memories.count() if len(page) == limit or offset else offset + len(page)
        data = MemorySerializer(page, many=True).data
        return Response({"count": count, "limit": limit, "offset": offset, "results": data})

    @extend_schema(operation_id="memory_store", request=MemoryStoreSerializer,
                   parameters=[MIND_PARAMETER, IDEMPOTENCY_HEADER],
                   responses={201: StoreResponseSerializer, 200: StoreResponseSerializer,
                              409: OpenApiResponse(description="Idempotency-Key reused with "
                                                   "another body"), **ERRORS},
                   tags=["memory"])
    def post(self, request):
        """Store a memory, or update the one with the same (category, key)."""
        serializer = MemoryStoreSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind = self.get_mind()
        idempotency_key = request.headers.get("Idempotency-Key")
        if idempotency_key is None:
            status_code, body = self._store(mind, serializer.validated_data)
            return Response(body, status=status_code)
        if not 1 <= len(idempotency_key) <= 200:
            raise exceptions.ValidationError(
                {"Idempotency-Key": ["Must be 1 to 200 characters."]})
        # Keyed with SECRET_KEY: the body may hold a credential, and a bare hash of a
        # short secret kept in the database could be reversed by guessing.
        fingerprint = salted_hmac("synapse.idempotency", json.dumps(
            request.data, sort_keys=True, default=str), algorithm="sha256").hexdigest()
        return self._store_once(mind, idempotency_key, fingerprint, serializer.validated_data)

    def _store(self, mind, data: dict) -> tuple[int, dict]:
        data = dict(data)
        expires_given = "expires_at" in data
        result = memory_store(mind=mind, actor=self.request.user, expires_given=expires_given,
                              **data)
        body = {"id": result.memory.id, "status": result.status,
                "version": result.memory.version}
        return (status.HTTP_201_CREATED if result.status == "stored" else status.HTTP_200_OK,
                body)

    def _store_once(self, mind, idempotency_key: str, fingerprint: str, data: dict):
        """Store under an Idempotency-Key: the first answer is kept and replayed."""
        ttl = settings.SYNAPSE["IDEMPOTENCY_TTL_SECONDS"]
        cutoff = timezone.now() - timezone.timedelta(seconds=ttl)
        for _attempt in range(2):
            previous = IdempotentRequest.objects.filter(mind=mind, key=idempotency_key,
                                                        created_at__gte=cutoff).first()
            if previous is not None:
                if previous.fingerprint != fingerprint:
                    raise Conflict("This Idempotency-Key was used with a different request.")
                response = Response(previous.body, status=previous.status_code)
                response["Idempotent-Replayed"] = "true"
                return response
            try:
                with transaction.atomic():
                    IdempotentRequest.objects.filter(mind=mind, key=idempotency_key,
                                                     created_at__lt=cutoff).delete()
                    status_code, body = self._store(mind, data)
                    # The unique (mind, key) index makes a concurrent retry wait here,
                    # then fail and roll its store back; it replays our answer instead.
                    IdempotentRequest.objects.create(mind=mind, key=idempotency_key,
                                                     fingerprint=fingerprint,
                                                     status_code=status_code, body=body)
                return Response(body, status=status_code)
            except IntegrityError:
                continue
        raise Conflict("A request with this Idempotency-Key is in progress; retry.")


class MemoryDetailView(MemoryScopedView):
    @extend_schema(operation_id="memory_get", parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **ERRORS}, tags=["memory"])
    def get(self, request, memory_id: str):
        """One memory; the owning mind reads credentials content in plaintext here."""
        memory = self.get_memory(memory_id)
        return Response(MemorySerializer(memory, context={"reveal_credentials": True}).data)

    @extend_schema(operation_id="memory_update", request=MemoryUpdateSerializer,
                   parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer,
                              409: OpenApiResponse(description="(category, key) taken"),
                              **ERRORS}, tags=["memory"])
    def put(self, request, memory_id: str):
        """Partial update: content, tags, priority, confidence, expires_at, key, category."""
        serializer = MemoryUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = self.get_memory(memory_id)
        try:
            memory, _changed = memory_update(memory=memory, actor=request.user,
                                             **serializer.validated_data)
        except MemoryConflict as error:
            raise Conflict(str(error)) from error
        return Response(MemorySerializer(memory, context={"reveal_credentials": True}).data)

    @extend_schema(operation_id="memory_delete", parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **ERRORS}, tags=["memory"])
    def delete(self, request, memory_id: str):
        """Move a memory to the trash (restorable)."""
        memory = memory_delete(memory=self.get_memory(memory_id), actor=request.user)
        return Response(MemorySerializer(memory).data)


class RecallView(MemoryScopedView):
    query_serializer = RecallQuerySerializer
    # With ?q= it counts as "semantic"; without a budget as "recall" (synapse.throttling).
    throttle_scope = "recall"

    @extend_schema(
        operation_id="memory_recall", parameters=[MIND_PARAMETER, RecallQuerySerializer],
        responses={(200, "text/plain"): OpenApiTypes.STR,
                   (200, "application/json"): RecallJSONSerializer, **ERRORS},
        tags=["memory"],
        description="Everything an agent needs at session start, most important first. "
                    "With `budget`, the headers `X-Recall-Tokens` and `X-Recall-Omitted` "
                    "report the tokens used and the memories left out.")
    def get(self, request):
        mind = self.get_mind()
        query = self.query
        memories = self.memories().in_recall()
        if mind.unverified_in_recall == mind.UnverifiedInRecall.HIDDEN:
            memories = memories.filter(verified=True)
        if query.get("category"):
            memories = memories.filter(category=query["category"])
        if query.get("tag"):
            memories = memories.filter(tags__contains=[query["tag"].strip().lower()])
        budget = query.get("budget")
        as_json = query["format"] == "json"
        if query.get("q"):
            from memories.search import rank_for_recall

            ordered = rank_for_recall(mind=mind, memories=memories, query=query["q"])
        elif as_json:
            ordered = memories.recall_order().defer("search_vector", "embedding").iterator(
                chunk_size=500)
        else:
            ordered = recall_items(memories.recall_order())
        if budget is None:
            # Up to STREAM_CHUNK memories are answered whole, with no count query; past
            # that the rest is streamed after the head already read.
            head = list(itertools.islice(ordered, recall_module.STREAM_CHUNK + 1))
            if len(head) > recall_module.STREAM_CHUNK:
                return self._stream_everything(mind, count_recall(memories),
                                               itertools.chain(head, ordered), as_json=as_json)
            ordered = head
        total = memories.count() if budget is not None and not query.get("q") else None
        recall = build_recall(mind=mind, memories=ordered, budget=budget, total=total)
        headers = {"X-Recall-Tokens": str(recall.tokens),
                   "X-Recall-Omitted": str(recall.omitted),
                   "X-Recall-Count": str(len(recall.memories))}
        if as_json:
            verified = sum(1 for memory in recall.memories if memory.verified)
            body = {"mind": {"id": mind.id, "name": mind.name},
                    "total": len(recall.memories), "verified": verified,
                    "unverified": len(recall.memories) - verified, "tokens": recall.tokens,
                    "omitted": recall.omitted,
                    "memories": MemorySerializer(recall.memories, many=True).data}
            return Response(body, headers=headers)
        response = HttpResponse(recall.text, content_type="text/plain; charset=utf-8")
        for name, value in headers.items():
            response[name] = value
        return response

    @staticmethod
    def _stream_everything(mind, totals, ordered, *, as_json: bool):
        """Without a budget recall shows every memory. Beyond STREAM_CHUNK memories the
        answer is streamed, so a mind of any size is answered in bounded memory; its token
        count is known only at the end: in the JSON body (last), not in a header."""
        if as_json:
            response = StreamingHttpResponse(
                stream_recall_json(mind=mind, totals=totals, memories=ordered),
                content_type="application/json")
        else:
            response = StreamingHttpResponse(
                stream_text(mind=mind, totals=totals, memories=ordered),
                content_type="text/plain; charset=utf-8")
        response["X-Recall-Omitted"] = "0"
        response["X-Recall-Count"] = str(totals.total)
        return response


class HealthView(MemoryScopedView):
    @extend_schema(operation_id="memory_health", parameters=[MIND_PARAMETER],
                   responses={200: HealthSerializer, **ERRORS}, tags=["memory"])
    def get(self, request):
        """Database, embedding model and backlog status, and this mind's recall policy."""
        mind = self.get_mind()
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
