"""Verification actions: only a human verifies (a Mind Key is refused before anything is
looked at); agents may read the queue."""

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from memories.api.schema import ERRORS
from memories.api.serializers.memory import MemorySerializer
from memories.api.serializers.verification import (
    BULK_VERIFY_RESULT,
    BulkVerifySerializer,
    UnverifiedListSerializer,
    VerificationSerializer,
)
from memories.services import VersionConflict, memory_set_verified, memory_verify_many
from synapse.api import (
    HUMAN_AUTH,
    MIND_PARAMETER,
    VERSION_CONFLICT,
    Conflict,
    HumanOnly,
    PageQuery,
    page_of,
)


class VerificationActions:
    """unverified (the queue), verify, unverify, bulk-verify."""

    @extend_schema(operation_id="memory_unverified",
                   parameters=[MIND_PARAMETER, PageQuery],
                   responses={200: UnverifiedListSerializer, **ERRORS}, tags=["verification"])
    @action(detail=False, methods=["get"], query_serializer=PageQuery)
    def unverified(self, request):
        """The verification queue, oldest first: unverified memories that recall may show
        (expired, deleted and superseded ones are left out). Agents may read it."""
        queue = (self.get_queryset().awaiting_verification().without_vectors()
                 .order_by("created_at", "id"))
        page, counts = page_of(queue, self.query)
        return Response({**counts, "results": MemorySerializer(page, many=True).data})

    def _set_verified(self, request, *, verified: bool):
        serializer = VerificationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            memory = memory_set_verified(memory=self.get_object(), user=request.user,
                                         verified=verified,
                                         version=serializer.validated_data.get("version"))
        except VersionConflict as conflict:
            raise Conflict(str(conflict), code="version_conflict") from conflict
        return Response(MemorySerializer(memory).data)

    @extend_schema(operation_id="memory_verify", request=VerificationSerializer,
                   auth=HUMAN_AUTH, parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    @action(detail=True, methods=["post"], permission_classes=[HumanOnly])
    def verify(self, request, memory_id: str):
        """Mark a memory verified (records who and when, and audits it). Humans only.

        Send ``{"version": n}``, the version you read, to be refused (409
        ``version_conflict``) if it changed since."""
        return self._set_verified(request, verified=True)

    @extend_schema(operation_id="memory_unverify", request=VerificationSerializer,
                   auth=HUMAN_AUTH, parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    @action(detail=True, methods=["post"], permission_classes=[HumanOnly])
    def unverify(self, request, memory_id: str):
        """Withdraw a verification: the memory returns to the queue. Humans only."""
        return self._set_verified(request, verified=False)

    @extend_schema(operation_id="memory_bulk_verify", request=BulkVerifySerializer,
                   auth=HUMAN_AUTH, parameters=[MIND_PARAMETER],
                   responses={200: BULK_VERIFY_RESULT, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    @action(detail=False, methods=["post"], url_path="bulk-verify",
            permission_classes=[HumanOnly])
    def bulk_verify(self, request):
        """Verify up to 1000 memories, each at the version the human read. All or nothing:
        if any of them changed since, is in the trash or is not this mind's, the answer is
        409 version_conflict naming them, and none is verified. Humans only."""
        serializer = BulkVerifySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        seen = {item["id"]: item["version"] for item in serializer.validated_data["memories"]}
        try:
            verified = memory_verify_many(mind=self.mind, user=request.user, seen=seen)
        except VersionConflict as conflict:
            raise Conflict(conflict.naming_each(), code="version_conflict") from conflict
        return Response({"count": len(verified), "verified": [m.id for m in verified]})
