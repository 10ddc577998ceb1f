"""Per-mind quotas (memories.quotas): memories, versions and content bytes; a refused write
is a 403 quota_exceeded naming the quota and its limit, and writes nothing."""

import importlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from memories.models import AuditEvent, Memory, MemoryVersion, QuotaCounter
from memories.quotas import SLOTS, StoredBytes, Usage, mind_usage, recount
from minds.services import mind_create
from tests.conftest import session_client
from tests.memories.test_export_import import export_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def quota(settings):
    """Set some quotas for the test (the others stay at their defaults)."""
    def _quota(**limits):
        settings.SYNAPSE = {**settings.SYNAPSE,
                            **{f"QUOTA_{name.upper()}": value for name, value in limits.items()}}
    return _quota


def counted(mind) -> Usage:
    """What the mind really holds, counted from its rows."""
    versions = MemoryVersion.objects.filter(memory__mind=mind)
    return Usage(memories=Memory.objects.filter(mind=mind).count(),
                 versions=versions.count(),
                 content_bytes=versions.aggregate(total=Sum(StoredBytes("content")))["total"]
                 or 0)


def assert_refused(response, quota: str, limit: int):
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert error["quota"]["name"] == quota and error["quota"]["limit"] == limit
    assert str(limit) in error["message"] and f"SYNAPSE_QUOTA_{quota.upper()}" in error["message"]


def test_storing_past_the_memories_quota_is_403_naming_the_quota_and_limit(
        agent, alice_mind, quota):
    quota(memories=2)
    for key in ("a", "b"):
        assert agent.post("/memory", {"category": "fact", "key": key, "content": key},
                          format="json").status_code == 201
    response = agent.post("/memory", {"category": "fact", "key": "c", "content": "c"},
                          format="json")
    assert_refused(response, "memories", 2)
    assert response.json()["error"]["quota"] | {} == {"name": "memories", "limit": 2,
                                                     "used": 2, "adding": 1}
    assert Memory.objects.filter(mind=alice_mind).count() == 2
    assert not AuditEvent.objects.filter(details__key="c").exists()
    assert mind_usage(alice_mind) == counted(alice_mind) == Usage(2, 2, 2)


def test_a_mind_at_its_memories_quota_can_still_update_what_it_holds(agent, alice_mind, quota):
    quota(memories=1)
    agent.post("/memory", {"category": "fact", "key": "a", "content": "one"}, format="json")
    response = agent.post("/memory", {"category": "fact", "key": "a", "content": "two"},
                          format="json")
    assert response.status_code == 200 and response.json()["version"] == 2


def test_updating_past_the_versions_quota_is_refused_and_changes_nothing(
        agent, alice_mind, remember, quota):
    memory = remember(key="editor", content="Vim")
    remember(key="editor", content="Emacs")
    quota(versions=2)
    response = agent.put(f"/memory/{memory.id}", {"content": "Helix"}, format="json")
    assert_refused(response, "versions", 2)
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Emacs", 2)
    # Versions are never pruned to make room: both stay readable.
    versions = agent.get(f"/memory/{memory.id}/versions").json()["versions"]
    assert [v["content"] for v in versions] == ["Vim", "Emacs"]
    assert_refused(agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json"),
                   "versions", 2)
    assert Memory.objects.get(pk=memory.id).version == 2


def test_content_bytes_count_every_version_as_stored(agent, alice_mind, quota):
    quota(content_bytes=10)
    assert agent.post("/memory", {"category": "fact", "key": "k", "content": "ééééé"},
                      format="json").status_code == 201  # 10 bytes in UTF-8
    response = agent.post("/memory", {"category": "fact", "key": "k", "content": "x"},
                          format="json")
    assert_refused(response, "content_bytes", 10)
    assert mind_usage(alice_mind) == counted(alice_mind) == Usage(1, 1, 10)


def test_a_sync_over_the_quota_is_refused_whole(agent, alice_mind, remember, quota):
    remember(key="kept", content="Kept")
    quota(memories=3)
    body = {"memories": [{"category": "fact", "key": f"k{n}", "content": f"c{n}",
                          "updated_at": "2026-06-01T12:00:00Z"} for n in range(3)]}
    assert_refused(agent.post("/memory/sync", body, format="json"), "memories", 3)
    assert list(Memory.objects.filter(mind=alice_mind).values_list("key", flat=True)) == [
        "kept"]
    assert not AuditEvent.objects.filter(action="sync").exists()
    assert mind_usage(alice_mind) == counted(alice_mind)


def test_an_import_over_the_quota_is_refused_whole(agent, human, alice, alice_mind, remember,
                                                   quota):
    for n in range(3):
        remember(key=f"k{n}", content=f"c{n}")
    document = export_document(human, alice_mind)
    copy = mind_create(owner=alice, name="Copy")
    quota(memories=2)
    response = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert_refused(response, "memories", 2)
    assert not Memory.objects.filter(mind=copy).exists()
    assert mind_usage(copy) == Usage()


