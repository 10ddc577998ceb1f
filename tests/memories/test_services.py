"""memories/services/ called directly: every write keeps its invariants (a version row
per version, an audit event per state change, the embedding mark, provenance from the
writer, tombstones, quota counters), checked on the rows read back."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories import sync
from memories.embeddings import model_name
from memories.models import AuditEvent, Memory, MemoryTombstone, MemoryVersion
from memories.quotas import Usage, mind_usage
from memories.services import (
    CredentialsContentRequired,
    MemoryConflict,
    VersionConflict,
    memory_bulk_delete,
    memory_delete,
    memory_purge_trash,
    memory_restore,
    memory_revert,
    memory_set_verified,
    memory_store,
    memory_sync,
    memory_update,
    memory_verify_many,
)
from minds.authentication import AgentPrincipal

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot(alice_key):
    """alice's agent, as the services see it."""
    return AgentPrincipal(key=alice_key[0])


def versions_of(memory) -> list[tuple[int, str]]:
    return list(MemoryVersion.objects.filter(memory_id=memory.id).order_by("version")
                .values_list("version", "content"))


def actions_on(memory) -> list[str]:
    return list(AuditEvent.objects.filter(memory_id=memory.id).order_by("id")
                .values_list("action", flat=True))


def fresh(memory) -> Memory:
    return Memory.objects.get(pk=memory.pk)


def embedded(memory) -> None:
    """Pretend the worker embedded the memory (clears the queue flag)."""
    Memory.objects.filter(pk=memory.pk).update(embedding_pending=False)


# -- memory_store ----------------------------------------------------------------------------

def test_an_agents_new_memory_is_version_1_unverified_audited_and_queued(alice_mind, bot):
    result = memory_store(mind=alice_mind, actor=bot, category="fact", key="tz",
                          content="Lives in Lisbon", tags=[" Home ", "home", "Travel"],
                          source="user")
    assert result.status == "stored"
    memory = fresh(result.memory)
    assert (memory.version, memory.source, memory.verified, memory.confidence) == (
        1, "agent", False, 0.7)
    assert memory.tags == ["home", "travel"]
    # Queued for the worker, and searchable meanwhile (read your writes).
    assert memory.embedding_pending and memory.embedding_model == model_name()
    assert memory.embedding is not None
    assert versions_of(memory) == [(1, "Lives in Lisbon")]
    version = MemoryVersion.objects.get(memory=memory)
    assert (version.recorded_by_type, version.recorded_by_id) == ("key", bot.key.id)
    event = AuditEvent.objects.get(memory_id=memory.id)
    assert (event.action, event.actor_type, event.mind_id) == ("store", "key", alice_mind.id)
    assert event.details == {"category": "fact", "key": "tz", "version": 1}
    assert mind_usage(alice_mind) == Usage(memories=1, versions=1,
                                           content_bytes=len("Lives in Lisbon"))


def test_a_humans_new_memory_is_a_verified_user_memory(alice_mind, alice):
    memory = fresh(memory_store(mind=alice_mind, actor=alice, category="preference",
                                key="tea", content="Prefers tea").memory)
    assert (memory.source, memory.verified, memory.verified_by, memory.confidence) == (
        "user", True, alice, 1.0)
    assert memory.verified_at is not None
    assert AuditEvent.objects.get(memory_id=memory.id).actor_label == "alice"


def test_storing_the_same_payload_again_changes_nothing(alice_mind, bot):
    first = memory_store(mind=alice_mind, actor=bot, category="fact", key="k", content="Same")
    again = memory_store(mind=alice_mind, actor=bot, category="fact", key="k", content="Same")
    assert again.status == "unchanged" and again.memory.pk == first.memory.pk
    assert fresh(first.memory).version == 1
    assert versions_of(first.memory) == [(1, "Same")]
    assert actions_on(first.memory) == ["store"]


def test_storing_new_content_under_a_key_makes_version_2_and_queues_an_embedding(alice_mind,
                                                                                 bot):
    first = memory_store(mind=alice_mind, actor=bot, category="fact", key="k", content="One",
                         priority="high")
    embedded(first.memory)
    second = memory_store(mind=alice_mind, actor=bot, category="fact", key="k", content="Two")
    assert second.status == "updated"
    memory = fresh(first.memory)
    assert (memory.version, memory.content, memory.priority) == (2, "Two", "high")
    assert memory.embedding_pending
    assert versions_of(memory) == [(1, "One"), (2, "Two")]
    assert actions_on(memory) == ["store", "update"]
    assert AuditEvent.objects.get(memory_id=memory.id, action="update").details == {
        "version": 2, "fields": ["content"]}
    assert Memory.objects.for_mind(alice_mind).count() == 1


