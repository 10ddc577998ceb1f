"""Memories, their versions, and the audit log."""

import copy
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import connections, models, router
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Now
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from memories.crypto import FERNET_PREFIX, open_content
from memories.paths import MAX_PATH_LENGTH, PATH_PATTERN
from memories.query import DEFAULT_CONFIG, parse_query, search_query
from minds.models import Mind
from synapse.ids import new_memory_id
from synapse.provenance import Provenance


class Category(models.TextChoices):
    IDENTITY = "identity"
    PREFERENCE = "preference"
    FACT = "fact"
    PROJECT = "project"
    SKILL = "skill"
    MISTAKE = "mistake"
    CONTEXT = "context"
    NOTE = "note"
    CREDENTIALS = "credentials"


class MemoryType(models.TextChoices):
    """How a memory behaves, beside its category (what it is about)."""

    SEMANTIC = "semantic"  # durable facts and decisions, valid across sessions
    EPISODIC = "episodic"  # an event at a precise moment of a task or session
    PROCEDURAL = "procedural"  # how a task is done in this project
    WORKING = "working"  # the live state of the task in progress (expires by default)
    IDENTITY = "identity"  # stable facts about the owner or the agent itself


def default_memory_type(category: str) -> str:
    """The type of a memory stored without one (and of every memory from before types)."""
    return MemoryType.IDENTITY if category == Category.IDENTITY else MemoryType.SEMANTIC


class Priority(models.TextChoices):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    CRITICAL = "critical"


PRIORITY_RANK = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}
# The HNSW index of every mind's vectors (memories.search reads its size from the catalog).
EMBEDDING_INDEX = "memory_embedding_hnsw"


class Source(models.TextChoices):
    USER = "user"
    AGENT = "agent"
    TOOL = "tool"
    SYSTEM = "system"


class SearchDocument(models.Func):
    """The weighted tsvector of a memory (see the migration that creates the function).

    Key and tags weigh A, content B (stemmed in the mind's language: ``search_config``)
    and D (``synapse_simple``: unstemmed); accents are folded. ``credentials`` content
    never enters it.
    """

    function = "synapse_search_document"
    output_field = SearchVectorField()


class WriteOrder(models.Func):
    """The next number of the sequence that orders memories as they are written here: the
    timeline's tie-break between episodes that share a moment."""

    template = "nextval('memory_write_seq')"
    output_field = models.BigIntegerField()


def under_any(prefixes) -> Q:
    """At one of ``prefixes`` (normal form, memories.paths) or below it, as one condition
    for any model with a ``path`` (memories, versions, tombstones): ``path = p OR path
    LIKE 'p/%'`` for each, ORed, served by the prefix indexes; no prefix, or the root
    among them, is everything."""
    condition = Q()
    for prefix in prefixes:
        if not prefix:
            return Q()
        condition |= Q(path=prefix) | Q(path__startswith=f"{prefix}/")
    return condition


def whole_mind(mind: Mind) -> Mind:
    """``mind`` without the reach of the request's credentials: what a memory's
    ``memory.mind`` is (a lookup that hands it over saves the query for it)."""
    if "reach" not in mind.__dict__:
        return mind
    whole = copy.copy(mind)
    del whole.reach
    return whole


def reach_of_mind(mind) -> tuple[str, ...]:
    """The path prefixes the request acting on ``mind`` reaches (Mind.reach); a mind id
    (a string) reaches everything."""
    return getattr(mind, "reach", ())


