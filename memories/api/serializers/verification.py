"""Serializers of the verification queue and of reviewing it: verify, unverify and move to
the trash (one memory, or many at once)."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from memories.api.serializers.memory import MemorySerializer, PlaceFilters
from synapse.api import PageQuery, PageSerializer, StrictSerializer

BULK_VERIFY_MAX = 1000


class QueueQuery(PageQuery, PlaceFilters):
    """The queue's parameters: a page, and optionally a path (and below) and a type."""


class UnverifiedListSerializer(PageSerializer):
    results = MemorySerializer(many=True)


class VerificationSerializer(StrictSerializer):
    version = serializers.IntegerField(
        min_value=1, required=False,
        help_text="The version the human read. When the memory has changed since, the "
                  "answer is 409 version_conflict and nothing changes. Optional: without "
                  "it, whatever version is current is verified.")


class SeenVersionSerializer(StrictSerializer):
    id = serializers.CharField(max_length=64)
    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


class BulkVerifySerializer(StrictSerializer):
    """The body of bulk-verify, bulk-unverify and bulk-trash."""

    memories = SeenVersionSerializer(many=True, min_length=1, max_length=BULK_VERIFY_MAX,
                                     help_text="Each memory with the version the human read.")


BULK_VERIFY_RESULT = inline_serializer("BulkVerifyResult", {
    "count": serializers.IntegerField(),
    "verified": serializers.ListField(child=serializers.CharField())})
BULK_UNVERIFY_RESULT = inline_serializer("BulkUnverifyResult", {
    "count": serializers.IntegerField(),
    "unverified": serializers.ListField(child=serializers.CharField())})
BULK_TRASH_RESULT = inline_serializer("BulkTrashResult", {
    "count": serializers.IntegerField(),
    "trashed": serializers.ListField(child=serializers.CharField())})
