"""Lifecycle routes (SPEC §3–4): versions, trash, expiry, diff and sync, bulk delete,
export and import, audit and stats."""

from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Q
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from memories.api.serializers import (
    MAX_CONTENT,
    MAX_KEY_LENGTH,
    MemorySerializer,
    TagsField,
    validate_key,
)
from memories.api.views import ERRORS, MemoryScopedView
from memories.embeddings import embedding_status
from memories.export import (
    BackupInvalid,
    export_csv,
    export_json,
    read_backup,
    version_payload,
)
from memories.models import AuditEvent, Category, MemoryTombstone, MemoryVersion, Priority, Source
from memories.services import (
    ImportRejected,
    MemoryConflict,
    memory_bulk_delete,
    memory_restore,
    memory_revert,
    memory_sync,
    mind_import,
    normalize_tags,
)
from memories.sync import Change, Since, diff, parse_since
from minds.authentication import is_agent
from synapse.api import (
    MIND_PARAMETER,
    Conflict,
    DurationField,
    PageQuery,
    StrictSerializer,
    TimestampField,
    page_of,
)
from synapse.parsers import JSONStream, PayloadTooLarge, StreamingJSONParser
from synapse.timestamps import format_timestamp

# A sync is one diff page pushed to another instance: at most SYNC_MAX_CHANGES changes, in
# at most settings.SYNC_MAX_BODY_BYTES (a default page of 1000 memories holding the longest
# content allowed fits). Both are checked while the body is read (synapse.parsers).
SYNC_MAX_CHANGES = 5000
SYNC_LISTS = ("added", "updated", "deleted", "memories")
BULK_DELETE_MAX = 1000
CONFLICT = {409: OpenApiResponse(description="Conflicts with the current state (error shape)")}


def _reveal_credentials(request, asked: bool) -> bool:
    """Credentials plaintext leaves in diff and export only when a human asks for it."""
    if asked and is_agent(request.user):
        raise exceptions.PermissionDenied(
            "Only a human may export credentials in plaintext; Mind Keys get them redacted.")
    return asked


# -- Versions -------------------------------------------------------------------------------

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
    actor = serializers.CharField(help_text="recorded_by as type:label (older clients read it).")
    recorded_by = serializers.DictField(
        help_text="Who wrote this version here, from the request's credentials: "
                  "{type: key|user|system|legacy, id, label}.")
    claimed_source = serializers.CharField(
        help_text="The source a restored backup or a sync claimed for it; blank otherwise.")
    claimed_actor = serializers.CharField(
        help_text="The author a restored backup claimed for it (never trusted); blank otherwise.")
    created_at = serializers.DateTimeField()


class VersionListSerializer(serializers.Serializer):
    id = serializers.CharField()
    current_version = serializers.IntegerField()
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    versions = VersionSerializer(many=True)


class MemoryVersionsView(MemoryScopedView):
    query_serializer = PageQuery

    @extend_schema(operation_id="memory_versions", parameters=[MIND_PARAMETER, PageQuery],
                   responses={200: VersionListSerializer, **ERRORS}, tags=["lifecycle"])
    def get(self, request, memory_id: str):
        """The versions of a memory (in the trash too), oldest first, a page at a time
        (``limit``, ``offset``; ``count`` is how many there are), with content, fields,
        who recorded each (and what a backup claimed) and time. The owning mind reads
        credentials here as with GET."""
        memory = self.memories().filter(pk=memory_id).first()
        if memory is None:
            raise exceptions.NotFound("No such memory.")
        versions, page = page_of(
            MemoryVersion.objects.filter(memory=memory).order_by("version"), self.query)
        return Response({"id": memory.id, "current_version": memory.version, **page,
                         "versions": [version_payload(snapshot, reveal=True)
                                      for snapshot in versions]})


class RevertSerializer(StrictSerializer):
    version = serializers.IntegerField(min_value=1)


