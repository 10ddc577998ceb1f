"""POST /memory/reset: the hard purge of one scope, through DRF's test client.

Alice's mind holds, under ``projects/x``, memories whose content, keys, tags and sub-paths
carry MARK (episodes with neighbours, an updated memory with versions, credentials, an
idempotent store, one in the trash, one purged earlier, a compacted cluster) and, outside
it, a control memory. After the reset, every text, JSON, array and tsvector column of
every table of the database is searched for MARK: 0 hits; the control's rows are
byte-identical; a peer's sync of the old memories does not bring them back.
"""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test import Client
from django.utils import timezone

from memories.context import rebuild_all_contexts
from memories.embeddings import embed_batch
from memories.models import AuditEvent, Memory, MemoryTombstone, MemoryVersion
from memories.quotas import Usage, mind_usage
from memories.reset import key_hash
from memories.services import memory_delete, memory_purge_trash, memory_store
from minds.authentication import AgentPrincipal
from minds.services import key_issue, mind_create
from tests.conftest import key_client

pytestmark = pytest.mark.django_db

MARK = "zqrst"
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "ARRAY", "tsvector")


def residual_hits(needles: list[str]) -> list[tuple[str, str, str]]:
    """(table, column, needle) for every row of every table holding one of ``needles``."""
    hits = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type = ANY(%s) ORDER BY 1, 2",
            [list(TEXT_TYPES)])
        columns = cursor.fetchall()
        assert ("memories_memory", "context_vector") in columns  # the scan covers tsvectors
        for table, column in columns:
            for needle in needles:
                cursor.execute(
                    f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',  # noqa: S608
                    [f"%{needle}%"])
                if cursor.fetchone()[0]:
                    hits.append((table, column, needle))
    return hits


def row_text(table: str, where: str, value: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT t::text FROM "{table}" t WHERE {where} = %s ORDER BY t::text',  # noqa: S608
                       [value])
        return [row[0] for row in cursor.fetchall()]


def control_rows(memory_id: str) -> dict:
    return {table: row_text(table, column, memory_id) for table, column in (
        ("memories_memory", "id"), ("memories_memoryversion", "memory_id"),
        ("memories_auditevent", "memory_id"))}


def reset(client, path="projects/x", confirm=None, mind=None, **body):
    url = "/memory/reset" + (f"?mind={mind.id}" if mind else "")
    return client.post(url, {"path": path, "confirm": path if confirm is None else confirm,
                             **body}, format="json")


@pytest.fixture
def scope(alice_mind, alice_key, agent, remember):
    """The memories under projects/x (all carrying MARK) and a control outside it."""
    made = {}
    for n in range(3):
        made[f"turn_{n}"] = remember(
            category="context", key=f"{MARK}_turn_{n}", content=f"{MARK} turn {n} of the talk",
            memory_type="episodic", path="projects/x/talk", occurred_at=T0 + timedelta(hours=n),
            tags=[f"{MARK}-tag"])
    made["updated"] = remember(key=f"{MARK}_updated", content=f"first {MARK} words",
                               path=f"projects/x/{MARK}-sub")
    response = agent.put(f"/memory/{made['updated'].id}",
                           {"content": f"second {MARK} words"}, format="json")
    assert response.status_code == 200, response.content
    made["secret"] = remember(category="credentials", key=f"{MARK}_password",
                              content=f"hunter2-{MARK}", path="projects/x")
    response = agent.post("/memory", {"category": "fact", "key": f"{MARK}_idem",
                                      "content": f"once {MARK}", "path": "projects/x"},
                          format="json", HTTP_IDEMPOTENCY_KEY=f"{MARK}-idempotency")
    assert response.status_code == 201, response.content
    made["idem"] = Memory.objects.get(pk=response.json()["id"])
    principal = AgentPrincipal(key=alice_key[0])
    gone = remember(key=f"{MARK}_purged", content=f"purged {MARK}", path="projects/x")
    memory_delete(memory=gone, actor=principal)
    memory_purge_trash(older_than=timezone.now() + timedelta(seconds=1))
    made["purged_id"] = gone.id
    made["trashed"] = remember(key=f"{MARK}_trashed", content=f"trashed {MARK}",
                               path="projects/x")
    memory_delete(memory=made["trashed"], actor=principal)
    for key in ("dark", "dark_again"):
        made[key] = remember(category="preference", key=f"{MARK}_{key}", path="projects/x",
                             content=f"The user prefers dark mode {MARK} in every editor.")
    made["control"] = memory_store(mind=alice_mind, actor=principal, category="fact",
                                   key="control", content="The control stays", path="projects/y",
                                   tags=["kept"]).memory
    embed_batch(limit=100)
    compacted = agent.post("/memory/compact", {"category": "preference"}, format="json")
    assert compacted.status_code == 200, compacted.content
    assert Memory.objects.filter(superseded_by__isnull=False).count() == 2
    rebuild_all_contexts()
    return made


