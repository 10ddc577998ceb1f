"""Verification actions: only a human verifies (a Mind Key is refused before anything is
looked at); agents may read the queue."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from memories.api.schema import ERRORS
from memories.api.serializers.memory import MemorySerializer
from memories.api.serializers.verification import (
    BULK_TRASH_RESULT,
    BULK_UNVERIFY_RESULT,
    BULK_VERIFY_RESULT,
    BulkVerifySerializer,
    QueueQuery,
    UnverifiedListSerializer,
    VerificationSerializer,
)
from memories.services import (
    VersionConflict,
    memory_set_verified,
    memory_trash_many,
    memory_unverify_many,
    memory_verify_many,
)
from synapse.api import (
    HUMAN_AUTH,
    MIND_PARAMETER,
    VERSION_CONFLICT,
    Conflict,
    HumanOnly,
    page_of,
)

# verify and unverify name one memory: a human may leave the mind out.
MEMORY_MIND_PARAMETER = OpenApiParameter(
    "mind", str, required=False,
    description="The mind the memory is in. Optional: without it, the memory's own mind "
                "when it is one of yours (another user's memory is a 404).")


def bulk_schema(operation_id: str, result) -> dict:
    return {"operation_id": operation_id, "request": BulkVerifySerializer, "auth": HUMAN_AUTH,
            "parameters": [MIND_PARAMETER],
            "responses": {200: result, **VERSION_CONFLICT, **ERRORS},
            "tags": ["verification"]}


class VerificationActions:
    """unverified (the queue), verify, unverify, bulk-verify, bulk-unverify, bulk-trash."""

    @extend_schema(operation_id="memory_unverified",
                   parameters=[MIND_PARAMETER, QueueQuery],
                   responses={200: UnverifiedListSerializer, **ERRORS}, tags=["verification"])
    @action(detail=False, methods=["get"], query_serializer=QueueQuery)
    def unverified(self, request):
        """The verification queue, oldest first: unverified memories that recall may show
        (expired, deleted and superseded ones are left out), optionally under a path and
        of one type. Agents may read it."""
        queue = (self.filter_queryset(self.get_queryset().awaiting_verification())
                 .without_vectors().order_by("created_at", "id"))
        page, counts = page_of(queue, self.query)
        return Response({**counts, "results": MemorySerializer(page, many=True).data})

    def _set_verified(self, request, *, verified: bool):
        serializer = VerificationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            memory = memory_set_verified(memory=self.get_object(), user=request.user,
                                         verified=verified,
                                         version=serializer.validated_data.get("version"),
                                         provenance=self.provenance)
        except VersionConflict as conflict:
            raise Conflict(str(conflict), code="version_conflict") from conflict
        return Response(MemorySerializer(memory).data)

    @extend_schema(operation_id="memory_verify", request=VerificationSerializer,
                   auth=HUMAN_AUTH, parameters=[MEMORY_MIND_PARAMETER],
                   responses={200: MemorySerializer, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    @action(detail=True, methods=["post"], permission_classes=[HumanOnly],
            mind_from_object=True)
    def verify(self, request, memory_id: str):
        """Mark a memory verified (records who and when, and audits it). Humans only;
        ``?mind=`` may be left out.

        Send ``{"version": n}``, the version you read, to be refused (409
        ``version_conflict``) if it changed since."""
        return self._set_verified(request, verified=True)

    @extend_schema(operation_id="memory_unverify", request=VerificationSerializer,
                   auth=HUMAN_AUTH, parameters=[MEMORY_MIND_PARAMETER],
                   responses={200: MemorySerializer, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    @action(detail=True, methods=["post"], permission_classes=[HumanOnly],
            mind_from_object=True)
    def unverify(self, request, memory_id: str):
        """Withdraw a verification: the memory returns to the queue. Humans only;
        ``?mind=`` may be left out."""
        return self._set_verified(request, verified=False)

    def _review_many(self, request, service, answer_field: str):
        serializer = BulkVerifySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        seen = {item["id"]: item["version"] for item in serializer.validated_data["memories"]}
        try:
            done = service(mind=self.mind, user=request.user, seen=seen,
                           provenance=self.provenance)
        except VersionConflict as conflict:
            raise Conflict(conflict.naming_each(), code="version_conflict") from conflict
        return Response({"count": len(done), answer_field: [m.id for m in done]})

    @extend_schema(**bulk_schema("memory_bulk_verify", BULK_VERIFY_RESULT))
    @action(detail=False, methods=["post"], url_path="bulk-verify",
            permission_classes=[HumanOnly])
    def bulk_verify(self, request):
        """Verify up to 1000 memories, each at the version the human read. All or nothing:
        if any of them changed since, is in the trash or is not this mind's, the answer is
        409 version_conflict naming them, and none is verified. Humans only."""
        return self._review_many(request, memory_verify_many, "verified")

    @extend_schema(**bulk_schema("memory_bulk_unverify", BULK_UNVERIFY_RESULT))
    @action(detail=False, methods=["post"], url_path="bulk-unverify",
            permission_classes=[HumanOnly])
    def bulk_unverify(self, request):
        """Withdraw the verification of up to 1000 memories, each at the version the human
        read; all or nothing, as bulk-verify. Humans only."""
        return self._review_many(request, memory_unverify_many, "unverified")

    @extend_schema(**bulk_schema("memory_bulk_trash", BULK_TRASH_RESULT))
    @action(detail=False, methods=["post"], url_path="bulk-trash",
            permission_classes=[HumanOnly])
    def bulk_trash(self, request):
        """Move up to 1000 memories to the trash (restorable), each at the version the
        human read: what a reviewer rejects from the queue. All or nothing, as
        bulk-verify. Humans only (an agent moves memories to the trash with
        bulk-delete)."""
        return self._review_many(request, memory_trash_many, "trashed")