class MemoryRevertView(MemoryScopedView):
    @extend_schema(operation_id="memory_revert", request=RevertSerializer,
                   parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **CONFLICT, **ERRORS}, tags=["lifecycle"])
    def post(self, request, memory_id: str):
        """Make a new version equal to version ``n``; the history is kept."""
        serializer = RevertSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = self.memories().filter(pk=memory_id).select_related("mind").first()
        if memory is None:
            raise exceptions.NotFound("No such memory.")
        if memory.deleted_at is not None:
            raise Conflict("This memory is in the trash; restore it before reverting.")
        number = serializer.validated_data["version"]
        try:
            memory = memory_revert(memory=memory, actor=request.user, version=number)
        except MemoryVersion.DoesNotExist:
            raise exceptions.ValidationError(
                {"version": [f"This memory has no version {number} (it is at version "
                             f"{memory.version})."]}) from None
        except MemoryConflict as error:
            raise Conflict(str(error)) from error
        return Response(MemorySerializer(memory).data)


# -- Trash ----------------------------------------------------------------------------------

class TrashView(MemoryScopedView):
    query_serializer = PageQuery

    @extend_schema(operation_id="memory_trash", parameters=[MIND_PARAMETER, PageQuery],
                   responses={200: inline_serializer("TrashList", {
                       "count": serializers.IntegerField(), "limit": serializers.IntegerField(),
                       "offset": serializers.IntegerField(),
                       "results": MemorySerializer(many=True)}), **ERRORS},
                   tags=["lifecycle"])
    def get(self, request):
        """Memories in the trash, most recently deleted first (restorable until purged)."""
        limit, offset = self.query["limit"], self.query["offset"]
        trash = self.memories().in_trash().defer("search_vector", "embedding").order_by(
            "-deleted_at", "id")
        return Response({"count": trash.count(), "limit": limit, "offset": offset,
                         "results": MemorySerializer(trash[offset:offset + limit],
                                                     many=True).data})


class MemoryRestoreView(MemoryScopedView):
    @extend_schema(operation_id="memory_restore", request=None, parameters=[MIND_PARAMETER],
                   responses={200: MemorySerializer, **CONFLICT, **ERRORS}, tags=["lifecycle"])
    def post(self, request, memory_id: str):
        """Take a memory out of the trash. 409 when its key was reused meanwhile."""
        memory = self.memories().filter(pk=memory_id).select_related("mind").first()
        if memory is None:
            raise exceptions.NotFound("No such memory.")
        try:
            memory = memory_restore(memory=memory, actor=request.user)
        except MemoryConflict as error:
            raise Conflict(str(error)) from error
        return Response(MemorySerializer(memory).data)


# -- Expiry ---------------------------------------------------------------------------------

class ExpiringQuery(PageQuery):
    within = DurationField(help_text="Seconds (604800) or 7d, 12h, 30m.")


class ExpiringView(MemoryScopedView):
    query_serializer = ExpiringQuery

    @extend_schema(operation_id="memory_expiring", parameters=[MIND_PARAMETER, ExpiringQuery],
                   responses={200: inline_serializer("ExpiringList", {
                       "count": serializers.IntegerField(), "within": serializers.IntegerField(),
                       "results": MemorySerializer(many=True)}), **ERRORS},
                   tags=["lifecycle"])
    def get(self, request):
        """Current memories that expire within the window, soonest first (already expired
        ones are listed by GET /memory)."""
        now = timezone.now()
        within = self.query["within"]
        expiring = (self.memories().current().defer("search_vector", "embedding")
                    .filter(expires_at__gt=now, expires_at__lte=now + within)
                    .order_by("expires_at", "id"))
        limit, offset = self.query["limit"], self.query["offset"]
        return Response({"count": expiring.count(), "within": int(within.total_seconds()),
                         "results": MemorySerializer(expiring[offset:offset + limit],
                                                     many=True).data})


# -- Diff and sync --------------------------------------------------------------------------

@extend_schema_field(OpenApiTypes.STR)
class SinceField(serializers.Field):
    """A diff cursor (``tx…``) or a timestamp; empty means from the beginning."""

    def to_internal_value(self, data):
        if not isinstance(data, str) or len(data) > 100:
            raise serializers.ValidationError("Expected a cursor or a timestamp.")
        try:
            return parse_since(data)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from None

    def to_representation(self, value):
        return str(value)