def test_a_reset_leaves_no_row_holding_the_scopes_words_or_keys(human, alice_mind, scope):
    assert residual_hits([MARK])  # the scan finds what is there
    control = control_rows(scope["control"].id)
    response = reset(human, mind=alice_mind)
    assert response.status_code == 200, response.content
    counts = response.json()["counts"]
    # 3 turns, updated, secret, idem, trashed, 2 compacted originals and their summary
    assert counts["memories"] == 10
    assert counts["versions"] == 11  # the updated memory has 2
    assert counts["tombstones"] == 10 and counts["tombstones_scrubbed"] == 1
    assert counts["idempotency_records"] == 1
    assert residual_hits([MARK]) == []
    assert control_rows(scope["control"].id) == control
    assert not Memory.objects.filter(path__startswith="projects/x").exists()
    event = AuditEvent.objects.get(mind=alice_mind, action="reset")
    assert event.details == {"path": "projects/x", "memory_type": "", "category": "",
                             "counts": counts}
    assert event.actor_type == "user"


def test_episodes_left_on_the_timeline_get_their_context_rebuilt(agent, human, alice_mind,
                                                                 remember, scope):
    kept = remember(category="note", key="kept_turn", content="kept turn between them",
                    memory_type="episodic", path="projects/x/talk",
                    occurred_at=T0 + timedelta(minutes=30))
    rebuild_all_contexts()
    kept.refresh_from_db()
    assert scope["turn_0"].id in kept.context_ids
    response = reset(human, mind=alice_mind, category="context")
    assert response.status_code == 200, response.content
    assert response.json()["counts"]["memories"] == 3
    kept.refresh_from_db()
    assert kept.context_ids == [kept.id]
    assert MARK not in str(kept.context_vector)
    assert Memory.objects.filter(key=f"{MARK}_updated").exists()  # another category


def test_only_the_type_asked_for_goes(human, alice_mind, scope):
    response = reset(human, mind=alice_mind, memory_type="episodic")
    assert response.json()["counts"]["memories"] == 3
    assert not Memory.objects.filter(memory_type="episodic").exists()
    assert Memory.objects.filter(pk=scope["updated"].id).exists()


def test_a_peer_cannot_push_a_reset_memory_back(agent, human, alice_mind, scope):
    old = agent.get("/memory/diff?path=projects/x").json()
    copies = [item for item in old["added"] + old["updated"] if item["key"].startswith(MARK)
              and item["category"] != "credentials"]
    assert len(copies) >= 5
    assert reset(human, mind=alice_mind).status_code == 200
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    pushed = [{**item, "updated_at": later} for item in copies]
    renamed = [{**item, "id": "mem_brandnew1", "updated_at": later} for item in copies[:1]]
    response = agent.post("/memory/sync", {"memories": pushed + renamed}, format="json")
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["added"] == result["updated"] == 0
    assert len(result["conflicts"]) == len(pushed) + 1
    assert {conflict["reason"] for conflict in result["conflicts"]} == {"reset"}
    assert not Memory.objects.filter(key__startswith=MARK).exists()
    # The diff a peer pulls says they are gone, by id, without any text.
    deleted = agent.get("/memory/diff").json()["deleted"]
    by_id = {item["id"]: item for item in deleted}
    assert scope["turn_0"].id in by_id and scope["purged_id"] in by_id
    assert by_id[scope["turn_0"].id]["reset"] is True
    assert (by_id[scope["turn_0"].id]["key"], by_id[scope["turn_0"].id]["category"]) == ("", "")
    assert MARK not in str(deleted)


