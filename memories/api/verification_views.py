"""Verification routes (SPEC §4): only a human verifies; agents may read the queue."""

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from memories.api.serializers import MemorySerializer
from memories.api.views import ERRORS, MemoryScopedView
from memories.services import VersionConflict, memory_set_verified, memory_verify_many
from synapse.api import MIND_PARAMETER, Conflict, HumanOnly, StrictSerializer

# A JWT, or a session (with CSRF); Mind Keys authenticate but are refused (403).
HUMAN_AUTH = [{"jwtAuth": []}, {"cookieAuth": []}]
VERSION_CONFLICT = {409: OpenApiResponse(
    description="version_conflict: the memory changed since the version sent (error shape)")}


BULK_VERIFY_MAX = 1000


class UnverifiedQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=10_000_000, default=0)


class UnverifiedListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = MemorySerializer(many=True)


class VerificationSerializer(StrictSerializer):
    version = serializers.IntegerField(
        min_value=1, required=False,
        help_text="The version the human read. When the memory has changed since, the "
                  "answer is 409 version_conflict and nothing changes. Optional: without "
                  "it, whatever version is current is verified.")


class VerificationView(MemoryScopedView):
    """POST verifies (or unverifies) one memory: a human with a JWT, or a session with CSRF.

    A Mind Key is refused with 403 before the memory is looked at, so nothing changes.
    """

    permission_classes = [HumanOnly]
    verified: bool

    def post(self, request, memory_id: str):
        serializer = VerificationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            memory = memory_set_verified(memory=self.get_memory(memory_id), user=request.user,
                                         verified=self.verified,
                                         version=serializer.validated_data.get("version"))
        except VersionConflict as conflict:
            raise Conflict(str(conflict), code="version_conflict") from conflict
        return Response(MemorySerializer(memory).data)


class VerifyView(VerificationView):
    verified = True

    @extend_schema(operation_id="memory_verify", request=VerificationSerializer,
                   auth=HUMAN_AUTH, parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    def post(self, request, memory_id: str):
        """Mark a memory verified (records who and when, and audits it). Humans only.

        Send ``{"version": n}``, the version you read, to be refused (409
        ``version_conflict``) if it changed since."""
        return super().post(request, memory_id)


class UnverifyView(VerificationView):
    verified = False

    @extend_schema(operation_id="memory_unverify", request=VerificationSerializer,
                   auth=HUMAN_AUTH, parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **VERSION_CONFLICT, **ERRORS},
                   tags=["verification"])
    def post(self, request, memory_id: str):
        """Withdraw a verification: the memory returns to the queue. Humans only."""
        return super().post(request, memory_id)


class SeenVersionSerializer(StrictSerializer):
    id = serializers.CharField(max_length=64)
    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


class BulkVerifySerializer(StrictSerializer):
    memories = SeenVersionSerializer(many=True, min_length=1, max_length=BULK_VERIFY_MAX,
                                     help_text="Each memory with the version the human read.")


class BulkVerifyView(MemoryScopedView):
    permission_classes = [HumanOnly]

    @extend_schema(operation_id="memory_bulk_verify", request=BulkVerifySerializer,
                   auth=HUMAN_AUTH, parameters=[MIND_PARAMETER],
                   responses={200: inline_serializer("BulkVerifyResult", {
                       "count": serializers.IntegerField(),
                       "verified": serializers.ListField(child=serializers.CharField())}),
                       **VERSION_CONFLICT, **ERRORS}, tags=["verification"])
    def post(self, request):
        """Verify up to 1000 memories, each at the version the human read. All or nothing:
        if any of them changed since, is in the trash or is not this mind's, the answer is
        409 version_conflict naming them, and none is verified. Humans only."""
        serializer = BulkVerifySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        seen = {item["id"]: item["version"] for item in serializer.validated_data["memories"]}
        try:
            verified = memory_verify_many(mind=self.get_mind(), user=request.user, seen=seen)
        except VersionConflict as conflict:
            raise Conflict(conflict.naming_each(), code="version_conflict") from conflict
        return Response({"count": len(verified), "verified": [m.id for m in verified]})


class UnverifiedView(MemoryScopedView):
    query_serializer = UnverifiedQuerySerializer

    @extend_schema(operation_id="memory_unverified",
                   parameters=[MIND_PARAMETER, UnverifiedQuerySerializer],
                   responses={200: UnverifiedListSerializer, **ERRORS}, tags=["verification"])
    def get(self, request):
        """The verification queue, oldest first: unverified memories that recall may show
        (expired, deleted and superseded ones are left out). Agents may read it."""
        limit, offset = self.query["limit"], self.query["offset"]
        queue = (self.memories().in_recall().filter(verified=False)
                 .defer("search_vector", "embedding").order_by("created_at", "id"))
        page = list(queue[offset:offset + limit])
        count = queue.count() if len(page) == limit or offset else offset + len(page)
        return Response({"count": count, "limit": limit, "offset": offset,
                         "results": MemorySerializer(page, many=True).data})