class DiffQuery(serializers.Serializer):
    since = SinceField(required=False,
                       help_text="The cursor of the previous diff (tx…), or a timestamp. "
                                 "Absent: everything.")
    limit = serializers.IntegerField(min_value=1, max_value=5000, default=1000)
    include_credentials = serializers.BooleanField(
        default=False, help_text="Credentials content in plaintext (humans only).")


class DiffView(MemoryScopedView):
    query_serializer = DiffQuery

    @extend_schema(
        operation_id="memory_diff", parameters=[MIND_PARAMETER, DiffQuery],
        responses={200: inline_serializer("Diff", {
            "added": serializers.ListField(child=serializers.DictField()),
            "updated": serializers.ListField(child=serializers.DictField()),
            "deleted": serializers.ListField(child=serializers.DictField()),
            "cursor": serializers.CharField(), "has_more": serializers.BooleanField()}),
            **ERRORS},
        tags=["sync"],
        description="Changes since a cursor. Passing the returned `cursor` back never skips "
                    "a change, even when writes commit out of order; a change may come "
                    "twice. With `has_more`, call again at once with the cursor.")
    def get(self, request):
        reveal = _reveal_credentials(request, self.query["include_credentials"])
        result = diff(mind=self.get_mind(), since=self.query.get("since") or Since(),
                      limit=self.query["limit"], reveal=reveal)
        return Response(result.as_dict())


class SyncMemorySerializer(StrictSerializer):
    """One memory state from another instance (the diff's and the export's shape)."""

    id = serializers.RegexField(r"^mem_[A-Za-z0-9]{1,36}$", required=False)
    category = serializers.ChoiceField(choices=Category.choices)
    key = serializers.CharField(max_length=MAX_KEY_LENGTH, validators=[validate_key])
    content = serializers.CharField(min_length=1, max_length=MAX_CONTENT,
                                    trim_whitespace=False, required=False)
    content_redacted = serializers.BooleanField(default=False)
    tags = TagsField(default=list)
    priority = serializers.ChoiceField(choices=Priority.choices, default=Priority.NORMAL)
    source = serializers.ChoiceField(choices=Source.choices, required=False)
    verified = serializers.BooleanField(default=False)
    verified_at = TimestampField(allow_null=True, default=None)
    confidence = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    expires_at = TimestampField(allow_null=True, default=None)
    version = serializers.IntegerField(min_value=1, required=False,
                                       help_text="Ignored: versions are local.")
    created_at = TimestampField(required=False)
    updated_at = TimestampField(required=False)
    deleted_at = TimestampField(allow_null=True, default=None)
    superseded_at = TimestampField(allow_null=True, default=None)
    superseded_by = serializers.CharField(allow_null=True, required=False,
                                          help_text="Ignored: ids are local.")
    mind_id = serializers.CharField(required=False,
                                    help_text="Ignored: the target is always your mind.")

    def to_change(self, data: dict, *, deleted: bool) -> Change:
        deleted = deleted or data["deleted_at"] is not None
        when = data.get("updated_at") or data["deleted_at"]
        if deleted:
            return Change(id=data.get("id"), category=data["category"], key=data["key"],
                          updated_at=when, deleted=True, deleted_at=data["deleted_at"] or when)
        source = data.get("source") or Source.AGENT
        confidence = data.get("confidence")
        if confidence is None:
            confidence = 1.0 if source == Source.USER else 0.7
        return Change(
            id=data.get("id"), category=data["category"], key=data["key"], updated_at=when,
            fields={"content": data["content"], "tags": normalize_tags(data["tags"]),
                    "priority": data["priority"], "confidence": confidence,
                    "expires_at": data["expires_at"], "superseded_at": data["superseded_at"]},
            source=source, verified=data["verified"], verified_at=data["verified_at"],
            created_at=data.get("created_at"), redacted=data["content_redacted"])


