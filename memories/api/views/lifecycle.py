"""Lifecycle actions: versions and revert, the trash and restore, expiry, bulk delete."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from memories.api.schema import ERRORS, PROVENANCE_HEADERS
from memories.api.serializers.lifecycle import (
    BULK_DELETE_RESULT,
    EXPIRING_LIST,
    EXPIRING_WINDOW,
    RESET_RESULT,
    TRASH_LIST,
    BulkDeleteSerializer,
    ExpiringQuery,
    ResetSerializer,
    RevertSerializer,
    VersionDetailSerializer,
    VersionDiffQuery,
    VersionDiffSerializer,
    VersionListSerializer,
    VersionQuery,
)
from memories.api.serializers.memory import MemorySerializer
from memories.audit import written_by_member
from memories.diff import payload_changes
from memories.export import version_payload
from memories.models import MemoryVersion
from memories.services import (
    MemoryConflict,
    memory_bulk_delete,
    memory_reset,
    memory_restore,
    memory_revert,
)
from minds.access import Action
from synapse.api import CONFLICT, MIND_PARAMETER, Conflict, PageQuery, page_of
from synapse.provenance import claim_filters


class LifecycleActions:
    """versions, revert, trash, restore, expiring, bulk-delete."""

    @extend_schema(operation_id="memory_versions", parameters=[MIND_PARAMETER, VersionQuery],
                   responses={200: VersionListSerializer, **ERRORS}, tags=["lifecycle"])
    @action(detail=True, methods=["get"], query_serializer=VersionQuery)
    def versions(self, request, memory_id: str):
        """The versions of a memory (in the trash too), oldest first, a page at a time
        (``limit``, ``offset``; ``count`` is how many there are), with content, fields,
        who recorded each (and what a backup claimed), the agent, instance and device the
        writing request claimed, the version each was derived from, and time; ``agent``
        and ``instance`` keep the versions that claimed them, ``member`` those a member
        wrote. The owning mind reads credentials here as with GET."""
        memory = self.get_object(in_trash_too=True)
        versions = MemoryVersion.objects.filter(memory=memory, **claim_filters(self.query),
                                                **written_by_member(self.query.get("member")))
        versions, page = page_of(versions.order_by("version"), self.query)
        return Response({"id": memory.id, "current_version": memory.version, **page,
                         "versions": [version_payload(snapshot, reveal=True)
                                      for snapshot in versions]})

    @extend_schema(operation_id="memory_version", parameters=[MIND_PARAMETER],
                   responses={200: VersionDetailSerializer, **ERRORS}, tags=["lifecycle"])
    @action(detail=True, methods=["get"], url_path="versions/<int:version>",
            url_name="version")
    def version_detail(self, request, memory_id: str, version: int):
        """Exactly version ``version`` of a memory (cited as ``mem_…@v<version>``), with
        the fields of a GET /memory/{id}/versions item; 404 when the memory has no such
        version."""
        memory = self.get_object(in_trash_too=True)
        snapshot = MemoryVersion.objects.filter(memory=memory, version=version).first()
        if snapshot is None:
            raise exceptions.NotFound(f"Memory {memory.id} has no version {version}.")
        return Response({"id": memory.id, "current_version": memory.version,
                         **version_payload(snapshot, reveal=True)})

    @extend_schema(operation_id="memory_citation", parameters=[MIND_PARAMETER],
                   responses={200: VersionDetailSerializer, **ERRORS}, tags=["lifecycle"])
    def version_by_citation(self, request, memory_id: str, version: int):
        """``GET /memory/mem_…@vN``: exactly the version a citation names (as
        GET /memory/{id}/versions/{version})."""
        return self.version_detail(request, memory_id, version)

    @extend_schema(operation_id="memory_version_diff", parameters=[MIND_PARAMETER,
                                                                   VersionDiffQuery],
                   responses={200: VersionDiffSerializer, **ERRORS}, tags=["lifecycle"])
    @action(detail=True, methods=["get"], url_path="diff", url_name="version-diff",
            query_serializer=VersionDiffQuery)
    def version_diff(self, request, memory_id: str):
        """What changed from version ``from`` to version ``to`` of a memory: each field
        that differs as ``{"field", "from", "to"}``, the content as hunks of lines marked
        ``" "``, ``"-"``, ``"+"`` (bounded as the web UI's diff: past the bounds,
        ``too_large`` and no hunks). 404 when either version is absent."""
        memory = self.get_object(in_trash_too=True)
        numbers = self.query["from"], self.query["to"]
        by_number = {snapshot.version: snapshot for snapshot in
                     MemoryVersion.objects.filter(memory=memory, version__in=numbers)}
        for number in numbers:
            if number not in by_number:
                raise exceptions.NotFound(f"Memory {memory.id} has no version {number}.")
        old, new = (version_payload(by_number[number], reveal=True) for number in numbers)
        return Response({"id": memory.id, "from": numbers[0], "to": numbers[1],
                         "changes": payload_changes(old, new)})

    @extend_schema(operation_id="memory_revert", request=RevertSerializer,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: MemorySerializer, **CONFLICT, **ERRORS}, tags=["lifecycle"])
    @action(detail=True, methods=["post"])
    def revert(self, request, memory_id: str):
        """Make a new version equal to version ``n``; the history is kept."""
        serializer = RevertSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = self.get_object(in_trash_too=True)
        if memory.deleted_at is not None:
            raise Conflict("This memory is in the trash; restore it before reverting.")
        number = serializer.validated_data["version"]
        try:
            memory = memory_revert(memory=memory, actor=request.user, version=number,
                                   provenance=self.provenance)
        except MemoryVersion.DoesNotExist:
            raise exceptions.ValidationError(
                {"version": [f"This memory has no version {number} (it is at version "
                             f"{memory.version})."]}) from None
        except MemoryConflict as error:
            raise Conflict(str(error)) from error
        return Response(MemorySerializer(memory).data)

    @extend_schema(operation_id="memory_trash", parameters=[MIND_PARAMETER, PageQuery],
                   responses={200: TRASH_LIST, **ERRORS}, tags=["lifecycle"])
    @action(detail=False, methods=["get"], query_serializer=PageQuery)
    def trash(self, request):
        """Memories in the trash, most recently deleted first (restorable until purged)."""
        trash = self.get_queryset().in_trash().without_vectors().order_by("-deleted_at", "id")
        page, counts = page_of(trash, self.query)
        return Response({**counts, "results": MemorySerializer(page, many=True).data})

    @extend_schema(operation_id="memory_restore", request=None,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: MemorySerializer, **CONFLICT, **ERRORS}, tags=["lifecycle"])
    @action(detail=True, methods=["post"])
    def restore(self, request, memory_id: str):
        """Take a memory out of the trash. 409 when its key was reused meanwhile."""
        try:
            memory = memory_restore(memory=self.get_object(in_trash_too=True),
                                    actor=request.user, provenance=self.provenance)
        except MemoryConflict as error:
            raise Conflict(str(error)) from error
        return Response(MemorySerializer(memory).data)

    @extend_schema(operation_id="memory_expiring", parameters=[MIND_PARAMETER, ExpiringQuery],
                   responses={200: EXPIRING_LIST, **ERRORS}, tags=["lifecycle"])
    @action(detail=False, methods=["get"], query_serializer=ExpiringQuery)
    def expiring(self, request):
        """Current memories that expire within the window (default 7 days), soonest first
        (already expired ones are listed by GET /memory); optionally under a path and of
        one type."""
        now = timezone.now()
        within = self.query.get("within", EXPIRING_WINDOW)
        expiring = (self.filter_queryset(self.get_queryset().current()).without_vectors()
                    .filter(expires_at__gt=now, expires_at__lte=now + within)
                    .order_by("expires_at", "id"))
        page, counts = page_of(expiring, self.query)
        return Response({"count": counts["count"], "within": int(within.total_seconds()),
                         "results": MemorySerializer(page, many=True).data})

    @extend_schema(operation_id="memory_bulk_delete", request=BulkDeleteSerializer,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: BULK_DELETE_RESULT, **ERRORS}, tags=["lifecycle"])
    @action(detail=False, methods=["post"], url_path="bulk-delete")
    def bulk_delete(self, request):
        """Move up to 1000 memories to the trash; ids that are not this mind's (or already
        in the trash) come back as not found, untouched."""
        serializer = BulkDeleteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        deleted, not_found = memory_bulk_delete(mind=self.mind, actor=request.user,
                                                ids=serializer.validated_data["ids"],
                                                provenance=self.provenance)
        return Response({"count": len(deleted), "deleted": deleted, "not_found": not_found})

    @extend_schema(operation_id="memory_reset", request=ResetSerializer,
                   parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
                   responses={200: RESET_RESULT, **ERRORS}, tags=["lifecycle"])
    @action(detail=False, methods=["post"], mind_action=Action.MANAGE)
    def reset(self, request):
        """Purge for good every memory at ``path`` or below it (of ``memory_type`` and
        ``category`` when given): current, trashed, superseded and expired alike, with
        their versions and everything that copied their words (docs/api.md, "Scope
        reset"); ``confirm`` must repeat the path. Tombstones without text keep sync from
        bringing them back. Mind Keys: a write key, on a mind that allows it
        (``agents_may_reset``; else 403 ``reset_not_allowed``), within its paths (403
        ``path_out_of_scope``)."""
        body = ResetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        options = body.validated_data
        counts = memory_reset(mind=self.mind, actor=request.user, path=options["path"],
                              memory_type=options.get("memory_type"),
                              category=options.get("category"), provenance=self.provenance)
        return Response({"path": options["path"],
                         "memory_type": options.get("memory_type", ""),
                         "category": options.get("category", ""), "counts": counts})