def test_a_key_stored_again_after_the_reset_syncs_as_usual(agent, human, alice_mind, scope):
    assert reset(human, mind=alice_mind).status_code == 200
    again = agent.post("/memory", {"category": "fact", "key": f"{MARK}_idem",
                                   "content": "new words", "path": "projects/x"}, format="json")
    assert again.status_code == 201
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    response = agent.post("/memory/sync", {"memories": [
        {"category": "fact", "key": f"{MARK}_idem", "content": "newer words",
         "updated_at": later}]}, format="json")
    assert response.json()["updated"] == 1


def test_reset_tombstones_hold_only_the_id_and_a_keyed_hash(human, alice_mind, scope):
    assert reset(human, mind=alice_mind).status_code == 200
    tombstone = MemoryTombstone.objects.get(pk=scope["secret"].id)
    assert (tombstone.category, tombstone.key, tombstone.path) == ("", "", "projects/x")
    assert tombstone.key_hash == key_hash(alice_mind, "credentials", f"{MARK}_password")
    assert tombstone.key_hash != key_hash("mind_other", "credentials", f"{MARK}_password")


def test_audit_entries_of_the_scope_are_scrubbed(human, alice_mind, scope):
    ids = [scope["updated"].id, scope["trashed"].id]
    actions = sorted(AuditEvent.objects.filter(memory_id__in=ids)
                     .values_list("action", "actor_type"))
    assert reset(human, mind=alice_mind).status_code == 200
    events = AuditEvent.objects.filter(memory_id__in=ids)
    assert sorted(events.values_list("action", "actor_type")) == actions
    assert {str(event.details) for event in events} == {"{'scrubbed': 'reset'}"}


