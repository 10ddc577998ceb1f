"""Memory serializers: strict input (unknown and server-set fields refused), one output; recall."""

import math
from collections.abc import Iterable, Iterator

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer

from memories import recall as recall_module
from memories.crypto import CredentialsUnreadable
from memories.models import Category, Memory, MemoryType, Priority, Source
from memories.paths import InvalidPath, normalize_path
from memories.recall import (
    RecallTotals,
    display_content,
    format_block,
    recall_header,
)
from synapse.api import PageQuery, PageSerializer, SingleLineName, StrictSerializer, TimestampField
from synapse.text import validate_single_line
from synapse.timestamps import format_timestamp

MAX_CONTENT = 50_000
MAX_TAGS = 20
MAX_TAG_LENGTH = 50
MAX_KEY_LENGTH = 200
# Server-set fields (docs/api.md#the-memory-object): a request that carries one is
# refused, row unchanged.
SERVER_FIELDS = frozenset({"verified", "mind_id", "mind", "id", "version", "created_at",
                           "updated_at", "deleted_at"})


validate_key = SingleLineName("key")


class TagsField(serializers.ListField):
    child = serializers.CharField(max_length=MAX_TAG_LENGTH, allow_blank=False,
                                  validators=[validate_single_line])

    def __init__(self, **kwargs):
        super().__init__(max_length=MAX_TAGS, **kwargs)