def _sync_list():
    return serializers.ListField(child=SyncMemorySerializer(), required=False)


class SyncSerializer(StrictSerializer):
    """``{"added", "updated", "deleted"}`` (a diff, as it came) or ``{"memories"}``.

    Documents the body (OpenAPI); :func:`read_sync` reads it, item by item."""

    added = _sync_list()
    updated = _sync_list()
    deleted = _sync_list()
    memories = _sync_list()
    cursor = serializers.CharField(required=False, help_text="Ignored (a diff's own).")
    has_more = serializers.BooleanField(required=False, help_text="Ignored (a diff's own).")


SEND_SYNC_LISTS = "Send {\"added\", \"updated\", \"deleted\"} or {\"memories\"}."


def read_sync(body) -> Iterator[Change]:
    """The changes of a sync body, each checked as it arrives (SyncMemorySerializer).

    A 413 as soon as the body carries more than SYNC_MAX_CHANGES changes; a 400 naming
    the item for a bad one. Read it inside the transaction that applies it."""
    if not isinstance(body, JSONStream):  # no body at all
        raise exceptions.ValidationError({"non_field_errors": [SEND_SYNC_LISTS]})
    count, present = 0, False
    for member in body.members():
        if member.name in ("cursor", "has_more"):  # ignored, but typed
            value = member.scalar() if member.is_scalar else object()  # object(): not built
            try:
                SyncSerializer().fields[member.name].run_validation(value)
            except exceptions.ValidationError as error:
                raise exceptions.ValidationError({member.name: error.detail}) from None
            continue
        if member.name not in SYNC_LISTS:
            raise exceptions.ValidationError({member.name: ["Unknown field."]})
        present = True
        if not member.is_list:
            raise exceptions.ValidationError({member.name: ["Expected a list of items."]})
        for position, raw in enumerate(member.items()):
            count += 1
            if count > SYNC_MAX_CHANGES:
                raise PayloadTooLarge(f"A sync carries at most {SYNC_MAX_CHANGES} changes. "
                                      "Send it in parts.")
            yield _sync_change(member.name, position, raw)
    if not present:
        raise exceptions.ValidationError({"non_field_errors": [SEND_SYNC_LISTS]})


def _sync_change(name: str, position: int, raw) -> Change:
    serializer = SyncMemorySerializer(data=raw)
    if not serializer.is_valid():
        raise exceptions.ValidationError({name: {position: serializer.errors}})
    item = serializer.validated_data
    if "updated_at" not in item and item["deleted_at"] is None:
        field_name = "deleted_at" if name == "deleted" else "updated_at"
        message = ("A tombstone needs deleted_at or updated_at." if name == "deleted"
                   else "This field is required.")
        raise exceptions.ValidationError({f"{name}[{position}].{field_name}": [message]})
    if name != "deleted" and item["deleted_at"] is None and "content" not in item:
        raise exceptions.ValidationError(
            {f"{name}[{position}].content": ["This field is required."]})
    return serializer.to_change(item, deleted=name == "deleted")


SYNC_RESULT = inline_serializer("SyncResult", {
    name: serializers.IntegerField() for name in
    ("added", "updated", "deleted", "unchanged", "stale", "skipped_redacted")} | {
    "conflicts": serializers.ListField(child=serializers.DictField())})


class SyncView(MemoryScopedView):
    parser_classes = [StreamingJSONParser]
    throttle_scope = "sync"

    @staticmethod
    def max_body_bytes() -> int:
        return settings.SYNC_MAX_BODY_BYTES

    @extend_schema(
        operation_id="memory_sync", request=SyncSerializer, parameters=[MIND_PARAMETER],
        responses={200: SYNC_RESULT, **ERRORS}, tags=["sync"],
        description="Apply changes from another instance. Idempotent; the later `updated_at` "
                    "wins (ties: a delete, then the larger content hash); a delete wins over "
                    "an older update and nothing deleted comes back with an older copy. "
                    "Changes from a Mind Key arrive unverified.")
    def post(self, request):
        result = memory_sync(mind=self.get_mind(), actor=request.user,
                             changes=read_sync(request.data))
        return Response({**result.counts(), "conflicts": result.conflicts})