def test_a_memory_without_a_key_gets_the_same_derived_key_for_the_same_content(alice_mind,
                                                                              bot):
    first = memory_store(mind=alice_mind, actor=bot, category="note",
                         content="Deploys happen on Tuesdays")
    again = memory_store(mind=alice_mind, actor=bot, category="note",
                         content="Deploys happen on Tuesdays")
    assert first.memory.key.startswith("deploys_happen_on_tuesdays_")
    assert (again.status, again.memory.pk) == ("unchanged", first.memory.pk)


def test_a_credentials_memory_is_sealed_and_never_queued_for_embedding(alice_mind, bot):
    memory = fresh(memory_store(mind=alice_mind, actor=bot, category="credentials",
                                key="github", content="ghp_secret").memory)
    assert memory.content != "ghp_secret" and memory.plaintext_content() == "ghp_secret"
    assert memory.embedding_pending is False
    version = MemoryVersion.objects.get(memory=memory)
    assert version.content != "ghp_secret" and version.plaintext_content() == "ghp_secret"


# -- memory_update ---------------------------------------------------------------------------

def test_changing_only_the_priority_is_a_version_but_needs_no_new_embedding(remember, bot):
    memory = remember(key="k", content="Text")
    embedded(memory)
    updated, changed = memory_update(memory=memory, actor=bot, priority="critical")
    assert changed and updated.version == 2
    row = fresh(memory)
    assert (row.priority, row.version, row.embedding_pending) == ("critical", 2, False)
    assert versions_of(memory) == [(1, "Text"), (2, "Text")]


def test_changing_the_tags_queues_a_new_embedding(remember, bot):
    memory = remember(key="k", tags=["a"])
    embedded(memory)
    memory_update(memory=memory, actor=bot, tags=["B", "a"])
    row = fresh(memory)
    assert (row.tags, row.embedding_pending) == (["b", "a"], True)


def test_an_update_that_changes_nothing_makes_no_version_and_no_event(remember, bot):
    memory = remember(key="k", content="Text", priority="high")
    _memory, changed = memory_update(memory=memory, actor=bot, content="Text", priority="high")
    assert changed is False
    assert fresh(memory).version == 1 and actions_on(memory) == ["store"]


def test_an_update_to_a_key_already_taken_is_a_conflict_and_changes_nothing(remember, bot):
    remember(key="taken")
    memory = remember(key="mine", content="Mine")
    with pytest.raises(MemoryConflict):
        memory_update(memory=memory, actor=bot, key="taken")
    row = fresh(memory)
    assert (row.key, row.version) == ("mine", 1)
    assert versions_of(memory) == [(1, "Mine")]


def test_an_agents_edit_of_a_verified_memory_makes_it_unverified_agent_memory(remember,
                                                                             alice, bot):
    memory = remember(key="k", actor=alice)
    memory_update(memory=memory, actor=bot, content="Changed by the agent", source="user")
    row = fresh(memory)
    assert (row.source, row.verified, row.verified_by) == ("agent", False, None)


def test_moving_credentials_out_without_their_content_is_refused(alice_mind, bot):
    memory = memory_store(mind=alice_mind, actor=bot, category="credentials", key="wifi",
                          content="hunter2").memory
    with pytest.raises(CredentialsContentRequired):
        memory_update(memory=memory, actor=bot, category="note")
    row = fresh(memory)
    assert (row.category, row.version) == ("credentials", 1)


# -- delete, restore, revert -----------------------------------------------------------------

def test_delete_moves_to_the_trash_once_and_restore_brings_it_back(remember, alice):
    memory = remember(key="k")
    memory_delete(memory=memory, actor=alice)
    memory_delete(memory=memory, actor=alice)  # already in the trash: no second event
    assert fresh(memory).deleted_at is not None
    assert Memory.objects.in_trash().filter(pk=memory.pk).exists()
    memory_restore(memory=memory, actor=alice)
    row = fresh(memory)
    assert row.deleted_at is None and row.version == 1
    assert actions_on(memory) == ["store", "delete", "restore"]


