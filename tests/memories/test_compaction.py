"""POST /memory/compact: near-duplicate agent memories become one summary, recoverably."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.compaction import union_of_facts
from memories.embeddings import embed_batch
from memories.models import AuditEvent, Memory
from memories.services import memory_set_verified

pytestmark = pytest.mark.django_db

DARK_MODE = [
    ("ui_theme", "The user prefers dark mode in every editor.", ["ui"]),
    ("editor_theme", "User likes dark mode in editors. They use VS Code.", ["ui", "editor"]),
    ("theme_preference", "The user prefers dark mode in every editor.", ["ui"]),
]
DEPLOY = [
    ("deploy", "Deploys go through GitHub Actions to Fly.io.", ["deploy"]),
    ("deployment", "We deploy with GitHub Actions; the target is Fly.io.", ["deploy"]),
]
UNRELATED = ("database", "The production database is PostgreSQL 16.", ["db"])


@pytest.fixture
def duplicates(remember):
    """Two clusters of near-duplicates (preference, fact) and one loner."""
    made = {}
    for category, rows in (("preference", DARK_MODE), ("fact", DEPLOY),
                           ("fact", [UNRELATED])):
        for key, content, tags in rows:
            made[key] = remember(category=category, key=key, content=content, tags=tags)
    return made


def compact(client, **body):
    response = client.post("/memory/compact", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def snapshot():
    return sorted(Memory.objects.values_list("id", "version", "superseded_at", "deleted_at",
                                             "updated_at"))


def test_dry_run_returns_the_plan_and_changes_nothing(agent, duplicates):
    before, events = snapshot(), AuditEvent.objects.count()
    plan = compact(agent, dry_run=True)
    assert plan["dry_run"] is True and plan["compacted"] == 0
    assert [sorted(m["key"] for m in c["members"]) for c in plan["clusters"]] == [
        ["editor_theme", "theme_preference", "ui_theme"], ["deploy", "deployment"]]
    assert all(c["summary"]["id"] is None and not c["applied"] for c in plan["clusters"])
    assert snapshot() == before and AuditEvent.objects.count() == events


def test_compaction_writes_one_system_summary_per_cluster(agent, duplicates):
    result = compact(agent)
    assert (result["compacted"], result["superseded"]) == (2, 5)
    theme = Memory.objects.get(pk=result["clusters"][0]["summary"]["id"])
    assert (theme.source, theme.verified, theme.confidence) == ("system", False, 0.7)
    assert theme.category == "preference"
    assert theme.tags == ["ui", "editor"]
    # The union of facts: the repeat and the paraphrase once, the extra fact kept.
    assert theme.content.splitlines() == ["The user prefers dark mode in every editor.",
                                          "They use VS Code."]


def test_originals_are_superseded_out_of_recall_but_readable_by_id(agent, duplicates):
    result = compact(agent)
    summary_id = result["clusters"][0]["summary"]["id"]
    original = duplicates["ui_theme"]
    recall = agent.get("/memory/recall").content.decode()
    assert "ui_theme" not in recall and "They use VS Code." in recall
    assert original.id not in [m["id"] for m in agent.get("/memory").json()["results"]]
    detail = agent.get(f"/memory/{original.id}").json()
    assert detail["superseded_by"] == summary_id and detail["superseded_at"] is not None
    assert detail["content"] == original.content


def test_loner_and_other_category_are_left_alone(agent, duplicates):
    compact(agent)
    loner = Memory.objects.get(pk=duplicates["database"].id)
    assert (loner.superseded_at, loner.version) == (None, 1)


def test_verified_memories_are_never_touched(agent, human, alice, alice_mind, duplicates):
    memory_set_verified(memory=duplicates["deploy"], user=alice, verified=True)
    result = compact(agent)
    assert [sorted(m["key"] for m in c["members"]) for c in result["clusters"]] == [
        ["editor_theme", "theme_preference", "ui_theme"]]
    assert Memory.objects.get(pk=duplicates["deploy"].id).superseded_at is None


def test_human_memories_are_never_compacted(human, alice_mind):
    for key, content, tags in DARK_MODE:
        human.post(f"/memory?mind={alice_mind.id}",
                   {"category": "preference", "key": key, "content": content, "tags": tags},
                   format="json")
    result = human.post(f"/memory/compact?mind={alice_mind.id}", {}, format="json").json()
    assert (result["candidates"], result["clusters"]) == (0, [])


def test_every_original_gets_a_compact_audit_event(agent, duplicates):
    result = compact(agent)
    summary_id = result["clusters"][1]["summary"]["id"]
    events = AuditEvent.objects.filter(action="compact").order_by("memory_id")
    assert sorted(e.memory_id for e in events) == sorted(m.id for m in duplicates.values()
                                                         if m.key != "database")
    deploy_event = events.get(memory_id=duplicates["deploy"].id)
    assert deploy_event.details["superseded_by"] == summary_id
    assert AuditEvent.objects.filter(action="store", memory_id=summary_id).exists()


def test_uncompact_brings_the_originals_back_and_trashes_the_summary(agent, duplicates):
    result = compact(agent)
    summary_id = result["clusters"][1]["summary"]["id"]
    response = agent.post(f"/memory/{summary_id}/uncompact")
    assert response.status_code == 200
    assert sorted(m["key"] for m in response.json()) == ["deploy", "deployment"]
    assert Memory.objects.get(pk=summary_id).deleted_at is not None
    recall = agent.get("/memory/recall").content.decode()
    assert "deploy\n" in recall and "deployment" in recall
    assert AuditEvent.objects.filter(action="uncompact").count() == 2


def test_uncompact_of_an_ordinary_memory_is_400(agent, duplicates):
    response = agent.post(f"/memory/{duplicates['database'].id}/uncompact")
    assert response.status_code == 400
    assert "not a compaction summary" in response.json()["error"]["message"]


def test_older_than_leaves_recent_memories_alone(agent, duplicates):
    Memory.objects.filter(key__in=["deploy", "deployment"]).update(
        updated_at=timezone.now() - timedelta(days=10))
    result = compact(agent, older_than="7d", dry_run=True)
    assert [sorted(m["key"] for m in c["members"]) for c in result["clusters"]] == [
        ["deploy", "deployment"]]
    assert result["candidates"] == 2


def test_category_max_clusters_and_min_cluster_size_limit_the_plan(agent, duplicates):
    by_category = compact(agent, category="fact", dry_run=True)
    assert [c["summary"]["category"] for c in by_category["clusters"]] == ["fact"]
    assert len(compact(agent, max_clusters=1, dry_run=True)["clusters"]) == 1
    assert [len(c["members"]) for c in compact(agent, min_cluster_size=3,
                                               dry_run=True)["clusters"]] == [3]


def test_stored_embeddings_give_the_same_clusters(agent, duplicates):
    embed_batch(limit=100)
    assert not Memory.objects.filter(embedding__isnull=True).exists()
    result = compact(agent, dry_run=True)
    assert [len(c["members"]) for c in result["clusters"]] == [3, 2]


def test_a_read_only_key_gets_403_and_nothing_changes(reader, duplicates):
    before = snapshot()
    response = reader.post("/memory/compact", {}, format="json")
    assert response.status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("body, field", [
    ({"dry_run": "maybe"}, "dry_run"), ({"older_than": "soon"}, "older_than"),
    ({"category": "credentials"}, "category"), ({"max_clusters": 0}, "max_clusters"),
    ({"min_cluster_size": 1}, "min_cluster_size"), ({"threshold": 0.5}, "threshold")])
def test_bad_compact_input_is_400_naming_the_field(agent, body, field):
    response = agent.post("/memory/compact", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_memory_changed_after_planning_skips_its_cluster(agent, alice_key, duplicates):
    from memories.compaction import plan_compaction
    from memories.services import memory_compact, memory_update

    mind = alice_key[0].mind
    plan = plan_compaction(mind=mind)
    memory_update(memory=duplicates["deploy"], actor=None, content="Deploys go to Render now.")
    done = memory_compact(mind=mind, actor=None, plan=plan)
    assert [len(c.superseded) for c in done] == [3]
    assert Memory.objects.get(pk=duplicates["deployment"].id).superseded_at is None


def test_numbers_that_differ_are_two_facts_not_a_repeat():
    merged = union_of_facts(["The database listens on port 5432.",
                             "The database listens on port 5433.",
                             "the database listens on port 5432"])
    assert merged.splitlines() == ["The database listens on port 5432.",
                                   "The database listens on port 5433."]


def test_other_minds_memories_are_never_compacted(agent, bob_agent, duplicates):
    result = bob_agent.post("/memory/compact", {}, format="json").json()
    assert (result["candidates"], result["clusters"]) == (0, [])
    assert not Memory.objects.filter(superseded_at__isnull=False).exists()


def test_a_second_run_of_the_same_plan_compacts_nothing_twice(alice_key, duplicates):
    from memories.compaction import plan_compaction
    from memories.services import memory_compact

    mind = alice_key[0].mind
    first, second = plan_compaction(mind=mind), plan_compaction(mind=mind)
    assert len(memory_compact(mind=mind, actor=None, plan=first)) == 2
    assert memory_compact(mind=mind, actor=None, plan=second) == []
    assert Memory.objects.filter(source="system").count() == 2


def test_planning_queries_do_not_grow_with_the_candidates(alice_key, remember):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memories.compaction import plan_compaction

    mind = alice_key[0].mind

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            plan_compaction(mind=mind)
        return len(captured.captured_queries)

    for number in range(3):
        remember(key=f"note_{number}", content=f"Reminder number {number} about the build.")
    few = queries()
    for number in range(3, 12):
        remember(key=f"note_{number}", content=f"Reminder number {number} about the build.")
    assert queries() == few


def test_a_chain_of_near_duplicates_never_pulls_unrelated_ends_together():
    import math

    import numpy as np

    from memories.compaction import cluster_memories

    step = math.acos(0.9)  # a≈b and b≈c (0.9), but a and c only 0.62 apart
    vectors = np.array([[math.cos(k * step), math.sin(k * step)] for k in range(3)],
                       dtype=np.float32)
    now = timezone.now()
    chain = [Memory(id=f"mem_{name}", category="fact", tags=[], created_at=now)
             for name in "abc"]
    assert [cluster for cluster, _lowest in cluster_memories(chain, vectors, 2)] == [[0, 1]]


def test_a_shared_tag_lets_slightly_less_similar_memories_cluster():
    import numpy as np

    from memories.compaction import cluster_memories

    vectors = np.array([[1.0, 0.0], [0.8, 0.6]], dtype=np.float32)  # cosine 0.8
    now = timezone.now()
    untagged = [Memory(id=f"mem_{n}", category="fact", tags=[], created_at=now) for n in "ab"]
    tagged = [Memory(id=f"mem_{n}", category="fact", tags=["deploy"], created_at=now)
              for n in "ab"]
    other_category = [Memory(id="mem_a", category="fact", tags=["deploy"], created_at=now),
                      Memory(id="mem_b", category="note", tags=["deploy"], created_at=now)]
    assert cluster_memories(untagged, vectors, 2) == []
    assert [c for c, _ in cluster_memories(tagged, vectors, 2)] == [[0, 1]]
    assert cluster_memories(other_category, vectors, 2) == []


def test_credentials_and_expired_memories_are_never_candidates(agent, remember):
    for key in ("token_a", "token_b"):
        remember(category="credentials", key=key, content="The deploy token is abc123.")
    past = timezone.now() - timedelta(days=1)
    for key in ("old_a", "old_b"):
        remember(category="fact", key=key, content="The office is in Hamburg.", expires_at=past)
    result = compact(agent)
    assert (result["candidates"], result["clusters"]) == (0, [])
    assert not Memory.objects.filter(superseded_at__isnull=False).exists()


def test_compaction_never_merges_memories_of_two_paths(agent, remember):
    """The same preference under two projects is two projects' memories; under one
    path they merge, and the summary lives on that path with the members' type."""
    for path in ("projects/a", "projects/b"):
        for key, content, tags in DARK_MODE[:2]:
            remember(category="preference", key=f"{key}_{path[-1]}", content=content,
                     tags=tags, path=path)
    result = compact(agent)
    assert [sorted(m["key"] for m in c["members"]) for c in result["clusters"]] in (
        [["editor_theme_a", "ui_theme_a"], ["editor_theme_b", "ui_theme_b"]],
        [["editor_theme_b", "ui_theme_b"], ["editor_theme_a", "ui_theme_a"]])
    for cluster in result["clusters"]:
        summary = Memory.objects.get(pk=cluster["summary"]["id"])
        suffix = cluster["members"][0]["key"][-1]
        assert summary.path == cluster["summary"]["path"] == f"projects/{suffix}"
        assert summary.memory_type == cluster["summary"]["memory_type"] == "semantic"


def test_compaction_keeps_types_apart_and_leaves_episodes_alone(agent, remember):
    (key_a, content, tags), (key_b, _, _) = DARK_MODE[0], DARK_MODE[2]  # the same text
    remember(category="preference", key=key_a, content=content, tags=tags,
             memory_type="procedural")
    remember(category="preference", key=key_b, content=content, tags=tags)
    for key in ("said_once", "said_twice"):
        remember(category="context", key=key, content=content, tags=tags,
                 memory_type="episodic")
    plan = compact(agent, dry_run=True)
    assert plan["clusters"] == []
    assert plan["candidates"] == 2  # the two episodes are not candidates at all