class MemoryQuerySet(models.QuerySet):
    def for_mind(self, mind: Mind) -> "MemoryQuerySet":
        """Memories of one mind, within the paths the request's Mind Key reaches
        (Mind.reach: a path-scoped key sees nothing else); every view starts here."""
        return self.filter(under_any(reach_of_mind(mind)), mind=mind)

    def alive(self) -> "MemoryQuerySet":
        """Not in the trash (superseded and expired memories included)."""
        return self.filter(deleted_at__isnull=True)

    def current(self) -> "MemoryQuerySet":
        """Not in the trash and not superseded."""
        return self.filter(deleted_at__isnull=True, superseded_at__isnull=True)

    def unexpired(self, now=None) -> "MemoryQuerySet":
        """Without an expiry, or expiring in the future."""
        now = now or timezone.now()
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    def in_recall(self, now=None) -> "MemoryQuerySet":
        """What recall may show: current and unexpired."""
        return self.current().unexpired(now)

    def in_trash(self) -> "MemoryQuerySet":
        """In the trash (restorable until purged)."""
        return self.filter(deleted_at__isnull=False)

    def awaiting_verification(self, now=None) -> "MemoryQuerySet":
        """The verification queue: unverified memories that recall may show."""
        return self.in_recall(now).filter(verified=False)

    def tagged(self, tag: str) -> "MemoryQuerySet":
        """Carrying ``tag`` (compared as stored: trimmed, lowercase)."""
        return self.filter(tags__contains=[tag.strip().lower()])

    def under(self, path: str) -> "MemoryQuerySet":
        """At ``path`` (in normal form, memories.paths) or anywhere below it; the root
        (``""``) is everything. Both conditions use the prefix index memory_mind_path."""
        return self.filter(under_any([path]))

    def episodes(self) -> "MemoryQuerySet":
        """Episodic memories (those on a timeline)."""
        return self.filter(memory_type=MemoryType.EPISODIC)

    def timeline_order(self) -> "MemoryQuerySet":
        """When each episode happened; episodes of one moment in the order written."""
        return self.order_by("occurred_at", "seq")

    def without_vectors(self) -> "MemoryQuerySet":
        """Without loading the search vectors and the embedding (large, rarely read)."""
        return self.defer(*VECTOR_FIELDS)

    def locking(self) -> "MemoryQuerySet":
        """These memories with their mind, their rows locked for the transaction — theirs
        only (FOR UPDATE OF): the mind's row and its other memories stay free to change."""
        return self.select_for_update(of=("self",)).select_related("mind")

    def locked(self, pk: str) -> "Memory":
        """The memory ``pk``, locked (:meth:`locking`)."""
        return self.locking().get(pk=pk)

    def recall_order(self) -> "MemoryQuerySet":
        """Critical first, then high, normal, low; most recently updated first within each."""
        return self.order_by("priority_rank", "-updated_at", "id")

    def matching(self, query: str, config: str = DEFAULT_CONFIG) -> "MemoryQuerySet":
        """Memories matching a query in the search syntax (words ANDed, "phrase",
        prefix*, OR, -exclusion), stemmed with the mind's text-search ``config``; raises
        memories.query.QuerySyntaxError when malformed. Ranking and the natural-language
        fallback live in memories.search."""
        return self.filter(search_vector=search_query(parse_query(query, config)))


def citation(memory_id: str, version: int) -> str:
    """How an agent names exactly what it relied on: ``mem_…@v3`` (docs/api.md#citations).
    Local to this instance: a peer may number the same memory's versions differently."""
    return f"{memory_id}@v{version}"


class MemoryFacts:
    """What a memory derives from its fields, the same for the model and for the tuples
    recall and list read instead (MemoryRow, memories.recall.RecallItem)."""

    __slots__ = ()

    @property
    def citation(self) -> str:
        return citation(self.id, self.version)

    @property
    def is_credentials(self) -> bool:
        return self.category == Category.CREDENTIALS

    def plaintext_content(self) -> str:
        """The content in plaintext: credentials decrypted (memories.crypto). Redact with
        memories.recall.display_content wherever the owner did not ask to reveal it."""
        return open_content(self.category, self.content)


