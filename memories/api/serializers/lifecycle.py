"""Serializers of versions and revert, the trash, expiry and bulk delete."""

from datetime import timedelta

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from memories.api.serializers.memory import MemorySerializer, PlaceFilters
from synapse.api import DurationField, PageQuery, PageSerializer, StrictSerializer

BULK_DELETE_MAX = 1000
EXPIRING_WINDOW = timedelta(days=7)


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    category = serializers.CharField()
    key = serializers.CharField()
    content = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    priority = serializers.CharField()
    source = serializers.CharField()
    confidence = serializers.FloatField()
    expires_at = serializers.DateTimeField(allow_null=True)
    memory_type = serializers.CharField()
    path = serializers.CharField(allow_blank=True, help_text="\"\" at the root.")
    occurred_at = serializers.DateTimeField(allow_null=True,
                                            help_text="When an episode happened; null "
                                                      "for other types.")
    actor = serializers.CharField(help_text="recorded_by as type:label (older clients read it).")
    recorded_by = serializers.DictField(
        help_text="Who wrote this version here, from the request's credentials: "
                  "{type: key|user|system|legacy, id, label}.")
    claimed_source = serializers.CharField(
        help_text="The source a restored backup or a sync claimed for it; blank otherwise.")
    claimed_actor = serializers.CharField(
        help_text="The author a restored backup claimed for it (never trusted); blank otherwise.")
    created_at = serializers.DateTimeField()


class VersionListSerializer(PageSerializer):
    id = serializers.CharField()
    current_version = serializers.IntegerField()
    versions = VersionSerializer(many=True)


class RevertSerializer(StrictSerializer):
    version = serializers.IntegerField(min_value=1)


class TrashListSerializer(PageSerializer):
    results = MemorySerializer(many=True)


TRASH_LIST = TrashListSerializer


class ExpiringQuery(PageQuery, PlaceFilters):
    # Without it, EXPIRING_WINDOW (applied by the view: a timedelta default would reach
    # the schema as a number where the parameter is a string).
    within = DurationField(required=False,
                           help_text="Seconds (604800) or 7d, 12h, 30m; default 7d.")


EXPIRING_LIST = inline_serializer("ExpiringList", {
    "count": serializers.IntegerField(), "within": serializers.IntegerField(),
    "results": MemorySerializer(many=True)})


class BulkDeleteSerializer(StrictSerializer):
    ids = serializers.ListField(child=serializers.CharField(max_length=64), min_length=1,
                                max_length=BULK_DELETE_MAX)


BULK_DELETE_RESULT = inline_serializer("BulkDeleteResult", {
    "count": serializers.IntegerField(),
    "deleted": serializers.ListField(child=serializers.CharField()),
    "not_found": serializers.ListField(child=serializers.CharField())})
