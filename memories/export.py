"""Mind export (streamed JSON or CSV) and the reading of an export for import."""

import csv
import json
from collections.abc import Iterator

from django.core.exceptions import ValidationError
from django.db.models import OuterRef, Prefetch, Subquery
from django.utils import timezone

from memories.models import (
    Category,
    Memory,
    MemoryTombstone,
    MemoryType,
    MemoryVersion,
    Priority,
    Source,
    default_memory_type,
)
from memories.naming import normalize_tags
from memories.paths import InvalidPath, normalize_path
from memories.sync import (
    SYNCED_FIELDS,
    Change,
    memory_payload,
    output_content,
    tombstone_payload,
    under,
)
from minds.models import Mind
from synapse.parsers import JSONStream
from synapse.text import validate_single_line
from synapse.timestamps import format_timestamp, parse_timestamp

FORMAT = "synapse.mind-export"
FORMAT_VERSION = 1
CHUNK_SIZE = 1000
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
CSV_COLUMNS = ["id", "category", "key", "content", "tags", "priority", "source", "verified",
               "confidence", "expires_at", "version", "created_at", "updated_at",
               "memory_type", "path", "occurred_at", "agent", "agent_instance", "device"]
# The CSV has no versions: its provenance columns are those of each memory's current one.
PROVENANCE_FIELDS = ("agent", "agent_instance", "device")


def version_payload(snapshot: MemoryVersion, *, reveal: bool) -> dict:
    payload = {"version": snapshot.version, "category": snapshot.category, "key": snapshot.key,
               "content": output_content(snapshot, reveal=reveal), "tags": list(snapshot.tags),
               "priority": snapshot.priority, "source": snapshot.source,
               "confidence": snapshot.confidence,
               "expires_at": format_timestamp(snapshot.expires_at),
               "memory_type": snapshot.memory_type, "path": snapshot.path,
               "occurred_at": format_timestamp(snapshot.occurred_at), "actor": snapshot.actor,
               "recorded_by": snapshot.recorded_by_payload,
               "claimed_source": snapshot.claimed_source, "claimed_actor": snapshot.claimed_actor,
               **snapshot.provenance.as_fields(),
               "parent": snapshot.parent, "reverted_from": snapshot.reverted_from,
               "created_at": format_timestamp(snapshot.created_at)}
    if snapshot.category == Category.CREDENTIALS and not reveal:
        payload["content_redacted"] = True
    return payload


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def export_json(*, mind: Mind, reveal: bool, path: str = "") -> Iterator[str]:
    """The JSON export of ``mind``, in pieces of about CHUNK_SIZE memories: a full backup::

        {"format": "synapse.mind-export", "format_version": 1, "exported_at": "…",
         "mind": {…}, "credentials": "included" | "redacted", "path": "",
         "memories": [{…every field…, "versions": [{…}, …]}, …],
         "tombstones": [{"id", "category", "key", "path", "deleted_at", "updated_at"}, …]}

    ``memories`` holds every memory of the mind, the trash and superseded ones included,
    each with its whole version history, in the order they were written here (``seq``):
    an import writes them in that order, so episodes that share a moment keep their order
    on the timeline. ``tombstones`` are the memories purged from the trash. With ``path``
    (normal form), only the memories and tombstones at that path or below it.
    It is written piece by piece from a server-side cursor, so a mind of any size exports
    in constant memory. Embeddings are not exported: the worker recomputes them.
    """
    head = {"format": FORMAT, "format_version": FORMAT_VERSION,
            "exported_at": format_timestamp(timezone.now()),
            "mind": {"id": mind.id, "name": mind.name,
                     "unverified_in_recall": mind.unverified_in_recall,
                     "search_language": mind.search_language,
                     "created_at": format_timestamp(mind.created_at)},
            "credentials": "included" if reveal else "redacted", "path": path}
    yield _dumps(head)[:-1] + ',"memories":['
    memories = (Memory.objects.for_mind(mind).under(path).without_vectors()
                .order_by("seq")
                .prefetch_related(Prefetch("versions",
                                           queryset=MemoryVersion.objects.order_by("version"))))
    piece: list[str] = []
    first = True
    for memory in memories.iterator(chunk_size=CHUNK_SIZE):
        item = memory_payload(memory, reveal=reveal)
        item["versions"] = [version_payload(snapshot, reveal=reveal)
                            for snapshot in memory.versions.all()]
        piece.append(("" if first else ",") + _dumps(item))
        first = False
        if len(piece) >= CHUNK_SIZE:
            yield "".join(piece)
            piece = []
    yield "".join(piece) + '],"tombstones":['
    tombstones = (MemoryTombstone.objects.for_mind(mind).filter(under(path))
                  .order_by("deleted_at", "id"))
    yield ",".join(_dumps(tombstone_payload(tombstone))
                   for tombstone in tombstones.iterator(chunk_size=CHUNK_SIZE))
    yield "]}\n"