# -- Bulk delete ----------------------------------------------------------------------------

class BulkDeleteSerializer(StrictSerializer):
    ids = serializers.ListField(child=serializers.CharField(max_length=64), min_length=1,
                                max_length=BULK_DELETE_MAX)


class BulkDeleteView(MemoryScopedView):
    @extend_schema(operation_id="memory_bulk_delete", request=BulkDeleteSerializer,
                   parameters=[MIND_PARAMETER],
                   responses={200: inline_serializer("BulkDeleteResult", {
                       "count": serializers.IntegerField(),
                       "deleted": serializers.ListField(child=serializers.CharField()),
                       "not_found": serializers.ListField(child=serializers.CharField())}),
                       **ERRORS}, tags=["lifecycle"])
    def post(self, request):
        """Move up to 1000 memories to the trash; ids that are not this mind's (or already
        in the trash) come back as not found, untouched."""
        serializer = BulkDeleteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        deleted, not_found = memory_bulk_delete(mind=self.get_mind(), actor=request.user,
                                                ids=serializer.validated_data["ids"])
        return Response({"count": len(deleted), "deleted": deleted, "not_found": not_found})


# -- Export and import ----------------------------------------------------------------------

class ExportQuery(serializers.Serializer):
    format = serializers.ChoiceField(choices=["json", "csv"], default="json")
    include_credentials = serializers.BooleanField(
        default=False, help_text="Credentials content in plaintext (humans only).")


class ExportView(MemoryScopedView):
    query_serializer = ExportQuery
    throttle_scope = "export"

    @extend_schema(
        operation_id="memory_export", parameters=[MIND_PARAMETER, ExportQuery],
        responses={(200, "application/json"): OpenApiTypes.OBJECT,
                   (200, "text/csv"): OpenApiTypes.STR, **ERRORS},
        tags=["lifecycle"],
        description="`json`: a full backup (every memory with its versions, the trash, "
                    "tombstones, provenance) that POST /memory/mind-import restores. "
                    "`csv`: current memories. Streamed.")
    def get(self, request):
        mind = self.get_mind()
        reveal = _reveal_credentials(request, self.query["include_credentials"])
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        if self.query["format"] == "csv":
            response = StreamingHttpResponse(export_csv(mind=mind, reveal=reveal),
                                             content_type="text/csv; charset=utf-8")
            extension = "csv"
        else:
            response = StreamingHttpResponse(export_json(mind=mind, reveal=reveal),
                                             content_type="application/json")
            extension = "json"
        response["Content-Disposition"] = (
            f'attachment; filename="synapse-{mind.id}-{stamp}.{extension}"')
        return response


class MindExportView(ExportView):
    @extend_schema(operation_id="mind_export", parameters=[MIND_PARAMETER, ExportQuery],
                   responses={(200, "application/json"): OpenApiTypes.OBJECT,
                              (200, "text/csv"): OpenApiTypes.STR, **ERRORS},
                   tags=["lifecycle"], description="Alias of GET /memory/mind-export.")
    def get(self, request):
        return super().get(request)


class ImportView(MemoryScopedView):
    parser_classes = [StreamingJSONParser]
    throttle_scope = "import"

    @staticmethod
    def max_body_bytes() -> int:
        return settings.IMPORT_MAX_BODY_BYTES

    @extend_schema(
        operation_id="memory_import", request=OpenApiTypes.OBJECT, parameters=[MIND_PARAMETER],
        responses={200: inline_serializer("ImportResult", {
            "mode": serializers.ChoiceField(choices=["restore", "merge"])}), **ERRORS},
        tags=["lifecycle"],
        description="Restore a JSON export: exactly into an empty mind (ids kept where "
                    "free), merged with the sync rules into a non-empty one.")
    def post(self, request):
        try:
            counts = mind_import(mind=self.get_mind(), actor=request.user,
                                 backup=read_backup(request.data))
        except BackupInvalid as error:
            raise exceptions.ValidationError({error.path: [error.message]}) from None
        except ImportRejected as error:
            raise exceptions.ValidationError({"memories": [str(error)]}) from None
        return Response(counts)