def test_restoring_when_the_key_was_reused_is_a_conflict_and_stays_in_the_trash(remember,
                                                                               alice):
    memory = remember(key="reused", content="Old")
    memory_delete(memory=memory, actor=alice)
    remember(key="reused", content="New")
    with pytest.raises(MemoryConflict, match="reused"):
        memory_restore(memory=memory, actor=alice)
    assert fresh(memory).deleted_at is not None
    assert actions_on(memory) == ["store", "delete"]


def test_revert_makes_a_new_version_equal_to_the_old_one_and_keeps_history(remember, alice):
    memory = remember(key="k", content="Original", tags=["a"])
    memory_update(memory=memory, actor=alice, content="Changed", tags=["b"])
    reverted = memory_revert(memory=memory, actor=alice, version=1)
    row = fresh(reverted)
    assert (row.content, row.tags, row.version) == ("Original", ["a"], 3)
    assert versions_of(memory) == [(1, "Original"), (2, "Changed"), (3, "Original")]
    assert actions_on(memory) == ["store", "update", "revert"]


def test_an_agent_reverting_to_a_humans_version_writes_it_unverified(remember, alice, bot):
    memory = remember(key="k", content="Human words", actor=alice)
    memory_update(memory=memory, actor=bot, content="Agent words")
    memory_revert(memory=memory, actor=bot, version=1)
    row = fresh(memory)
    assert (row.content, row.source, row.verified) == ("Human words", "agent", False)


def test_reverting_to_a_missing_version_changes_nothing(remember, alice):
    memory = remember(key="k")
    with pytest.raises(MemoryVersion.DoesNotExist):
        memory_revert(memory=memory, actor=alice, version=7)
    assert fresh(memory).version == 1 and actions_on(memory) == ["store"]


# -- verification ----------------------------------------------------------------------------

def test_a_human_verifies_at_the_version_seen_once(remember, alice):
    memory = remember(key="k")
    memory_set_verified(memory=memory, user=alice, verified=True, version=1)
    memory_set_verified(memory=memory, user=alice, verified=True, version=1)
    row = fresh(memory)
    assert (row.verified, row.verified_by) == (True, alice) and row.verified_at is not None
    assert actions_on(memory) == ["store", "verify"]
    memory_set_verified(memory=memory, user=alice, verified=False)
    row = fresh(memory)
    assert (row.verified, row.verified_by, row.verified_at) == (False, None, None)
    assert actions_on(memory) == ["store", "verify", "unverify"]


def test_verifying_a_version_that_is_no_longer_current_is_refused(remember, alice):
    memory = remember(key="k", content="One")
    remember(key="k", content="Two")
    with pytest.raises(VersionConflict) as refused:
        memory_set_verified(memory=memory, user=alice, verified=True, version=1)
    assert refused.value.stale == [{"id": memory.id, "version": 1, "current_version": 2}]
    assert fresh(memory).verified is False
    assert "verify" not in actions_on(memory)


@pytest.mark.parametrize("who", ["agent", "nobody"])
def test_only_a_human_may_verify(remember, bot, who):
    memory = remember(key="k")
    with pytest.raises(PermissionError):
        memory_set_verified(memory=memory, user=bot if who == "agent" else None,
                            verified=True)
    assert fresh(memory).verified is False


def test_verifying_many_is_all_or_nothing(remember, alice, alice_mind, bob_mind, bob):
    first, second = remember(key="a"), remember(key="b")
    bobs = memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's").memory
    with pytest.raises(VersionConflict) as refused:
        memory_verify_many(mind=alice_mind, user=alice,
                           seen={first.id: 1, second.id: 1, bobs.id: 1})
    assert refused.value.stale == [{"id": bobs.id, "version": 1, "current_version": None}]
    assert not Memory.objects.for_mind(alice_mind).filter(verified=True).exists()
    verified = memory_verify_many(mind=alice_mind, user=alice, seen={first.id: 1, second.id: 1})
    assert {memory.id for memory in verified} == {first.id, second.id}
    assert set(Memory.objects.filter(verified=True, verified_by=alice)
               .values_list("id", flat=True)) == {first.id, second.id}
    assert actions_on(first) == ["store", "verify"] and actions_on(bobs) == ["store"]