class Memory(MemoryFacts, models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_memory_id, editable=False)
    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="memories")
    category = models.CharField(max_length=20, choices=Category.choices)
    key = models.CharField(max_length=200)
    content = models.TextField()
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    priority = models.CharField(max_length=10, choices=Priority.choices, default=Priority.NORMAL)
    source = models.CharField(max_length=10, choices=Source.choices)
    verified = models.BooleanField(default=False)
    verified_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    verified_at = models.DateTimeField(null=True, blank=True)
    confidence = models.FloatField()
    expires_at = models.DateTimeField(null=True, blank=True)
    memory_type = models.CharField(max_length=12, choices=MemoryType.choices,
                                   default=MemoryType.SEMANTIC)
    path = models.CharField(max_length=MAX_PATH_LENGTH, blank=True, default="")
    # When an episodic memory happened (set on every episodic memory, on no other).
    occurred_at = models.DateTimeField(null=True, blank=True)
    seq = models.BigIntegerField(db_default=WriteOrder(), editable=False)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="supersedes")
    # The mind's text-search configuration (minds.models.search_config), copied by a
    # trigger when the row is inserted (whatever the default says) and by the worker when
    # the mind's language changes (memories.text_search).
    search_config = models.CharField(max_length=40, default="synapse_english", editable=False)
    search_vector = models.GeneratedField(
        expression=SearchDocument(F("search_config"), F("category"), F("key"), F("tags"),
                                  F("content")),
        output_field=SearchVectorField(), db_persist=True)
    # Stored so recall reads memories in order straight from an index (memory_recall_order).
    priority_rank = models.GeneratedField(
        expression=Case(*[When(priority=p, then=Value(rank)) for p, rank in PRIORITY_RANK.items()],
                        default=Value(2)),
        output_field=models.SmallIntegerField(), db_persist=True)
    embedding = VectorField(dimensions=settings.SYNAPSE["EMBEDDING_DIM"], null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    embedding_pending = models.BooleanField(default=True)
    # An episode's context (memories.context, docs/search.md): the words of the episodes
    # around it on its timeline and its date, at a weight below its own words, and the ids
    # of that window in timeline order (itself included). Derived, never versioned nor
    # exported: kept by the worker from ContextQueue, which a trigger fills.
    context_vector = SearchVectorField(null=True, blank=True, editable=False)
    context_ids = ArrayField(models.CharField(max_length=40), default=list, blank=True,
                             editable=False)
    # Stamped by a database trigger (migration 0003) with the id of the writing transaction,
    # so the diff cursor (memories.sync) covers every write path, raw SQL included.
    change_txid = models.BigIntegerField(null=True, blank=True, editable=False)
    created_txid = models.BigIntegerField(null=True, blank=True, editable=False)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["mind", "category", "key"],
                                    condition=Q(deleted_at__isnull=True),
                                    name="memory_unique_key_outside_trash"),
            models.CheckConstraint(condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                                   name="memory_confidence_0_1"),
            # Encryption at rest enforced by the database: a write path that forgot to seal
            # credentials content fails instead of storing the secret (memories.crypto).
            models.CheckConstraint(
                condition=~Q(category=Category.CREDENTIALS) | Q(content__startswith=FERNET_PREFIX),
                name="memory_credentials_encrypted"),
            models.CheckConstraint(condition=Q(path__regex=PATH_PATTERN),
                                   name="memory_path_normal_form"),
            models.CheckConstraint(
                condition=(Q(memory_type=MemoryType.EPISODIC, occurred_at__isnull=False)
                           | (~Q(memory_type=MemoryType.EPISODIC)
                              & Q(occurred_at__isnull=True))),
                name="memory_occurred_at_episodic"),
        ]
        indexes = [
            models.Index(fields=["mind", "-updated_at"], name="memory_mind_updated"),
            models.Index(fields=["mind", "category"], name="memory_mind_category"),
            # Keyword search reads the posting lists of the mind and of the query's words
            # together (btree_gin puts the mind in a GIN index), so a word common in other
            # minds costs nothing here (docs/scaling.md, "Searching a mind in a large table").
            GinIndex(fields=["mind", "search_vector"], name="memory_mind_search_vector"),
            models.Index(fields=["mind", "priority_rank", "-updated_at", "id"],
                         name="memory_recall_order",
                         condition=Q(deleted_at__isnull=True, superseded_at__isnull=True)),
            # Recall's counts (memories.recall.count_recall) and the list's ``count`` read
            # this index alone (an index-only scan, no heap): it holds every column those
            # counts test, and its entries are smaller than the above's (no ``updated_at``,
            # no ``id``).
            models.Index(fields=["mind", "priority_rank"], include=["verified", "expires_at"],
                         name="memory_recall_counts",
                         condition=Q(deleted_at__isnull=True, superseded_at__isnull=True)),
            GinIndex(fields=["tags"], name="memory_tags"),
            HnswIndex(name=EMBEDDING_INDEX, fields=["embedding"], m=16,
                      ef_construction=64, opclasses=["vector_cosine_ops"]),
            models.Index(fields=["mind", "change_txid"], name="memory_mind_change_txid"),
            models.Index(fields=["id"], name="memory_embedding_pending",
                         condition=Q(embedding_pending=True)),
            # ``path = p OR path LIKE 'p/%'`` (MemoryQuerySet.under); pattern_ops serve both.
            models.Index(fields=["mind", "path"], name="memory_mind_path",
                         opclasses=["varchar_pattern_ops", "varchar_pattern_ops"]),
            models.Index(fields=["mind", "path", "occurred_at", "seq"], name="memory_timeline",
                         condition=Q(memory_type=MemoryType.EPISODIC, deleted_at__isnull=True,
                                     superseded_at__isnull=True)),
            GinIndex(fields=["mind", "context_vector"], name="memory_mind_context_vector"),
        ]

    def __str__(self) -> str:
        return f"{self.category}/{self.key}"


