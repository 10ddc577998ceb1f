"""Serializers of the audit log, likely contradictions and compaction."""

from rest_framework import serializers

from memories.api.schema import AGENT_HELP, DEVICE_HELP, INSTANCE_HELP
from memories.models import Category
from synapse.api import (
    DurationField,
    PageQuery,
    PageSerializer,
    StrictSerializer,
    TimestampField,
)


class AuditQuery(PageQuery):
    action = serializers.CharField(max_length=30, required=False)
    since = TimestampField(required=False)
    memory = serializers.CharField(max_length=64, required=False)
    agent = serializers.CharField(max_length=64, required=False,
                                  help_text="Only events whose request claimed this agent "
                                            "(X-Synapse-Agent).")
    instance = serializers.CharField(max_length=64, required=False,
                                     help_text="Only events whose request claimed this "
                                               "agent instance (X-Synapse-Agent-Instance).")
    member = serializers.IntegerField(min_value=1, required=False,
                                      help_text="Only the changes this member (a user id, as "
                                                "in actor.id) made.")


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    action = serializers.CharField()
    actor = serializers.DictField()
    recorded_by = serializers.DictField()
    memory_id = serializers.CharField()
    details = serializers.DictField()
    agent = serializers.CharField(allow_blank=True, help_text=AGENT_HELP)
    agent_instance = serializers.CharField(allow_blank=True, help_text=INSTANCE_HELP)
    device = serializers.CharField(allow_blank=True, help_text=DEVICE_HELP)
    created_at = serializers.DateTimeField()


class AuditListSerializer(PageSerializer):
    results = AuditEventSerializer(many=True)


AUDIT_LIST = AuditListSerializer


class ContradictionsQuerySerializer(serializers.Serializer):
    within = DurationField(required=False, help_text="Only pairs with one memory updated "
                           "within this window: seconds (604800) or 7d, 12h, 30m.")
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)


class PairMemorySerializer(serializers.Serializer):
    id = serializers.CharField()
    category = serializers.CharField()
    key = serializers.CharField()
    content = serializers.CharField()
    updated_at = TimestampField()


class ContradictionSerializer(serializers.Serializer):
    memories = PairMemorySerializer(many=True)
    kind = serializers.ChoiceField(choices=["negation", "opposite", "numbers", "dates",
                                            "times", "versions", "value"])
    reason = serializers.CharField()
    score = serializers.FloatField()
    similarity = serializers.FloatField()


class ContradictionListSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = ContradictionSerializer(many=True)


class CompactRequestSerializer(StrictSerializer):
    dry_run = serializers.BooleanField(default=False, help_text="Return the plan; change "
                                       "nothing.")
    older_than = DurationField(required=False, allow_null=True, default=None,
                               help_text="Only memories not updated for this long (7d, 12h…).")
    category = serializers.ChoiceField(choices=Category.choices, required=False,
                                       allow_null=True, default=None,
                                       help_text="Credentials are never compacted.")
    max_clusters = serializers.IntegerField(min_value=1, max_value=500, default=50)
    min_cluster_size = serializers.IntegerField(min_value=2, max_value=100, default=2)

    def validate_category(self, value):
        if value == Category.CREDENTIALS:
            raise serializers.ValidationError("Credentials are never compacted.")
        return value


class ClusterMemberSerializer(serializers.Serializer):
    id = serializers.CharField()
    key = serializers.CharField()
    version = serializers.IntegerField()


class ClusterSummarySerializer(serializers.Serializer):
    id = serializers.CharField(allow_null=True, help_text="null in a dry run")
    category = serializers.CharField()
    memory_type = serializers.CharField()
    path = serializers.CharField(allow_blank=True, help_text="\"\" at the root")
    key = serializers.CharField()
    content = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    priority = serializers.CharField()


class ClusterSerializer(serializers.Serializer):
    summary = ClusterSummarySerializer()
    members = ClusterMemberSerializer(many=True)
    similarity = serializers.FloatField(help_text="the lowest similarity of two members")
    applied = serializers.BooleanField(help_text="false when a member changed meanwhile "
                                       "(skipped whole) or in a dry run")


class CompactResponseSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    candidates = serializers.IntegerField()
    clusters = ClusterSerializer(many=True)
    compacted = serializers.IntegerField()
    superseded = serializers.IntegerField()