def test_the_web_ui_says_why_a_memory_was_not_stored(alice, alice_mind, remember, quota):
    remember(key="a", content="a")
    quota(memories=1)
    owner = session_client(alice)
    response = owner.post(f"/ui/minds/{alice_mind.id}/memories/new",
                          {"category": "fact", "key": "b", "content": "b", "priority": "normal",
                           "confidence": "1.0", "tags": ""})
    assert response.status_code == 400
    assert "Quota exceeded" in response.content.decode()
    assert "SYNAPSE_QUOTA_MEMORIES" in response.content.decode()
    assert Memory.objects.filter(mind=alice_mind).count() == 1


def test_counters_stay_exact_through_every_kind_of_write(agent, human, alice, alice_mind,
                                                         remember):
    first = remember(key="a", content="Alpha")
    remember(key="a", content="Alpha, revised")
    remember(key="credentials_db", category="credentials", content="s3cret")
    gone = remember(key="gone", content="Gone soon")
    agent.post(f"/memory/{first.id}/revert", {"version": 1}, format="json")
    agent.put(f"/memory/{first.id}", {"tags": ["x"]}, format="json")
    agent.post("/memory/sync", {"memories": [{"category": "fact", "key": "synced",
                                              "content": "From elsewhere",
                                              "updated_at": "2026-06-01T12:00:00Z"}]},
               format="json")
    agent.delete(f"/memory/{gone.id}")
    assert mind_usage(alice_mind) == counted(alice_mind)
    document = export_document(human, alice_mind, include_credentials="true")
    copy = mind_create(owner=alice, name="Copy")
    human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert mind_usage(copy) == counted(copy) != Usage()
    when = timezone.now() - timedelta(days=90)
    Memory.objects.filter(pk=gone.id).update(deleted_at=when, updated_at=when)
    call_command("purge_trash", stdout=StringIO())
    assert mind_usage(alice_mind) == counted(alice_mind)
    assert not Memory.objects.filter(pk=gone.id).exists()


def test_purging_the_trash_makes_room_again(agent, alice_mind, remember, quota):
    gone = remember(key="gone", content="Gone")
    quota(memories=1)
    agent.delete(f"/memory/{gone.id}")
    # The trash counts until it is purged.
    assert_refused(agent.post("/memory", {"category": "fact", "key": "new", "content": "n"},
                              format="json"), "memories", 1)
    when = timezone.now() - timedelta(days=90)
    Memory.objects.filter(pk=gone.id).update(deleted_at=when, updated_at=when)
    call_command("purge_trash", stdout=StringIO())
    assert agent.post("/memory", {"category": "fact", "key": "new", "content": "n"},
                      format="json").status_code == 201


def test_quotas_are_per_mind(agent, bob_agent, quota):
    quota(memories=1)
    assert agent.post("/memory", {"category": "fact", "content": "a"},
                      format="json").status_code == 201
    assert bob_agent.post("/memory", {"category": "fact", "content": "b"},
                          format="json").status_code == 201


def test_the_migration_fills_the_counters_of_minds_that_hold_memories(agent, alice_mind,
                                                                        remember):
    for number in range(20):
        remember(key=f"k{number}", content=f"Content {number}")
    remember(key="k0", content="Content 0, revised")
    remember(key="credentials_db", category="credentials", content="s3cret")
    agent.delete(f"/memory/{Memory.objects.get(key='k1').id}")
    QuotaCounter.objects.all().delete()
    migration = importlib.import_module("memories.migrations.0007_quota_counters")
    with connection.cursor() as cursor:
        cursor.execute(migration.Migration.operations[-1].sql)
    assert mind_usage(alice_mind) == counted(alice_mind) == Usage(
        memories=21, versions=22, content_bytes=counted(alice_mind).content_bytes)
    assert QuotaCounter.objects.filter(mind=alice_mind).count() == SLOTS


def test_recount_sets_the_counters_from_the_rows_a_bulk_load_left_out(alice_mind, bob_mind,
                                                                       remember):
    remember(key="stored", content="Through the service")
    loaded = Memory.objects.bulk_create(
        [Memory(mind=alice_mind, category="note", key=f"bulk{n}", content=f"Loaded {n}",
                source="agent", confidence=0.7) for n in range(40)])
    MemoryVersion.objects.bulk_create(
        [MemoryVersion(memory=memory, version=1, category=memory.category, key=memory.key,
                       content=memory.content, source="agent", confidence=0.7,
                       recorded_by_type="system", recorded_by="bulk") for memory in loaded])
    assert mind_usage(alice_mind).memories == 1
    bob_before = list(QuotaCounter.objects.filter(mind=bob_mind).values_list("memories"))
    recount(alice_mind)
    assert mind_usage(alice_mind) == counted(alice_mind) == Usage(
        memories=41, versions=41, content_bytes=counted(alice_mind).content_bytes)
    assert sorted(QuotaCounter.objects.filter(mind=alice_mind)
                  .values_list("memories", flat=True)) == [2] * 7 + [3] * 9  # 41 = 16·2 + 9
    assert list(QuotaCounter.objects.filter(mind=bob_mind).values_list("memories")) == bob_before
    recount()
    assert mind_usage(alice_mind) == counted(alice_mind)