class _MemoryRowFields(NamedTuple):
    id: str
    mind_id: str
    category: str
    key: str
    content: str
    tags: list[str]
    priority: str
    source: str
    memory_type: str
    path: str
    occurred_at: datetime | None
    verified: bool
    verified_at: datetime | None
    confidence: float
    expires_at: datetime | None
    version: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    superseded_at: datetime | None
    superseded_by_id: str | None


class MemoryRow(_MemoryRowFields, MemoryFacts):
    """A memory's shown fields, as the API returns them (MemorySerializer), fetched as a
    tuple (``queryset.values_list(*MemoryRow._fields)``): recall and list show hundreds
    of memories, and a model instance costs about ten times its row to build."""

    __slots__ = ()


VECTOR_FIELDS = ("search_vector", "embedding", "context_vector")


def memory_of_mind(mind: Mind, memory_id: str, *, in_trash_too: bool = False,
                   vectors: bool = True) -> Memory | None:
    """The memory ``memory_id`` of ``mind`` (within its reach; unless ``in_trash_too``, not
    in the trash; ``vectors=False`` leaves the VECTOR_FIELDS unread), with ``mind`` as its
    ``memory.mind``; None when there is none. The lookup of every memory route: for a mind
    without a reach it is one hand-written statement (the ORM took twice as long to build
    it as to run it); a path-scoped request goes through for_mind."""
    if reach_of_mind(mind):
        memories = Memory.objects.for_mind(mind)
        if not in_trash_too:
            memories = memories.alive()
        if not vectors:
            memories = memories.without_vectors()
        found = list(memories.filter(pk=memory_id)[:1])  # by primary key: no ORDER BY
    else:
        found = _one_memory(_MEMORY_BY_ID[in_trash_too, vectors], [mind.pk, memory_id],
                            router.db_for_read(Memory))
    return _with_whole_mind(found, mind)


def live_memory_by_key(mind: Mind, category: str, key: str) -> Memory | None:
    """The memory (category, key) of ``mind`` outside the trash, within its reach, its row
    locked for the transaction (FOR UPDATE), with ``mind`` as its ``memory.mind``; None when
    there is none. Every store and upsert starts here: for a mind without a reach it is one
    hand-written statement, as :func:`memory_of_mind`. Unique: LIMIT 1, no ORDER BY. A lock
    is a write: both ways it runs on the database writes go to, never a read replica."""
    if reach_of_mind(mind):
        found = list(Memory.objects.select_for_update().for_mind(mind).alive()
                     .filter(category=category, key=key)[:1])
    else:
        found = _one_memory(_LIVE_BY_KEY_LOCKED, [mind.pk, category, key],
                            router.db_for_write(Memory))
    return _with_whole_mind(found, mind)


def _with_whole_mind(found: list[Memory], mind: Mind) -> Memory | None:
    """The one memory a lookup of ``mind`` found, with the whole mind (no reach) as its
    ``memory.mind``; None when it found none."""
    if not found:
        return None
    found[0].mind = whole_mind(mind)
    return found[0]


class _MemorySelect(NamedTuple):
    """A hand-written SELECT of memories' columns, what :func:`_one_memory` needs to build
    instances from its rows: the columns' attribute names, and the fields whose values
    Django converts after reading (``from_db_value``: the vectors), by position."""

    sql: str
    attnames: list[str]
    converted: list[tuple[int, models.Field]]


def _memory_select(where: str, *, vectors: bool = True) -> _MemorySelect:
    fields = [field for field in Memory._meta.concrete_fields
              if vectors or field.name not in VECTOR_FIELDS]
    columns = ", ".join(field.column for field in fields)
    return _MemorySelect(
        f"SELECT {columns} FROM memories_memory WHERE {where}",  # noqa: S608
        [field.attname for field in fields],
        [(index, field) for index, field in enumerate(fields)
         if hasattr(field, "from_db_value")])


