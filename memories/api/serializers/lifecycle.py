"""Serializers of versions and revert, the trash, expiry and bulk delete."""

from datetime import timedelta

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from memories.api.schema import AGENT_HELP, DEVICE_HELP, INSTANCE_HELP
from memories.api.serializers.memory import MemorySerializer, PathField, PlaceFilters
from memories.models import Category, MemoryType
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
    agent = serializers.CharField(allow_blank=True, help_text=AGENT_HELP)
    agent_instance = serializers.CharField(allow_blank=True, help_text=INSTANCE_HELP)
    device = serializers.CharField(allow_blank=True, help_text=DEVICE_HELP)
    parent = serializers.IntegerField(
        allow_null=True, help_text="The version this one was derived from (the current one "
                                   "when it was written); null for version 1.")
    reverted_from = serializers.IntegerField(
        allow_null=True, help_text="For a revert: the version whose fields it copied; "
                                   "null otherwise.")
    created_at = serializers.DateTimeField()


class VersionListSerializer(PageSerializer):
    id = serializers.CharField()
    current_version = serializers.IntegerField()
    versions = VersionSerializer(many=True)


class VersionQuery(PageQuery):
    agent = serializers.CharField(max_length=64, required=False,
                                  help_text="Only versions whose request claimed this agent.")
    instance = serializers.CharField(max_length=64, required=False,
                                     help_text="Only versions whose request claimed this "
                                               "agent instance.")
    member = serializers.IntegerField(min_value=1, required=False,
                                      help_text="Only the versions this member (a user id, as "
                                                "in recorded_by.id) wrote.")


class VersionDetailSerializer(VersionSerializer):
    id = serializers.CharField(help_text="The memory.")
    current_version = serializers.IntegerField()


# ``from`` is a Python keyword: the query's fields are declared by name.
VersionDiffQuery = type("VersionDiffQuery", (serializers.Serializer,), {
    "from": serializers.IntegerField(min_value=1, max_value=2**31 - 1,
                                     help_text="The version to compare from."),
    "to": serializers.IntegerField(min_value=1, max_value=2**31 - 1,
                                   help_text="The version to compare to."),
})


class DiffLineSerializer(serializers.Serializer):
    op = serializers.ChoiceField(choices=[" ", "-", "+"],
                                 help_text="\" \" unchanged, \"-\" only in from, \"+\" only in to.")
    text = serializers.CharField(allow_blank=True)


class DiffHunkSerializer(serializers.Serializer):
    old_start = serializers.IntegerField(help_text="Line number (1-based) in from.")
    new_start = serializers.IntegerField(help_text="Line number (1-based) in to.")
    lines = DiffLineSerializer(many=True)


FieldChangeSerializer = type("FieldChangeSerializer", (serializers.Serializer,), {
    "field": serializers.CharField(),
    "from": serializers.JSONField(required=False,
                                  help_text="Every field but content: its value in from."),
    "to": serializers.JSONField(required=False,
                                help_text="Every field but content: its value in to."),
    "too_large": serializers.BooleanField(
        required=False, help_text="content only: true when the texts are past the diff's "
                                  "bounds (the web UI's): no hunks, read both versions."),
    "hunks": DiffHunkSerializer(many=True, required=False, help_text="content only."),
})

VersionDiffSerializer = type("VersionDiffSerializer", (serializers.Serializer,), {
    "id": serializers.CharField(),
    "from": serializers.IntegerField(),
    "to": serializers.IntegerField(),
    "changes": FieldChangeSerializer(many=True, help_text="Each versioned field that differs, "
                                                          "content last; empty when none."),
})


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


class ResetSerializer(StrictSerializer):
    """POST /memory/reset: the scope to purge, and the path typed again to confirm."""

    path = PathField(help_text="The path to purge, with everything below it; not the root "
                               "(a whole-mind reset is not offered).")
    confirm = serializers.CharField(max_length=1000, trim_whitespace=True,
                                    help_text="The path typed again; anything else: 400, "
                                              "nothing purged.")
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, required=False)
    category = serializers.ChoiceField(choices=Category.choices, required=False)

    def validate(self, data):
        if not data["path"]:
            raise serializers.ValidationError(
                {"path": ["A reset needs a path below the root; resetting a whole mind is "
                          "not offered."]}, code="root_reset")
        confirm = data["confirm"].strip().strip("/").lower()
        if confirm != data["path"]:
            raise serializers.ValidationError(
                {"confirm": ["Type the path again, exactly, to confirm the reset."]},
                code="confirm_mismatch")
        return data


RESET_RESULT = inline_serializer("ResetResult", {
    "path": serializers.CharField(), "memory_type": serializers.CharField(),
    "category": serializers.CharField(),
    "counts": serializers.DictField(child=serializers.IntegerField(),
                                    help_text="Rows purged or scrubbed, per table.")})
