"""Serializers of diff and sync (the sync body, read item by item), export and import."""

from collections.abc import Iterator

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import exceptions, serializers

from memories.api.serializers.memory import (
    MAX_CONTENT,
    MAX_KEY_LENGTH,
    PathField,
    TagsField,
    validate_key,
)
from memories.models import Category, MemoryType, Priority, Source
from memories.naming import normalize_tags
from memories.sync import Change, parse_since
from synapse.api import StrictSerializer, TimestampField
from synapse.parsers import JSONStream, PayloadTooLarge

# A sync is one diff page pushed to another instance: at most SYNC_MAX_CHANGES changes, in
# at most settings.SYNC_MAX_BODY_BYTES (a default page of 1000 memories holding the longest
# content allowed fits). Both are checked while the body is read (synapse.parsers).
SYNC_MAX_CHANGES = 5000
SYNC_LISTS = ("added", "updated", "deleted", "memories")


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
    path = PathField(required=False,
                     help_text="Only this path and everything below it (and memories that "
                               "left it since the cursor, with their new path). Keep it the "
                               "same for every call with the cursors it returns.")


DIFF = inline_serializer("Diff", {
    "added": serializers.ListField(child=serializers.DictField()),
    "updated": serializers.ListField(child=serializers.DictField()),
    "deleted": serializers.ListField(child=serializers.DictField()),
    "cursor": serializers.CharField(), "has_more": serializers.BooleanField()})


class SyncMemorySerializer(StrictSerializer):
    """One memory state from another instance (the diff's and the export's shape)."""

    id = serializers.RegexField(r"^mem_[A-Za-z0-9]{1,36}$", required=False)
    # Blank only in a scope reset's tombstone (``reset``): it carries no text.
    category = serializers.ChoiceField(choices=Category.choices, allow_blank=True)
    key = serializers.CharField(max_length=MAX_KEY_LENGTH, validators=[validate_key],
                                allow_blank=True)
    reset = serializers.BooleanField(
        default=False, help_text="A scope reset's tombstone (a deletion with the id and "
                                 "no category, key or text): the copy with this id is "
                                 "deleted.")
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
    memory_type = serializers.ChoiceField(
        choices=MemoryType.choices, required=False,
        help_text="Absent: kept on update (a peer older than types); a new memory gets its "
                  "category's type.")
    path = PathField(required=False, help_text="Absent: kept on update; a new memory lives "
                                               "at the root.")
    occurred_at = TimestampField(allow_null=True, required=False,
                                 help_text="Required with memory_type episodic; only with it.")
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

    def validate(self, data):
        if data["reset"]:
            if not data.get("id"):
                raise serializers.ValidationError({"id": ["A reset tombstone needs the id."]})
            return data
        blank = {name: ["This field may not be blank."] for name in ("category", "key")
                 if not data[name]}
        if blank:
            raise serializers.ValidationError(blank)
        return data

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
        # The place fields only as given: one left out keeps what is here (sync.settled_place).
        place = {name: data[name] for name in ("memory_type", "path") if name in data}
        if "memory_type" in data:
            place["occurred_at"] = data.get("occurred_at")
        return Change(
            id=data.get("id"), category=data["category"], key=data["key"], updated_at=when,
            fields={"content": data["content"], "tags": normalize_tags(data["tags"]),
                    "priority": data["priority"], "confidence": confidence,
                    "expires_at": data["expires_at"], "superseded_at": data["superseded_at"],
                    **place},
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
    if item["reset"] and name != "deleted" and item["deleted_at"] is None:
        raise exceptions.ValidationError(
            {f"{name}[{position}].reset": ["Only a deletion may be a reset tombstone."]})
    if name != "deleted" and item["deleted_at"] is None and "content" not in item:
        raise exceptions.ValidationError(
            {f"{name}[{position}].content": ["This field is required."]})
    if name != "deleted" and item["deleted_at"] is None:
        problem = _type_rule_broken(item)
        if problem:
            raise exceptions.ValidationError({f"{name}[{position}].occurred_at": [problem]})
    return serializer.to_change(item, deleted=name == "deleted")


def _type_rule_broken(item: dict) -> str | None:
    """What is wrong with the type and moment of a live memory state, if anything: an
    episodic memory carries its ``occurred_at`` (a sync never makes one up: two instances
    would make up different ones), and no other memory has one."""
    episodic = item.get("memory_type") == MemoryType.EPISODIC
    if episodic and item.get("occurred_at") is None:
        return "An episodic memory carries its occurred_at."
    if not episodic and item.get("occurred_at") is not None:
        return "Only episodic memories have occurred_at: send memory_type=episodic with it."
    return None


SYNC_RESULT = inline_serializer("SyncResult", {
    name: serializers.IntegerField() for name in
    ("added", "updated", "deleted", "unchanged", "stale", "skipped_redacted")} | {
    "conflicts": serializers.ListField(child=serializers.DictField())})


class ExportQuery(serializers.Serializer):
    format = serializers.ChoiceField(choices=["json", "csv"], default="json")
    include_credentials = serializers.BooleanField(
        default=False, help_text="Credentials content in plaintext (humans only).")
    path = PathField(required=False,
                     help_text="Only the memories (and tombstones) at this path and below it.")


IMPORT_RESULT = inline_serializer("ImportResult", {
    "mode": serializers.ChoiceField(choices=["restore", "merge"])})