ACCOUNT_FORMAT = "synapse.account-export"


def account_data(user) -> dict:
    """What the account itself holds about ``user``: the account, their memberships with
    roles, the Mind Keys they issued (never a secret: no lookup, no hash), the OAuth
    connections they approved, and the invitations sent to their account or by them (never
    a token). Six queries, whatever their number."""
    from minds.models import Invitation, Membership, MindKey, OAuthConnection

    memberships = Membership.objects.filter(user=user).select_related("mind").order_by(
        "created_at", "id")
    keys = MindKey.objects.filter(created_by=user).order_by("created_at", "id")
    connections = (OAuthConnection.objects.filter(approved_by=user)
                   .select_related("application").order_by("created_at", "id"))
    invitations = Invitation.objects.select_related("mind", "user", "invited_by")
    received = invitations.filter(user=user).order_by("created_at", "id")
    sent = invitations.filter(invited_by=user).order_by("created_at", "id")
    return {
        "account": {"id": user.pk, "username": user.get_username(), "email": user.email,
                    "first_name": user.first_name, "last_name": user.last_name,
                    "date_joined": format_timestamp(user.date_joined),
                    "last_login": format_timestamp(user.last_login)},
        "memberships": [{"mind_id": membership.mind_id, "mind_name": membership.mind.name,
                         "role": membership.role,
                         "since": format_timestamp(membership.created_at)}
                        for membership in memberships],
        "keys": [{"id": key.id, "mind_id": key.mind_id, "name": key.name,
                  "last4": key.last4, "scope": key.scope, "paths": list(key.paths),
                  "created_at": format_timestamp(key.created_at),
                  "last_used_at": format_timestamp(key.last_used_at),
                  "expires_at": format_timestamp(key.expires_at),
                  "revoked_at": format_timestamp(key.revoked_at)} for key in keys],
        "connections": [{"id": connection.id, "mind_id": connection.mind_id,
                         "client": connection.client_name,
                         "client_id": connection.application.client_id,
                         "scopes": list(connection.scopes), "paths": list(connection.paths),
                         "created_at": format_timestamp(connection.created_at),
                         "last_used_at": format_timestamp(connection.last_used_at),
                         "revoked_at": format_timestamp(connection.revoked_at)}
                        for connection in connections],
        "invitations": {"received": [_invitation(invitation) for invitation in received],
                        "sent": [_invitation(invitation) for invitation in sent]},
    }


def _invitation(invitation) -> dict:
    return {"id": invitation.id, "mind_id": invitation.mind_id,
            "mind_name": invitation.mind.name, "role": invitation.role,
            "invitee": invitation.invitee,
            "invited_by": invitation.invited_by.get_username() if invitation.invited_by
            else None,
            "status": str(invitation.status),
            "created_at": format_timestamp(invitation.created_at),
            "expires_at": format_timestamp(invitation.expires_at)}


def export_account(*, user, reveal: bool) -> Iterator[str]:
    """Everything ``user`` owns, as one JSON document written piece by piece::

        {"format": "synapse.account-export", "format_version": 1, "exported_at": "…",
         "credentials": "included" | "redacted",
         "account": {…}, "memberships": [{…}], "keys": [{…}], "connections": [{…}],
         "minds": [<mind export>, …]}

    ``minds`` holds every mind they own (alone or with others), each exactly as
    ``export_json`` writes it (GET /mind/export): any one of them imports with
    POST /memory/mind-import. Minds shared with them as editor or viewer are listed in
    ``memberships``, not exported (their owners' to export)."""
    head = {"format": ACCOUNT_FORMAT, "format_version": FORMAT_VERSION,
            "exported_at": format_timestamp(timezone.now()),
            "credentials": "included" if reveal else "redacted", **account_data(user)}
    yield _dumps(head)[:-1] + ',"minds":['
    owned = Mind.objects.owned_by(user).order_by("created_at", "id")
    for index, mind in enumerate(owned):
        if index:
            yield ","
        yield from export_json(mind=mind, reveal=reveal)
    yield "]}\n"


