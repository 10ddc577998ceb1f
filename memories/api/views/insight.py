"""Insight actions: the audit log, stats, likely contradictions, compaction and its undoing."""

from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from memories.api.schema import ERRORS, PROVENANCE_HEADERS
from memories.api.serializers.insight import (
    AUDIT_LIST,
    AuditQuery,
    CompactRequestSerializer,
    CompactResponseSerializer,
    ContradictionListSerializer,
    ContradictionsQuerySerializer,
)
from memories.api.serializers.memory import MemorySerializer, PlaceFilters
from memories.audit import by_member
from memories.compaction import plan_compaction
from memories.contradictions import find_contradictions
from memories.embeddings import embedding_status
from memories.models import AuditEvent
from memories.recall import display_content
from memories.services import memory_compact, memory_uncompact
from memories.stats import mind_stats
from synapse.api import MIND_PARAMETER, MindAccess, WholeMind, page_of
from synapse.provenance import claim_filters
from synapse.timestamps import format_timestamp


class InsightActions:
    """audit, stats, contradictions, compact, uncompact."""

    @extend_schema(operation_id="memory_audit", parameters=[MIND_PARAMETER, AuditQuery],
                   responses={200: AUDIT_LIST, **ERRORS}, tags=["insight"])
    @action(detail=False, methods=["get"], query_serializer=AuditQuery,
            permission_classes=[MindAccess, WholeMind])
    def audit(self, request):
        """Every state change of this mind, newest first: who, what, when, which memory,
        and the agent, instance and device the request claimed (``agent`` and
        ``instance`` keep the events that claimed them; ``member``, those a member made).
        A path-scoped Mind Key is refused (403 ``path_scoped_key``)."""
        events = AuditEvent.objects.filter(mind=self.mind, **claim_filters(self.query),
                                           **by_member(self.query.get("member")))
        if self.query.get("action"):
            events = events.filter(action=self.query["action"])
        if self.query.get("since"):
            events = events.filter(created_at__gte=self.query["since"])
        if self.query.get("memory"):
            memory_id = self.query["memory"]
            events = events.filter(Q(memory_id=memory_id)
                                   | Q(details__memory_ids__contains=[memory_id]))
        page, counts = page_of(events.order_by("-created_at", "-id"), self.query)
        return Response({**counts, "results": [{
            "id": event.id, "action": event.action,
            "actor": {"type": event.actor_type, "id": event.actor_id,
                      "label": event.actor_label},
            # The same credentials-derived writer, named as on versions.
            "recorded_by": {"type": event.actor_type, "id": event.actor_id,
                            "label": event.actor_label},
            "memory_id": event.memory_id, "details": event.details,
            "agent": event.agent, "agent_instance": event.agent_instance,
            "device": event.device,
            "created_at": format_timestamp(event.created_at)} for event in page]})

    @extend_schema(operation_id="memory_stats", parameters=[MIND_PARAMETER, PlaceFilters],
                   responses={200: OpenApiTypes.OBJECT, **ERRORS}, tags=["insight"])
    @action(detail=False, methods=["get"], query_serializer=PlaceFilters)
    def stats(self, request):
        """Totals of current memories (not in the trash, not superseded): verified,
        unverified, expired, by category, priority, source and type; plus trash,
        superseded, purged and the embedding backlog (of the whole mind). With ``path``
        or ``memory_type`` the counts are of those memories, and ``purged`` is null
        (a purged memory keeps neither)."""
        mind = self.mind
        stats = mind_stats(mind=mind, path=self.query.get("path", ""),
                           memory_type=self.query.get("memory_type"))
        return Response({**stats, "embeddings": embedding_status(mind=mind)})

    @extend_schema(operation_id="memory_contradictions",
                   parameters=[MIND_PARAMETER, ContradictionsQuerySerializer],
                   responses={200: ContradictionListSerializer, **ERRORS}, tags=["insight"],
                   description="Pairs of current memories that likely contradict each other "
                               "(same subject by embeddings, conflicting content by rules), "
                               "best first, each with a reason and a score (0–1).")
    # Each call embeds up to 1,500 memories again.
    @action(detail=False, methods=["get"], query_serializer=ContradictionsQuerySerializer,
            throttle_scope="semantic")
    def contradictions(self, request):
        found = find_contradictions(mind=self.mind, within=self.query.get("within"),
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

    @extend_schema(operation_id="memory_compact", request=CompactRequestSerializer,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: CompactResponseSerializer, **ERRORS}, tags=["insight"],
                   description="Clusters near-duplicate unverified agent memories into one "
                               "summary memory each (source=system); the originals are "
                               "superseded: out of recall, readable by id, and back with "
                               "POST /memory/{summary_id}/uncompact. Verified memories are "
                               "never touched. A path-scoped Mind Key is refused (403 "
                               "`path_scoped_key`).")
    @action(detail=False, methods=["post"], permission_classes=[MindAccess, WholeMind])
    def compact(self, request):
        body = CompactRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        options = body.validated_data
        mind = self.mind
        plan = plan_compaction(mind=mind, older_than=options["older_than"],
                               category=options["category"],
                               max_clusters=options["max_clusters"],
                               min_cluster_size=options["min_cluster_size"])
        applied = {}
        if not options["dry_run"]:
            for done in memory_compact(mind=mind, actor=request.user, plan=plan,
                                       provenance=self.provenance):
                applied[tuple(done.superseded)] = done.summary.id
        clusters = []
        for cluster in plan.clusters:
            summary_id = applied.get(tuple(sorted(m.id for m in cluster.members)))
            clusters.append({
                "summary": {"id": summary_id, "category": cluster.category,
                            "memory_type": cluster.memory_type, "path": cluster.path,
                            "key": cluster.key,
                            "content": cluster.content, "tags": cluster.tags,
                            "priority": cluster.priority},
                "members": [{"id": m.id, "key": m.key, "version": m.version}
                            for m in cluster.members],
                "similarity": cluster.similarity, "applied": summary_id is not None})
        return Response(CompactResponseSerializer({
            "dry_run": options["dry_run"], "candidates": plan.candidates, "clusters": clusters,
            "compacted": len(applied),
            "superseded": sum(len(members) for members in applied)}).data)

    @extend_schema(operation_id="memory_uncompact", request=None,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: MemorySerializer(many=True), **ERRORS}, tags=["insight"],
                   description="Undo a compaction: the originals superseded by this summary "
                               "return to recall; the summary goes to the trash. A "
                               "path-scoped Mind Key is refused (403 `path_scoped_key`).")
    @action(detail=True, methods=["post"], permission_classes=[MindAccess, WholeMind])
    def uncompact(self, request, memory_id: str):
        summary = self.get_object()
        try:
            originals = memory_uncompact(summary=summary, actor=request.user,
                                         provenance=self.provenance)
        except ValueError as error:
            raise exceptions.ValidationError({"id": [str(error)]}) from error
        return Response(MemorySerializer(originals, many=True).data)
