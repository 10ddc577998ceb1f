"""Serializers of episode timelines: a page of one path's timeline, and an episode's
neighbours."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.serializers.memory import MemorySerializer, PathField
from synapse.timestamps import parse_timestamp

MAX_TIMELINE_PAGE = 500
MAX_NEIGHBOURS = 20


@extend_schema_field(OpenApiTypes.STR)
class TimelineAnchorField(serializers.Field):
    """A place on a timeline: an episode's id (``mem_…``, kept as a string for the view
    to look up) or a moment (RFC 3339 or epoch seconds, an aware datetime)."""

    default_error_messages = {"invalid": "{message}"}

    def to_internal_value(self, data):
        if isinstance(data, str) and data.startswith("mem_"):
            if len(data) > 40:
                self.fail("invalid", message="Not a memory id.")
            return data
        try:
            return parse_timestamp(data)
        except (ValueError, OverflowError, OSError) as error:
            self.fail("invalid", message=f"A memory id (mem_…) or a time: {error}")


class TimelineQuery(serializers.Serializer):
    path = PathField(required=False, default="",
                     help_text="The timeline of exactly this path (blank: the root); "
                               "sub-paths have their own timelines.")
    after = TimelineAnchorField(required=False, help_text="The episodes after this one "
                                "(mem_…), or from this time on (RFC 3339).")
    before = TimelineAnchorField(required=False, help_text="The episodes before this one "
                                 "(mem_…), or before this time (RFC 3339).")
    limit = serializers.IntegerField(min_value=1, max_value=MAX_TIMELINE_PAGE, default=50)

    def validate(self, attrs):
        if "after" in attrs and "before" in attrs:
            message = "Send after or before, not both."
            raise serializers.ValidationError({"after": [message], "before": [message]})
        return attrs


class TimelinePageSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The timeline's path, in normal form.")
    count = serializers.IntegerField(help_text="Episodes in this page.")
    has_more = serializers.BooleanField(help_text="More episodes beyond this page, in the "
                                        "direction read (after the last one, or before "
                                        "the first with before=).")
    results = MemorySerializer(many=True, help_text="In timeline order: when each happened, "
                               "then the order written.")


class NeighboursQuery(serializers.Serializer):
    n = serializers.IntegerField(min_value=1, max_value=MAX_NEIGHBOURS, default=2)


class NeighboursSerializer(serializers.Serializer):
    memory = serializers.CharField(help_text="The episode's id.")
    before = MemorySerializer(many=True, help_text="Up to n episodes just before it, in "
                              "timeline order.")
    after = MemorySerializer(many=True, help_text="Up to n episodes just after it, in "
                             "timeline order.")