def _one_memory(select: _MemorySelect, params: list, using: str) -> list[Memory]:
    """The first row of ``select`` on database ``using`` as the ORM builds a model
    instance (each value through its field's converters, then ``Model.from_db``: columns
    not read are deferred), in a list of at most one; without a RawQuerySet's machinery,
    which took a third of the lookup's time."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(select.sql, params)
        row = cursor.fetchone()
    if row is None:
        return []
    values = list(row)
    for index, field in select.converted:
        for convert in field.get_db_converters(connection):
            values[index] = convert(values[index], None, connection)
    return [Memory.from_db(using, select.attnames, values)]


_MEMORY_BY_ID = {
    (trash, vectors): _memory_select("mind_id = %s AND id = %s"
                                     + ("" if trash else " AND deleted_at IS NULL"),
                                     vectors=vectors)
    for trash in (False, True) for vectors in (False, True)}
_LIVE_BY_KEY_LOCKED = _memory_select(
    "mind_id = %s AND category = %s AND key = %s AND deleted_at IS NULL LIMIT 1 FOR UPDATE")


# Fields whose change makes a new version (and that a version snapshot keeps).
VERSIONED_FIELDS = ("category", "key", "content", "tags", "priority", "confidence", "expires_at",
                    "source", "memory_type", "path", "occurred_at")


class ContextQueue(models.Model):
    """Episodes whose context must be rebuilt (memories.context). A database trigger
    (migration 0010) adds an episode and the episodes around it whenever a write changes
    its words or its place on a timeline — through any path, raw SQL included; the worker
    takes rows with SKIP LOCKED and deletes them. Rows may repeat: appending never waits
    on another writer."""

    id = models.BigAutoField(primary_key=True)
    memory_id = models.CharField(max_length=40)  # no foreign key: the memory may be purged
    queued_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"context of {self.memory_id}"


class MemoryVersion(models.Model):
    """A snapshot of one version of a memory, written with every version."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    category = models.CharField(max_length=20, choices=Category.choices)
    key = models.CharField(max_length=200)
    content = models.TextField()
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    priority = models.CharField(max_length=10, choices=Priority.choices)
    source = models.CharField(max_length=10, choices=Source.choices)
    confidence = models.FloatField()
    expires_at = models.DateTimeField(null=True, blank=True)
    memory_type = models.CharField(max_length=12, choices=MemoryType.choices,
                                   default=MemoryType.SEMANTIC)
    path = models.CharField(max_length=MAX_PATH_LENGTH, blank=True, default="")
    occurred_at = models.DateTimeField(null=True, blank=True)
    # Who wrote this version on this instance, from the credentials of the writing request
    # (never from a body): "key" (Mind Key id and name), "connection" (OAuth connection id,
    # "connection <client name>"), "user", "system", or "legacy" for versions written
    # before this was recorded (label copied from the old actor text).
    recorded_by_type = models.CharField(max_length=10)
    recorded_by_id = models.CharField(max_length=64, blank=True)
    recorded_by = models.CharField(max_length=200)
    # What a restored backup said about this version (its source and author): data shown
    # as a claim, never trusted. Blank for versions written here.
    claimed_source = models.CharField(max_length=10, blank=True)
    claimed_actor = models.CharField(max_length=200, blank=True)
    # What the writing request claimed about its agent (synapse.provenance: the
    # X-Synapse-Agent, -Agent-Instance and -Device headers), beside recorded_by; never
    # trusted, never taken from a body. Blank when not sent, and on versions from before.
    agent = models.CharField(max_length=64, blank=True, default="")
    agent_instance = models.CharField(max_length=64, blank=True, default="")
    device = models.CharField(max_length=200, blank=True, default="")
    # The version this one was derived from: the current version when it was written
    # (null for version 1); for a revert also the version whose fields it copied.
    parent = models.PositiveIntegerField(null=True, blank=True)
    reverted_from = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "version"], name="memory_version_unique"),
            models.CheckConstraint(
                condition=~Q(category=Category.CREDENTIALS) | Q(content__startswith=FERNET_PREFIX),
                name="memory_version_credentials_encrypted"),
        ]
        ordering = ["memory", "version"]

    def __str__(self) -> str:
        return f"{self.memory_id} v{self.version}"

    @property
    def is_credentials(self) -> bool:
        return self.category == Category.CREDENTIALS

    def plaintext_content(self) -> str:
        """The snapshot's content in plaintext (see Memory.plaintext_content)."""
        return open_content(self.category, self.content)

    @property
    def provenance(self) -> Provenance:
        """What the writing request claimed about its agent."""
        return Provenance(agent=self.agent, agent_instance=self.agent_instance,
                          device=self.device)

    @property
    def recorded_by_payload(self) -> dict:
        """The trusted writer as the API and exports show it."""
        return {"type": self.recorded_by_type, "id": self.recorded_by_id,
                "label": self.recorded_by}

    @property
    def actor(self) -> str:
        """The writer as ``type:label`` (the pre-``recorded_by`` field, kept for clients)."""
        if self.recorded_by_type == "legacy":
            return self.recorded_by
        return f"{self.recorded_by_type}:{self.recorded_by}"

    @property
    def claimed(self) -> dict | None:
        """What a restored backup claimed about this version, or None."""
        if not (self.claimed_source or self.claimed_actor):
            return None
        return {"source": self.claimed_source, "actor": self.claimed_actor}


