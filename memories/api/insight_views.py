"""Insight routes: likely contradictions, and compaction of near-duplicate agent memories."""

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from memories.api.serializers import MemorySerializer
from memories.api.views import ERRORS, MemoryScopedView
from memories.compaction import plan_compaction
from memories.contradictions import find_contradictions
from memories.models import Category
from memories.recall import display_content
from memories.services import memory_compact, memory_uncompact
from synapse.api import MIND_PARAMETER, DurationField, StrictSerializer, TimestampField


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


class ContradictionsView(MemoryScopedView):
    query_serializer = ContradictionsQuerySerializer
    # Each call embeds up to 1,500 memories again.
    throttle_scope = "semantic"

    @extend_schema(operation_id="memory_contradictions",
                   parameters=[MIND_PARAMETER, ContradictionsQuerySerializer],
                   responses={200: ContradictionListSerializer, **ERRORS}, tags=["insight"],
                   description="Pairs of current memories that likely contradict each other "
                               "(same subject by embeddings, conflicting content by rules), "
                               "best first, each with a reason and a score (0–1).")
    def get(self, request):
        found = find_contradictions(mind=self.get_mind(), within=self.query.get("within"),
                                    limit=self.query["limit"])
        results = [{"memories": [self._side(c.first), self._side(c.second)],
                    "kind": c.conflict.kind, "reason": c.conflict.reason, "score": c.score,
                    "similarity": c.similarity} for c in found]
        return Response(ContradictionListSerializer({"count": len(results),
                                                     "results": results}).data)

    @staticmethod
    def _side(memory) -> dict:
        return {"id": memory.id, "category": memory.category, "key": memory.key,
                "content": display_content(memory), "updated_at": memory.updated_at}


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


class CompactView(MemoryScopedView):
    @extend_schema(operation_id="memory_compact", request=CompactRequestSerializer,
                   parameters=[MIND_PARAMETER],
                   responses={200: CompactResponseSerializer, **ERRORS}, tags=["insight"],
                   description="Clusters near-duplicate unverified agent memories into one "
                               "summary memory each (source=system); the originals are "
                               "superseded: out of recall, readable by id, and back with "
                               "POST /memory/{summary_id}/uncompact. Verified memories are "
                               "never touched.")
    def post(self, request):
        body = CompactRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        options = body.validated_data
        mind = self.get_mind()
        plan = plan_compaction(mind=mind, older_than=options["older_than"],
                               category=options["category"],
                               max_clusters=options["max_clusters"],
                               min_cluster_size=options["min_cluster_size"])
        applied = {}
        if not options["dry_run"]:
            for done in memory_compact(mind=mind, actor=request.user, plan=plan):
                applied[tuple(done.superseded)] = done.summary.id
        clusters = []
        for cluster in plan.clusters:
            summary_id = applied.get(tuple(sorted(m.id for m in cluster.members)))
            clusters.append({
                "summary": {"id": summary_id, "category": cluster.category, "key": cluster.key,
                            "content": cluster.content, "tags": cluster.tags,
                            "priority": cluster.priority},
                "members": [{"id": m.id, "key": m.key, "version": m.version}
                            for m in cluster.members],
                "similarity": cluster.similarity, "applied": summary_id is not None})
        return Response(CompactResponseSerializer({
            "dry_run": options["dry_run"], "candidates": plan.candidates, "clusters": clusters,
            "compacted": len(applied),
            "superseded": sum(len(members) for members in applied)}).data)


class UncompactView(MemoryScopedView):
    @extend_schema(operation_id="memory_uncompact", request=None, parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer(many=True), **ERRORS}, tags=["insight"],
                   description="Undo a compaction: the originals superseded by this summary "
                               "return to recall; the summary goes to the trash.")
    def post(self, request, memory_id: str):
        summary = self.get_memory(memory_id)
        try:
            originals = memory_uncompact(summary=summary, actor=request.user)
        except ValueError as error:
            raise exceptions.ValidationError({"id": [str(error)]}) from error
        return Response(MemorySerializer(originals, many=True).data)