# -- Audit and stats ------------------------------------------------------------------------

class AuditQuery(PageQuery):
    action = serializers.CharField(max_length=30, required=False)
    since = TimestampField(required=False)
    memory = serializers.CharField(max_length=64, required=False)


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    action = serializers.CharField()
    actor = serializers.DictField()
    recorded_by = serializers.DictField()
    memory_id = serializers.CharField()
    details = serializers.DictField()
    created_at = serializers.DateTimeField()


class AuditView(MemoryScopedView):
    query_serializer = AuditQuery

    @extend_schema(operation_id="memory_audit", parameters=[MIND_PARAMETER, AuditQuery],
                   responses={200: inline_serializer("AuditList", {
                       "count": serializers.IntegerField(), "limit": serializers.IntegerField(),
                       "offset": serializers.IntegerField(),
                       "results": AuditEventSerializer(many=True)}), **ERRORS},
                   tags=["insight"])
    def get(self, request):
        """Every state change of this mind, newest first: who, what, when, which memory."""
        events = AuditEvent.objects.filter(mind=self.get_mind())
        if self.query.get("action"):
            events = events.filter(action=self.query["action"])
        if self.query.get("since"):
            events = events.filter(created_at__gte=self.query["since"])
        if self.query.get("memory"):
            memory_id = self.query["memory"]
            events = events.filter(Q(memory_id=memory_id)
                                   | Q(details__memory_ids__contains=[memory_id]))
        events = events.order_by("-created_at", "-id")
        limit, offset = self.query["limit"], self.query["offset"]
        return Response({"count": events.count(), "limit": limit, "offset": offset,
                         "results": [{
                             "id": event.id, "action": event.action,
                             "actor": {"type": event.actor_type, "id": event.actor_id,
                                       "label": event.actor_label},
                             # The same credentials-derived writer, named as on versions.
                             "recorded_by": {"type": event.actor_type, "id": event.actor_id,
                                             "label": event.actor_label},
                             "memory_id": event.memory_id, "details": event.details,
                             "created_at": format_timestamp(event.created_at)}
                             for event in events[offset:offset + limit]]})


class StatsView(MemoryScopedView):
    @extend_schema(operation_id="memory_stats", parameters=[MIND_PARAMETER],
                   responses={200: OpenApiTypes.OBJECT, **ERRORS}, tags=["insight"])
    def get(self, request):
        """Totals of current memories (not in the trash, not superseded): verified,
        unverified, expired, by category, priority and source; plus trash, superseded,
        purged and the embedding backlog."""
        mind = self.get_mind()
        now = timezone.now()
        current = Q(deleted_at__isnull=True, superseded_at__isnull=True)
        totals = self.memories().aggregate(
            total=Count("id", filter=current),
            verified=Count("id", filter=current & Q(verified=True)),
            expired=Count("id", filter=current & Q(expires_at__lte=now)),
            in_trash=Count("id", filter=Q(deleted_at__isnull=False)),
            superseded=Count("id", filter=Q(deleted_at__isnull=True,
                                            superseded_at__isnull=False)))
        groups = {}
        for name, choices in (("category", Category), ("priority", Priority),
                              ("source", Source)):
            counts = dict(self.memories().current().order_by().values_list(name)
                          .annotate(n=Count("id")).values_list(name, "n"))
            groups[f"by_{name}"] = {value: counts.get(value, 0) for value in choices.values}
        return Response({
            "total": totals["total"], "verified": totals["verified"],
            "unverified": totals["total"] - totals["verified"], **groups,
            "expired": totals["expired"], "in_trash": totals["in_trash"],
            "superseded": totals["superseded"],
            "purged": MemoryTombstone.objects.filter(mind=mind).count(),
            "embeddings": embedding_status(mind=mind)})