class PathField(serializers.CharField):
    """A memory path (docs/api.md#paths), taken in its normal form; refused with the reason.
    Blank, or ``/``, is the root."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "Lower-case segments joined by '/', e.g. "
                                       "projects/memory-os/decisions; blank is the root.")
        super().__init__(allow_blank=True, max_length=1000, **kwargs)

    def to_internal_value(self, data) -> str:
        # The length is checked on the text as sent, as the schema's maxLength says (DRF's
        # validator runs on the normal form, so 1,000 separators after a path got in).
        text = super().to_internal_value(data)
        if len(str(data)) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        try:
            return normalize_path(text)
        except InvalidPath as error:
            raise serializers.ValidationError(str(error), code="invalid_path") from error


class PlaceFilters(serializers.Serializer):
    """The query parameters that narrow a route to part of a mind: ``path`` (that path and
    everything below it) and ``memory_type``."""

    path = PathField(required=False, help_text="This path and everything below it.")
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, required=False)


class MemoryFieldsMixin(serializers.Serializer):
    category = serializers.ChoiceField(choices=Category.choices)
    key = serializers.CharField(max_length=MAX_KEY_LENGTH, validators=[validate_key])
    content = serializers.CharField(min_length=1, max_length=MAX_CONTENT, trim_whitespace=False)
    tags = TagsField()
    priority = serializers.ChoiceField(choices=Priority.choices)
    confidence = serializers.FloatField(min_value=0.0, max_value=1.0)
    expires_at = TimestampField(allow_null=True)
    source = serializers.ChoiceField(
        choices=[Source.AGENT, Source.TOOL, Source.SYSTEM],
        help_text="Agents may say agent (default), tool or system; never user. Ignored for "
                  "humans, whose memories are always source=user.")
    memory_type = serializers.ChoiceField(
        choices=MemoryType.choices,
        help_text="How the memory behaves. Default: identity for the identity category, "
                  "else semantic. A new working memory expires after 24 h unless given "
                  "expires_at.")
    path = PathField()
    occurred_at = TimestampField(help_text="When an episodic memory happened (default: the "
                                           "time of the write); only for episodic memories.")

    def validate_content(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Content cannot be blank.")
        return value


class MemoryStoreSerializer(StrictSerializer, MemoryFieldsMixin):
    """Body of ``POST /memory``: create, or update when (category, key) exists."""

    forbidden_fields = SERVER_FIELDS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("key", "tags", "priority", "confidence", "expires_at", "source",
                     "memory_type", "path", "occurred_at"):
            self.fields[name].required = False


class MemoryUpdateSerializer(StrictSerializer, MemoryFieldsMixin):
    """Body of ``PUT /memory/{id}``: a partial update."""

    forbidden_fields = SERVER_FIELDS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Send at least one field to change.")
        return attrs


class CredentialsKeyMissing(exceptions.APIException):
    status_code = 500
    default_detail = "This credentials memory cannot be decrypted with the configured keys."
    default_code = "credentials_unreadable"


class MemorySerializer(serializers.ModelSerializer):
    """A memory as the API returns it. ``credentials`` content is redacted unless the view
    asks for it (``GET /memory/{id}`` by the owning mind)."""

    mind_id = serializers.CharField(read_only=True)
    content = serializers.SerializerMethodField()
    expires_at = TimestampField(read_only=True, allow_null=True)
    created_at = TimestampField(read_only=True)
    updated_at = TimestampField(read_only=True)
    verified_at = TimestampField(read_only=True, allow_null=True)
    deleted_at = TimestampField(read_only=True, allow_null=True)
    superseded_at = TimestampField(read_only=True, allow_null=True)
    superseded_by = serializers.CharField(source="superseded_by_id", read_only=True,
                                          allow_null=True)
    occurred_at = TimestampField(read_only=True, allow_null=True)
    citation = serializers.CharField(read_only=True, help_text=(
        "This version of the memory, to cite: `mem_…@vN` (local to this instance)."))

    class Meta:
        model = Memory
        fields = ["id", "mind_id", "category", "key", "content", "tags", "priority", "source",
                  "memory_type", "path", "occurred_at",
                  "verified", "verified_at", "confidence", "expires_at", "version", "citation",
                  "created_at", "updated_at", "deleted_at", "superseded_at", "superseded_by"]
        read_only_fields = fields

    def to_representation(self, memory: Memory) -> dict:
        """What DRF's fields would give (tests/memories/test_memory_representation.py
        holds them equal), built directly: the fields of a ModelSerializer are built anew
        for every instance, which cost more than the query on the hottest routes
        (bench/results/core.md). A subclass that adds fields takes DRF's way unless it
        builds them too (the search and related hits: memory_fields, then its own)."""
        if type(self) is not MemorySerializer:
            return super().to_representation(memory)
        return self.memory_fields(memory)

    def memory_fields(self, memory: Memory) -> dict:
        """The memory's own fields (Meta.fields), in order, built directly."""
        return {
            "id": str(memory.id), "mind_id": str(memory.mind_id),
            "category": str(memory.category), "key": str(memory.key),
            "content": self.get_content(memory), "tags": [str(tag) for tag in memory.tags],
            "priority": str(memory.priority), "source": str(memory.source),
            "memory_type": str(memory.memory_type), "path": str(memory.path),
            "occurred_at": format_timestamp(memory.occurred_at),
            "verified": bool(memory.verified),
            "verified_at": format_timestamp(memory.verified_at),
            "confidence": float(memory.confidence),
            "expires_at": format_timestamp(memory.expires_at),
            "version": int(memory.version), "citation": memory.citation,
            "created_at": format_timestamp(memory.created_at),
            "updated_at": format_timestamp(memory.updated_at),
            "deleted_at": format_timestamp(memory.deleted_at),
            "superseded_at": format_timestamp(memory.superseded_at),
            "superseded_by": (None if memory.superseded_by_id is None
                              else str(memory.superseded_by_id)),
        }

    def get_content(self, memory: Memory) -> str:
        if self.context.get("reveal_credentials"):
            try:
                return memory.plaintext_content()
            except CredentialsUnreadable as error:
                raise CredentialsKeyMissing(str(error)) from error
        return display_content(memory)


class RetrieveQuery(serializers.Serializer):
    version = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False,
        help_text="Exactly this version (as GET /memory/{id}/versions/{version} answers it): "
                  "what `mem_…@vN` cites, in the trash too.")


class StoreResponseSerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=["stored", "updated", "unchanged"])
    version = serializers.IntegerField()
    citation = serializers.CharField(help_text="The version stored, to cite: `mem_…@vN`.")