class _Line:
    """A file-like target for csv.writer that hands back what it was given."""

    def write(self, value: str) -> str:
        return value


def csv_cell(value):
    """A text cell a spreadsheet shows as text: one starting like a formula (``=``, ``+``,
    ``-``, ``@``, tab, carriage return) gets a leading apostrophe (OWASP's advice)."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def export_csv(*, mind: Mind, reveal: bool, path: str = "") -> Iterator[str]:
    """Current memories (not in the trash, not superseded; with ``path``, those at that
    path or below it), one row each, with the provenance claimed by the request that wrote
    its current version (``agent``, ``agent_instance``, ``device``), handed out in
    pieces of CHUNK_SIZE rows (a piece per row would cost the server one send each).
    Stored text that a spreadsheet would run as a formula is neutralised (:func:`csv_cell`);
    the JSON export carries it unchanged."""
    writer = csv.writer(_Line())
    piece = [writer.writerow(CSV_COLUMNS)]
    current_version = MemoryVersion.objects.filter(memory=OuterRef("pk"),
                                                   version=OuterRef("version"))
    memories = (Memory.objects.for_mind(mind).current().under(path).without_vectors()
                .annotate(**{f"version_{name}": Subquery(current_version.values(name)[:1])
                             for name in PROVENANCE_FIELDS})
                .order_by("category", "key"))
    for memory in memories.iterator(chunk_size=CHUNK_SIZE):
        piece.append(writer.writerow(map(csv_cell, [
            memory.id, memory.category, memory.key, output_content(memory, reveal=reveal),
            ", ".join(memory.tags), memory.priority, memory.source,
            "true" if memory.verified else "false", memory.confidence,
            format_timestamp(memory.expires_at) or "", memory.version,
            format_timestamp(memory.created_at), format_timestamp(memory.updated_at),
            memory.memory_type, memory.path, format_timestamp(memory.occurred_at) or "",
            *(getattr(memory, f"version_{name}") or "" for name in PROVENANCE_FIELDS)])))
        if len(piece) >= CHUNK_SIZE:
            yield "".join(piece)
            piece = []
    yield "".join(piece)


# -- Reading an export ----------------------------------------------------------------------

class BackupInvalid(ValueError):
    """An export that does not read; ``path`` says where (``memories[3].category``)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def restored_place(item: dict) -> dict:
    """The place of a read memory or version (:func:`read_backup`) as a restore writes it:
    what an export older than these fields lacks gets what migration 0008 gave the
    memories of that time — its category's type, the root, no ``occurred_at``."""
    return {"memory_type": item["memory_type"] or default_memory_type(item["category"]),
            "path": item["path"] or "", "occurred_at": item["occurred_at"]}


def given_place(item: dict) -> dict:
    """The place fields a read memory gives, for a merge: one it lacks keeps what is here
    (memories.sync.settled_place), as from a peer older than these fields."""
    given = {"path": item["path"]} if item["path"] is not None else {}
    if item["memory_type"] is not None:
        given.update(memory_type=item["memory_type"], occurred_at=item["occurred_at"])
    return given


def backup_change(kind: str, item: dict) -> Change:
    """The current state of one memory (``kind`` "memory") or tombstone of a read export
    (:func:`read_backup`), as a sync change."""
    if kind == "tombstone":
        return Change(id=item["id"], category=item["category"], key=item["key"],
                      updated_at=item["updated_at"], deleted=True,
                      deleted_at=item["deleted_at"])
    deleted = item["deleted_at"] is not None
    return Change(
        id=item["id"], category=item["category"], key=item["key"],
        updated_at=item["updated_at"], deleted=deleted, deleted_at=item["deleted_at"],
        fields={} if deleted else {**{name: item[name] for name in SYNCED_FIELDS},
                                   **given_place(item)},
        source=item["source"], verified=item["verified"],
        verified_at=item["verified_at"], created_at=item["created_at"],
        redacted=item["content_redacted"] and not deleted)


