"""Verification routes (SPEC §4): only a human verifies; agents may read the queue."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from memories.api.serializers import MemorySerializer
from memories.api.views import ERRORS, MemoryScopedView
from memories.services import memory_set_verified
from synapse.api import MIND_PARAMETER, HumanOnly

# A JWT, or a session (with CSRF); Mind Keys authenticate but are refused (403).
HUMAN_AUTH = [{"jwtAuth": []}, {"cookieAuth": []}]


class UnverifiedQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=10_000_000, default=0)


class UnverifiedListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = MemorySerializer(many=True)


class VerificationView(MemoryScopedView):
    """POST verifies (or unverifies) one memory: a human with a JWT, or a session with CSRF.

    A Mind Key is refused with 403 before the memory is looked at, so nothing changes.
    """

    permission_classes = [HumanOnly]
    verified: bool

    def post(self, request, memory_id: str):
        memory = memory_set_verified(memory=self.get_memory(memory_id), user=request.user,
                                     verified=self.verified)
        return Response(MemorySerializer(memory).data)


class VerifyView(VerificationView):
    verified = True

    @extend_schema(operation_id="memory_verify", request=None, auth=HUMAN_AUTH,
                   parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **ERRORS}, tags=["verification"])
    def post(self, request, memory_id: str):
        """Mark a memory verified (records who and when, and audits it). Humans only."""
        return super().post(request, memory_id)


class UnverifyView(VerificationView):
    verified = False

    @extend_schema(operation_id="memory_unverify", request=None, auth=HUMAN_AUTH,
                   parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **ERRORS}, tags=["verification"])
    def post(self, request, memory_id: str):
        """Withdraw a verification: the memory returns to the queue. Humans only."""
        return super().post(request, memory_id)


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
