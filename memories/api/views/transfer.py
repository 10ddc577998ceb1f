"""Transfer actions: diff and sync with another instance, export and import of a mind."""

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.response import Response

from memories import services
from memories.api.schema import ERRORS, PROVENANCE_HEADERS
from memories.api.serializers.transfer import (
    DIFF,
    IMPORT_RESULT,
    SYNC_RESULT,
    DiffQuery,
    ExportQuery,
    SyncSerializer,
    read_sync,
)
from memories.export import BackupInvalid, export_csv, export_json, read_backup
from memories.sync import Since
from memories.sync import diff as diff_since
from synapse.api import MIND_PARAMETER, MindAccess, PlaintextForHumans, WholeMind
from synapse.db import streamed
from synapse.parsers import StreamingJSONParser

EXPORT_ANSWERS = {(200, "application/json"): OpenApiTypes.OBJECT,
                  (200, "text/csv"): OpenApiTypes.STR, **ERRORS}


class TransferActions:
    """diff, sync, mind-export (and /mind/export), mind-import."""

    @extend_schema(
        operation_id="memory_diff", parameters=[MIND_PARAMETER, DiffQuery],
        responses={200: DIFF, **ERRORS}, tags=["sync"],
        description="Changes since a cursor. Passing the returned `cursor` back never skips "
                    "a change, even when writes commit out of order; a change may come "
                    "twice. With `has_more`, call again at once with the cursor.")
    @action(detail=False, methods=["get"], query_serializer=DiffQuery,
            permission_classes=[MindAccess, PlaintextForHumans])
    def diff(self, request):
        result = diff_since(mind=self.mind, since=self.query.get("since") or Since(),
                            limit=self.query["limit"], reveal=self.query["include_credentials"],
                            path=self.query.get("path", ""))
        return Response(result.as_dict())

    @extend_schema(
        operation_id="memory_sync", request=SyncSerializer,
        parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
        responses={200: SYNC_RESULT, **ERRORS}, tags=["sync"],
        description="Apply changes from another instance. Idempotent; the later `updated_at` "
                    "wins (ties: a delete, then the larger content hash); a delete wins over "
                    "an older update and nothing deleted comes back with an older copy. "
                    "Changes from a Mind Key arrive unverified.")
    @action(detail=False, methods=["post"], parser_classes=[StreamingJSONParser],
            body_limit="SYNC_MAX_BODY_BYTES", throttle_scope="sync")
    def sync(self, request):
        result = services.memory_sync(mind=self.mind, actor=request.user,
                                      changes=read_sync(request.data),
                                      provenance=self.provenance)
        return Response({**result.counts(), "conflicts": result.conflicts})

    @extend_schema(
        operation_id="memory_export", parameters=[MIND_PARAMETER, ExportQuery],
        responses=EXPORT_ANSWERS, tags=["lifecycle"],
        description="`json`: a full backup (every memory with its versions, the trash, "
                    "tombstones, provenance) that POST /memory/mind-import restores. "
                    "`csv`: current memories. Streamed.")
    @action(detail=False, methods=["get"], url_path="mind-export", query_serializer=ExportQuery,
            permission_classes=[MindAccess, PlaintextForHumans], throttle_scope="export")
    def mind_export(self, request):
        mind = self.mind
        reveal, path = self.query["include_credentials"], self.query.get("path", "")
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        if self.query["format"] == "csv":
            body = export_csv(mind=mind, reveal=reveal, path=path)
            content_type, extension = "text/csv; charset=utf-8", "csv"
        else:
            body = export_json(mind=mind, reveal=reveal, path=path)
            content_type, extension = "application/json", "json"
        # Read in one transaction over cursors, from the first row to the last (synapse.db).
        response = StreamingHttpResponse(streamed(body), content_type=content_type)
        response["Content-Disposition"] = (
            f'attachment; filename="synapse-{mind.id}-{stamp}.{extension}"')
        return response

    @extend_schema(operation_id="mind_export", parameters=[MIND_PARAMETER, ExportQuery],
                   responses=EXPORT_ANSWERS, tags=["lifecycle"],
                   description="Alias of GET /memory/mind-export.")
    def mind_export_alias(self, request):
        return self.mind_export(request)

    @extend_schema(
        operation_id="memory_import", request=OpenApiTypes.OBJECT,
        parameters=[MIND_PARAMETER, *PROVENANCE_HEADERS],
        responses={200: IMPORT_RESULT, **ERRORS}, tags=["lifecycle"],
        description="Restore a JSON export: exactly into an empty mind (ids kept where "
                    "free), merged with the sync rules into a non-empty one. A path-scoped "
                    "Mind Key is refused (403 `path_scoped_key`).")
    @action(detail=False, methods=["post"], url_path="mind-import",
            parser_classes=[StreamingJSONParser], body_limit="IMPORT_MAX_BODY_BYTES",
            throttle_scope="import", permission_classes=[MindAccess, WholeMind])
    def mind_import(self, request):
        try:
            counts = services.mind_import(mind=self.mind, actor=request.user,
                                          backup=read_backup(request.data),
                                          provenance=self.provenance)
        except BackupInvalid as error:
            raise exceptions.ValidationError({error.path: [error.message]}) from None
        except services.ImportRejected as error:
            raise exceptions.ValidationError({"memories": [str(error)]}) from None
        return Response(counts)