class _Reader:
    """Checks one object of the export, field by field, naming the path of a fault."""

    def __init__(self, data, path: str):
        if not isinstance(data, dict):
            raise BackupInvalid(path, "Expected a JSON object.")
        self.data = data
        self.path = path

    def fail(self, name: str, message: str):
        raise BackupInvalid(f"{self.path}.{name}", message)

    def get(self, name: str, default=...):
        if name not in self.data:
            if default is ...:
                self.fail(name, "This field is required.")
            return default
        return self.data[name]

    def text(self, name: str, *, max_length: int, allow_blank: bool = False) -> str:
        value = self.get(name)
        if not isinstance(value, str) or (not allow_blank and not value.strip()):
            self.fail(name, "Expected a non-empty string.")
        if len(value) > max_length or "\x00" in value:
            self.fail(name, f"At most {max_length} characters, no NUL bytes.")
        return value

    def line(self, name: str, *, max_length: int) -> str:
        """A key or an actor: :meth:`text` under the one single-line rule (synapse.text)."""
        return self.single_line(name, self.text(name, max_length=max_length))

    def single_line(self, name: str, value: str) -> str:
        try:
            validate_single_line(value)
        except ValidationError as error:
            self.fail(name, error.messages[0])
        return value

    def memory_id(self, name: str = "id") -> str:
        value = self.text(name, max_length=40)
        if not value.startswith("mem_") or not value[4:].isalnum():
            self.fail(name, "Expected a memory id (mem_…).")
        return value

    def choice(self, name: str, choices, default=...) -> str:
        value = self.get(name, default)
        if value not in choices:
            self.fail(name, f"Expected one of: {', '.join(choices)}.")
        return value

    def boolean(self, name: str, default=...) -> bool:
        value = self.get(name, default)
        if not isinstance(value, bool):
            self.fail(name, "Expected true or false.")
        return value

    def number(self, name: str) -> float:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            self.fail(name, "Expected a number from 0 to 1.")
        return float(value)

    def integer(self, name: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
            self.fail(name, "Expected a positive integer.")
        return value

    def timestamp(self, name: str, *, required: bool = False):
        value = self.get(name, ... if required else None)
        if value is None:
            if required:
                self.fail(name, "This field is required.")
            return None
        try:
            return parse_timestamp(value)
        except (ValueError, OverflowError, OSError) as error:
            self.fail(name, str(error))

    def tags(self, name: str = "tags") -> list[str]:
        value = self.get(name, [])
        if (not isinstance(value, list) or len(value) > 20
                or not all(isinstance(tag, str) and 0 < len(tag) <= 50 for tag in value)):
            self.fail(name, "Expected at most 20 tags of 1 to 50 characters.")
        for position, tag in enumerate(value):
            self.single_line(f"{name}[{position}]", tag)
        return normalize_tags(value)

    def fields(self) -> dict:
        """The fields every memory and version carries."""
        return {"category": self.choice("category", Category.values),
                "key": self.line("key", max_length=200),
                "content": self.text("content", max_length=50_000),
                "content_redacted": self.boolean("content_redacted", False),
                "tags": self.tags(), "priority": self.choice("priority", Priority.values),
                "source": self.choice("source", Source.values),
                "confidence": self.number("confidence"),
                "expires_at": self.timestamp("expires_at"), **self.place()}

    def memory_path(self) -> str | None:
        """``path`` in its normal form (memories.paths, as the API takes it); None if absent."""
        value = self.get("path", None)
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail("path", "Expected a string.")
        try:
            return normalize_path(value)
        except InvalidPath as error:
            self.fail("path", str(error))

    def place(self) -> dict:
        """``memory_type``, ``path`` (taken in its normal form, as the API takes it) and
        ``occurred_at`` (only, and always, on an episodic memory), each None where the
        export has none (one older than these fields): :func:`restored_place` and
        :func:`given_place` say what that means."""
        memory_type = self.get("memory_type", None)
        if memory_type is not None:
            memory_type = self.choice("memory_type", MemoryType.values)
        path = self.memory_path()
        occurred_at = self.timestamp("occurred_at")
        if memory_type == MemoryType.EPISODIC and occurred_at is None:
            self.fail("occurred_at", "An episodic memory has occurred_at.")
        if memory_type != MemoryType.EPISODIC and occurred_at is not None:
            self.fail("occurred_at", "Only episodic memories have occurred_at (with "
                                     "memory_type episodic).")
        return {"memory_type": memory_type, "path": path, "occurred_at": occurred_at}


    def claims(self) -> dict:
        """What an earlier restore recorded as claimed (optional; blank when absent)."""
        actor = self.get("claimed_actor", "")
        if actor:
            actor = self.line("claimed_actor", max_length=200)
        return {"claimed_source": self.choice("claimed_source", [*Source.values, ""], ""),
                "claimed_actor": actor}

    def lineage(self, version: int) -> dict:
        """``parent`` and ``reverted_from`` of a version (earlier numbers, or null); an
        export older than them gives each version the one before it as its parent."""
        found = {"parent": version - 1 if version > 1 else None, "reverted_from": None}
        for name in found:
            value = self.get(name, found[name] if name == "parent" else None)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value < version):
                self.fail(name, "Expected null or the number of an earlier version.")
            found[name] = value
        return found