class MemoryListQuerySerializer(PageQuery, PlaceFilters):
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH, required=False)
    priority = serializers.ChoiceField(choices=Priority.choices, required=False)
    verified = serializers.BooleanField(required=False, allow_null=True, default=None)
    source = serializers.ChoiceField(choices=Source.choices, required=False)
    updated_since = TimestampField(required=False)
    include_expired = serializers.BooleanField(required=False, default=True)
    ordering = serializers.ChoiceField(
        choices=["updated_at", "-updated_at", "created_at", "-created_at", "priority",
                 "-priority", "key", "-key"], required=False, default="-updated_at")


@extend_schema_serializer(many=False)  # the list action's answer is one object, not an array
class MemoryListSerializer(PageSerializer):
    results = MemorySerializer(many=True)


class RecallQuerySerializer(PlaceFilters):
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH, required=False)
    q = serializers.CharField(max_length=1000, required=False)
    budget = serializers.IntegerField(min_value=1, max_value=10_000_000, required=False)
    format = serializers.ChoiceField(choices=["text", "json"], required=False, default="text")


class LeftOutLowSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Low-priority memories the budget left out.")
    keys = serializers.ListField(child=serializers.CharField(),
                                 help_text="The keys the text form's last line names.")
    not_scanned = serializers.IntegerField(help_text="Of them, those the budgeted scan never "
                                           "read (their keys are unknown).")


class RecallJSONSerializer(serializers.Serializer):
    mind = serializers.DictField()
    total = serializers.IntegerField()
    verified = serializers.IntegerField()
    unverified = serializers.IntegerField()
    tokens = serializers.IntegerField()
    omitted = serializers.IntegerField()
    left_out_low = LeftOutLowSerializer()
    memories = MemorySerializer(many=True)


def stream_recall_json(*, mind, totals: RecallTotals, memories: Iterable,
                       path: str = "") -> Iterator[str]:
    """The JSON of an unbudgeted recall (RecallJSONSerializer's fields), streamed in pieces
    of STREAM_CHUNK memories. ``tokens`` (those of the text form) comes last: it is known
    once every memory has been seen."""
    render = JSONRenderer().render
    head = {"mind": {"id": mind.id, "name": mind.name}, "total": totals.total,
            "verified": totals.verified, "unverified": totals.unverified, "omitted": 0,
            "left_out_low": {"count": 0, "keys": [], "not_scanned": 0}}
    opening = render(head).decode()[:-1] + ',"memories":['
    # The text form: the header and the blocks, a blank line between, a newline at the end.
    length = len(recall_header(mind, totals, path)) + 1
    piece: list[str] = []
    for position, memory in enumerate(memories, 1):
        length += 2 + len(format_block(position, memory))
        piece.append(render(MemorySerializer(memory).data).decode())
        if len(piece) >= recall_module.STREAM_CHUNK:
            yield opening + ",".join(piece)
            opening, piece = "", [""]  # the next piece starts with a comma
    yield opening + ",".join(piece) + f'],"tokens":{math.ceil(length / 4)}}}'


class EmbeddingStatusSerializer(serializers.Serializer):
    """One mind's embedding queue (memories.embeddings.embedding_status)."""

    model = serializers.CharField()
    dimensions = serializers.IntegerField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    pending = serializers.IntegerField()
    oldest_pending_at = TimestampField(
        allow_null=True, help_text="When the oldest memory waiting for its embedding last "
        "changed; null when none waits.")
    lag_seconds = serializers.FloatField(
        allow_null=True, help_text="How long the oldest memory waiting for its embedding has "
        "waited (seconds since oldest_pending_at); null when none waits.")
    running = serializers.BooleanField()
    loaded_in_this_process = serializers.BooleanField()


class HealthSerializer(serializers.Serializer):
    status = serializers.CharField()
    mind = serializers.DictField()
    database = serializers.DictField()
    embeddings = EmbeddingStatusSerializer()
    recall_policy = serializers.DictField()