class AuditEvent(models.Model):
    """Append-only record of a state change: who, what, which memory, when."""

    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="audit_events")
    actor_type = models.CharField(max_length=10)  # user, key, connection, system
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=30)
    memory_id = models.CharField(max_length=40, blank=True, db_index=True)
    details = models.JSONField(default=dict, blank=True)
    # What the request claimed about its agent (as on MemoryVersion); never trusted.
    agent = models.CharField(max_length=64, blank=True, default="")
    agent_instance = models.CharField(max_length=64, blank=True, default="")
    device = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["mind", "-created_at"], name="audit_mind_created")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class TombstoneQuerySet(models.QuerySet):
    def for_mind(self, mind: Mind) -> "TombstoneQuerySet":
        """Tombstones of one mind, within the paths its request reaches (as memories)."""
        return self.filter(under_any(reach_of_mind(mind)), mind=mind)


class MemoryTombstone(models.Model):
    """What is left of a memory purged from the trash: enough for sync to know it was
    deleted (and never bring it back with an older copy).

    A scope reset (memories.services.reset) leaves a tombstone without text: blank
    ``category`` and ``key``, ``key_hash`` (memories.reset.key_hash: HMAC-SHA256 of the
    category and key, keyed per mind from SECRET_KEY) and, as ``path``, the prefix the
    owner reset (never the memory's own path). Sync refuses any copy it matches."""

    id = models.CharField(primary_key=True, max_length=40, editable=False)
    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="tombstones")
    category = models.CharField(max_length=20, choices=Category.choices)
    key = models.CharField(max_length=200)
    # Where the memory lived, so a diff of one path still tells its clients it is gone.
    path = models.CharField(max_length=MAX_PATH_LENGTH, blank=True, default="")
    deleted_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    purged_at = models.DateTimeField(default=timezone.now)
    change_txid = models.BigIntegerField(null=True, blank=True, editable=False)
    # A scope reset's tombstone (see above). ``key_hash`` is blank on other tombstones,
    # and on a reset tombstone restored from another instance's export (its hash was
    # keyed with that instance's secret: only the id is known here).
    reset = models.BooleanField(default=False)
    key_hash = models.CharField(max_length=64, blank=True, default="")

    objects = TombstoneQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["mind", "change_txid"], name="tombstone_mind_change_txid"),
            models.Index(fields=["mind", "category", "key"], name="tombstone_mind_key"),
            models.Index(fields=["mind", "key_hash"], name="tombstone_mind_key_hash",
                         condition=~Q(key_hash="")),
        ]

    def __str__(self) -> str:
        if self.is_reset:
            return f"{self.id} (reset)"
        return f"{self.category}/{self.key} (purged)"

    @property
    def is_reset(self) -> bool:
        return self.reset


class IdempotentRequest(models.Model):
    """The first answer to a request sent with an ``Idempotency-Key`` header."""

    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["mind", "key"],
                                               name="idempotent_request_unique")]

    def __str__(self) -> str:
        return self.key


class QuotaCounter(models.Model):
    """One of a mind's counter slots; the mind's usage is the sum of its slots
    (memories.quotas: striped so that writers of one mind do not queue on one row)."""

    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="+")
    slot = models.PositiveSmallIntegerField()
    memories = models.BigIntegerField(default=0)
    versions = models.BigIntegerField(default=0)
    content_bytes = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["mind", "slot"],
                                               name="quota_counter_slot_unique")]

    def __str__(self) -> str:
        return f"{self.mind_id} slot {self.slot}"