# -- bulk delete, purge, sync ----------------------------------------------------------------

def test_bulk_delete_trashes_only_this_minds_live_memories_in_one_event(remember, alice,
                                                                        alice_mind, bob_mind,
                                                                        bob):
    first, second, trashed = remember(key="a"), remember(key="b"), remember(key="c")
    memory_delete(memory=trashed, actor=alice)
    bobs = memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's").memory
    deleted, not_found = memory_bulk_delete(
        mind=alice_mind, actor=alice, ids=[first.id, second.id, first.id, trashed.id, bobs.id,
                                           "mem_unknown"])
    assert sorted(deleted) == sorted([first.id, second.id])
    assert not_found == [trashed.id, bobs.id, "mem_unknown"]
    assert set(Memory.objects.in_trash().values_list("id", flat=True)) == {
        first.id, second.id, trashed.id}
    event = AuditEvent.objects.get(action="bulk_delete")
    assert event.details == {"count": 2, "memory_ids": sorted([first.id, second.id])}


def test_purge_leaves_tombstones_and_frees_the_quota(remember, alice, alice_mind):
    old, recent, live = remember(key="old"), remember(key="recent"), remember(key="live")
    memory_update(memory=old, actor=alice, content="Second version")
    memory_delete(memory=old, actor=alice)
    memory_delete(memory=recent, actor=alice)
    Memory.objects.filter(pk=old.pk).update(deleted_at=timezone.now() - timedelta(days=40))
    purged = memory_purge_trash(older_than=timezone.now() - timedelta(days=30))
    assert purged == 1
    assert not Memory.objects.filter(pk=old.pk).exists()
    assert not MemoryVersion.objects.filter(memory_id=old.pk).exists()
    tombstone = MemoryTombstone.objects.get(pk=old.pk)
    assert (tombstone.mind_id, tombstone.category, tombstone.key) == (alice_mind.id, "fact",
                                                                      "old")
    assert set(Memory.objects.values_list("id", flat=True)) == {recent.id, live.id}
    event = AuditEvent.objects.get(action="purge")
    assert (event.actor_type, event.details["count"], event.details["memory_ids"]) == (
        "system", 1, [old.id])
    assert mind_usage(alice_mind).memories == 2
    assert mind_usage(alice_mind).versions == 2


def test_sync_adds_a_new_memory_with_its_timestamps_and_one_event(alice_mind, bot):
    at = timezone.now() - timedelta(days=2)
    change = sync.Change(category="fact", key="synced", updated_at=at, created_at=at,
                         id="mem_fromelsewhere", source="user", verified=True,
                         fields={"content": "From the other instance", "tags": ["x"],
                                 "priority": "normal", "confidence": 0.9, "expires_at": None,
                                 "superseded_at": None})
    result = memory_sync(mind=alice_mind, actor=bot, changes=[change])
    assert (result.added, result.memory_ids) == (1, ["mem_fromelsewhere"])
    memory = Memory.objects.get(pk="mem_fromelsewhere")
    assert (memory.content, memory.updated_at, memory.version) == (
        "From the other instance", at, 1)
    assert (memory.source, memory.verified, memory.embedding_pending) == ("agent", False, True)
    version = MemoryVersion.objects.get(memory=memory)
    assert (version.claimed_source, version.source) == ("user", "agent")
    assert AuditEvent.objects.get(action="sync").details["added"] == 1
    again = memory_sync(mind=alice_mind, actor=bot, changes=[change])
    assert (again.added, again.unchanged) == (0, 1)
    assert fresh(memory).version == 1


def test_sync_ignores_a_copy_older_than_the_local_memory(remember, alice_mind, bot):
    memory = remember(key="k", content="Newer here")
    change = sync.Change(category="fact", key="k", id=memory.id,
                         updated_at=memory.updated_at - timedelta(hours=1),
                         fields={"content": "Older elsewhere", "tags": [], "priority": "normal",
                                 "confidence": 0.7, "expires_at": None, "superseded_at": None})
    result = memory_sync(mind=alice_mind, actor=bot, changes=[change])
    assert (result.stale, result.updated) == (1, 0)
    assert (fresh(memory).content, fresh(memory).version) == ("Newer here", 1)