def read_backup(body: JSONStream | dict) -> Iterator[tuple[str, dict]]:
    """Read and check a JSON export as it arrives: ``("memory", item)`` and
    ``("tombstone", item)`` one at a time, in body order. Members other than ``format``,
    ``format_version``, ``memories`` and ``tombstones`` are skipped unread. Raises
    BackupInvalid naming the faulty field (a ``format`` that is wrong or missing, at the
    latest when the body ends: read it inside the transaction that applies it)."""
    top = _Reader({}, "export")
    seen = set()
    if not isinstance(body, JSONStream):  # no body at all
        top.fail("format", "This field is required.")
    for member in body.members():
        if member.name in ("format", "format_version") and member.is_scalar:
            top.data[member.name] = member.scalar()
            _check_format(top, member.name)
        elif member.name in ("memories", "tombstones"):
            seen.add(member.name)
            if not member.is_list:
                top.fail(member.name, "Expected a list.")
            if member.name == "memories":
                yield from (("memory", item) for item in _memories(member.items()))
            else:
                yield from (("tombstone", item) for item in _tombstones(member.items()))
        elif member.name in ("format", "format_version"):
            top.fail(member.name, "Not a Synapse mind export.")
    for name in ("format", "format_version"):
        _check_format(top, name)
    if "memories" not in seen:
        top.fail("memories", "This field is required.")


def _check_format(top: "_Reader", name: str) -> None:
    if name == "format" and top.get("format") != FORMAT:
        top.fail("format", f"Not a Synapse mind export (expected {FORMAT!r}).")
    if name == "format_version" and top.get("format_version") != FORMAT_VERSION:
        top.fail("format_version", f"This server reads format version {FORMAT_VERSION}.")


def _memories(memories_data: Iterator) -> Iterator[dict]:
    for position, raw in enumerate(memories_data):
        reader = _Reader(raw, f"memories[{position}]")
        item = {"id": reader.memory_id(), **reader.fields(),
                "verified": reader.boolean("verified", False),
                "verified_at": reader.timestamp("verified_at"),
                "version": reader.integer("version"),
                "created_at": reader.timestamp("created_at", required=True),
                "updated_at": reader.timestamp("updated_at", required=True),
                "deleted_at": reader.timestamp("deleted_at"),
                "superseded_at": reader.timestamp("superseded_at"),
                "superseded_by": reader.get("superseded_by", None)}
        if item["superseded_by"] is not None:
            item["superseded_by"] = reader.memory_id("superseded_by")
        versions_data = reader.get("versions", [])
        if not isinstance(versions_data, list):
            reader.fail("versions", "Expected a list.")
        versions = []
        for number, raw_version in enumerate(versions_data):
            snapshot = _Reader(raw_version, f"{reader.path}.versions[{number}]")
            number_read = snapshot.integer("version")
            versions.append({"version": number_read, **snapshot.fields(),
                             "actor": snapshot.line("actor", max_length=200),
                             **snapshot.claims(), **snapshot.lineage(number_read),
                             "created_at": snapshot.timestamp("created_at", required=True)})
        item["versions"] = versions
        yield item


def _tombstones(tombstones_data: Iterator) -> Iterator[dict]:
    for position, raw in enumerate(tombstones_data):
        reader = _Reader(raw, f"tombstones[{position}]")
        if reader.boolean("reset", default=False):
            # A scope reset's tombstone: the id, no text (memories.reset).
            yield {"id": reader.memory_id(), "category": "", "key": "", "reset": True,
                   "path": reader.memory_path() or "",
                   "deleted_at": reader.timestamp("deleted_at", required=True),
                   "updated_at": reader.timestamp("updated_at", required=True)}
            continue
        yield {"id": reader.memory_id(), "reset": False,
               "category": reader.choice("category", Category.values),
               "key": reader.line("key", max_length=200),
               "path": reader.memory_path() or "",
               "deleted_at": reader.timestamp("deleted_at", required=True),
               "updated_at": reader.timestamp("updated_at", required=True)}