@pytest.mark.parametrize(("body", "field"), [
    ({"confirm": "projects/y"}, "confirm"),
    ({"confirm": ""}, "confirm"),
    ({"path": "", "confirm": "/"}, "path"),
    ({"path": "/", "confirm": "/"}, "path"),
])
def test_a_wrong_confirmation_or_the_root_is_a_400_and_nothing_is_done(human, alice_mind,
                                                                      scope, body, field):
    before = Memory.objects.count(), MemoryVersion.objects.count(), AuditEvent.objects.count()
    response = human.post(f"/memory/reset?mind={alice_mind.id}",
                          {"path": "projects/x", **body}, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert (Memory.objects.count(), MemoryVersion.objects.count(),
            AuditEvent.objects.count()) == before


def test_agents_need_the_minds_permission(agent, alice_mind, scope):
    response = reset(agent)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "reset_not_allowed"
    assert Memory.objects.filter(path__startswith="projects/x").count() == 10
    alice_mind.agents_may_reset = True
    alice_mind.save()
    response = reset(agent)
    assert response.status_code == 200, response.content
    assert AuditEvent.objects.get(action="reset").actor_type == "key"


def test_read_keys_may_not_reset(reader, alice_mind, scope):
    alice_mind.agents_may_reset = True
    alice_mind.save()
    assert reset(reader).status_code == 403
    assert Memory.objects.filter(path__startswith="projects/x").count() == 10


def test_a_path_scoped_key_resets_only_within_its_paths(alice, alice_mind, scope):
    alice_mind.agents_may_reset = True
    alice_mind.save()
    scoped = key_client(key_issue(mind=alice_mind, name="scoped", created_by=alice,
                                  paths=["projects/x/talk"])[1])
    outside = reset(scoped)
    assert outside.status_code == 403
    assert outside.json()["error"]["code"] == "path_out_of_scope"
    inside = reset(scoped, path="projects/x/talk")
    assert inside.status_code == 200, inside.content
    assert inside.json()["counts"]["memories"] == 3
    assert Memory.objects.filter(pk=scope["updated"].id).exists()


def test_another_minds_scope_is_out_of_reach(bob_agent, bob_mind, alice_mind, scope):
    bob_mind.agents_may_reset = True
    bob_mind.save()
    response = reset(bob_agent)
    assert response.status_code == 200
    assert response.json()["counts"]["memories"] == 0
    assert Memory.objects.filter(path__startswith="projects/x").count() == 10


# -- Who may: the mind's setting, through the human API, the settings page and the admin ---

def test_the_owner_allows_agents_through_the_mind_api(human, agent, alice_mind, scope):
    assert human.get(f"/minds/{alice_mind.id}").json()["agents_may_reset"] is False
    response = human.patch(f"/minds/{alice_mind.id}", {"agents_may_reset": True},
                           format="json")
    assert response.status_code == 200, response.content
    assert response.json()["agents_may_reset"] is True
    assert reset(agent).status_code == 200
    assert agent.patch(f"/minds/{alice_mind.id}", {"agents_may_reset": False},
                       format="json").status_code in (401, 403)


def test_the_settings_page_allows_agents(owner, ui, alice_mind):
    page = owner.get(ui("settings"))
    assert 'name="agents_may_reset"' in page.content.decode()
    response = owner.post(ui("settings"), {"name": alice_mind.name,
                                           "unverified_in_recall": "marked",
                                           "search_language": "english",
                                           "agents_may_reset": "on"})
    assert response.status_code == 302
    alice_mind.refresh_from_db()
    assert alice_mind.agents_may_reset is True


def test_the_admin_shows_the_setting(staff, alice_mind):
    page = staff.get(f"/admin/minds/mind/{quote(alice_mind.id)}/change/")
    assert page.status_code == 200
    assert 'name="agents_may_reset"' in page.content.decode()


# -- The web UI form ------------------------------------------------------------------------

def test_the_owner_resets_a_scope_from_the_ui_and_sees_the_counts(alice, ui, alice_mind, scope):
    owner = Client(enforce_csrf_checks=True)
    owner.force_login(alice)
    page = owner.get(ui("reset"))
    assert page.status_code == 200
    token = page.cookies["csrftoken"].value
    refused = owner.post(ui("reset"), {"path": "projects/x", "confirm": "projects/x"})
    assert refused.status_code == 403  # no CSRF token
    wrong = owner.post(ui("reset"), {"path": "projects/x", "confirm": "projects/y",
                                     "csrfmiddlewaretoken": token})
    assert wrong.status_code == 400
    assert "nothing was purged" in wrong.content.decode()
    assert Memory.objects.filter(path__startswith="projects/x").count() == 10
    done = owner.post(ui("reset"), {"path": "projects/x", "confirm": "projects/x",
                                    "memory_type": "episodic", "csrfmiddlewaretoken": token},
                      follow=True)
    assert done.status_code == 200
    assert "Reset projects/x: purged 3 memories and 3 versions" in done.content.decode()
    assert not Memory.objects.filter(memory_type="episodic").exists()


def test_the_ui_refuses_the_root_and_other_peoples_minds(owner, ui, bob_mind, alice_mind,
                                                         scope):
    root = owner.post(ui("reset"), {"path": "/", "confirm": "/"})
    assert root.status_code == 400
    assert "not offered" in root.content.decode()
    foreign = owner.post(f"/ui/minds/{bob_mind.id}/reset", {"path": "projects/x",
                                                            "confirm": "projects/x"})
    assert foreign.status_code == 404
    assert Memory.objects.filter(path__startswith="projects/x").count() == 10


# -- Peers: a pulled reset tombstone applies; exports carry them without text ---------------

def test_a_peer_applies_a_reset_tombstone_by_id(agent, alice_mind, scope):
    """The diff's reset tombstone, pushed as it came to the instance that holds a copy
    (here: the control, standing for the peer's copy of a reset memory), deletes it."""
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    tombstone = {"id": scope["control"].id, "category": "", "key": "", "path": "projects/y",
                 "deleted_at": later, "updated_at": later, "reset": True}
    response = agent.post("/memory/sync", {"added": [], "updated": [], "deleted": [tombstone],
                                           "cursor": "tx1", "has_more": False}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["deleted"] == 1
    scope["control"].refresh_from_db()
    assert scope["control"].deleted_at is not None
    no_id = agent.post("/memory/sync", {"deleted": [{**tombstone, "id": None}]},
                       format="json")
    assert no_id.status_code == 400
    blank = agent.post("/memory/sync", {"deleted": [{**tombstone, "reset": False}]},
                       format="json")
    assert blank.status_code == 400


def test_an_export_carries_reset_tombstones_without_text_and_imports(human, alice, alice_mind,
                                                                    scope):
    assert reset(human, mind=alice_mind).status_code == 200
    export = human.get(f"/memory/mind-export?mind={alice_mind.id}")
    assert export.status_code == 200
    body = b"".join(export.streaming_content)
    assert MARK.encode() not in body
    document = json.loads(body)
    assert {item["reset"] for item in document["tombstones"]} == {True}
    target = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={target.id}", document, format="json")
    assert response.status_code == 200, response.content
    restored = MemoryTombstone.objects.filter(mind=target, reset=True)
    assert restored.count() == 11
    assert set(restored.values_list("category", "key", "key_hash")) == {("", "", "")}


# -- Copied content elsewhere, and all or nothing --------------------------------------------

def test_admin_log_entries_of_the_scope_go(human, alice, alice_mind, scope):
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.contenttypes.models import ContentType

    memory = scope["updated"]
    LogEntry.objects.create(user=alice, content_type=ContentType.objects.get_for_model(Memory),
                            object_id=memory.id, object_repr=str(memory), action_flag=CHANGE,
                            change_message=f"Changed {memory.key}")
    version = MemoryVersion.objects.filter(memory=memory).first()
    LogEntry.objects.create(user=alice,
                            content_type=ContentType.objects.get_for_model(MemoryVersion),
                            object_id=str(version.pk), object_repr=str(version),
                            action_flag=CHANGE, change_message=f"Viewed {memory.key}")
    response = reset(human, mind=alice_mind)
    assert response.json()["counts"]["admin_log_entries"] == 2
    assert residual_hits([MARK]) == []


def test_a_summary_moved_out_of_the_scope_goes_with_its_originals(human, alice_mind, scope):
    summary = Memory.objects.get(source="system", path="projects/x")
    Memory.objects.filter(pk=summary.pk).update(path="projects/elsewhere")
    response = reset(human, mind=alice_mind, category="preference")
    assert response.json()["counts"]["memories"] == 3  # two originals and their summary
    assert not Memory.objects.filter(pk=summary.pk).exists()


def test_an_original_outside_the_scope_comes_back_when_its_summary_goes(human, alice_mind,
                                                                        scope):
    original = Memory.objects.filter(superseded_by__isnull=False).first()
    Memory.objects.filter(pk=original.pk).update(path="projects/kept")
    summary_id = original.superseded_by_id
    response = reset(human, mind=alice_mind, category="preference")
    assert response.json()["counts"]["originals_restored"] == 1
    original.refresh_from_db()
    assert (original.superseded_at, original.superseded_by_id) == (None, None)
    assert not Memory.objects.filter(pk=summary_id).exists()


def test_a_reset_that_fails_half_way_changes_nothing(human, alice_mind, scope, monkeypatch):
    def snapshot():
        with connection.cursor() as cursor:
            rows = {}
            for table in ("memories_memory", "memories_memoryversion", "memories_auditevent",
                          "memories_memorytombstone", "memories_idempotentrequest"):
                cursor.execute(f'SELECT t::text FROM "{table}" t ORDER BY 1')  # noqa: S608
                rows[table] = cursor.fetchall()
            return rows

    before = snapshot()

    def broken(**kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr("memories.services.reset.record_event", broken)
    with pytest.raises(RuntimeError):
        reset(human, mind=alice_mind)
    assert snapshot() == before


def test_the_quota_counters_give_back_what_was_purged(human, alice_mind, scope):
    from tests.memories.test_quotas import counted

    assert mind_usage(alice_mind) == counted(alice_mind)
    assert reset(human, mind=alice_mind).status_code == 200
    assert mind_usage(alice_mind) == counted(alice_mind) != Usage()


def test_resets_count_as_writes_for_the_rate_limit(settings, human, alice_mind):
    from tests.security.test_limits import LOW_RATES, assert_throttled

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": LOW_RATES}
    for _attempt in range(2):
        assert reset(human, mind=alice_mind).status_code == 200
    assert_throttled(reset(human, mind=alice_mind))
