"""Path-scoped Mind Keys (MindKey.paths) over every memory route, through DRF's test client.

Alice's mind holds memories under ``projects/a`` (the scope), and outside it: a sibling
whose name starts the same (``projects/ab``), the root and ``personal`` (an episode, a
credentials memory, one in the trash, one purged). Everything outside carries OUT, a
canary no request sends: finding it in a scoped key's answer is a leak. The scoped key
reaches ``projects/a`` and ``team/x``; in scope it works as any key does, outside it every
memory is a 404 (as another mind's), absent from lists, searches, counts, exports and diffs,
and never written.
"""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.embeddings import embed_batch
from memories.models import AuditEvent, Memory, MemoryTombstone
from memories.paths import MAX_KEY_PATHS
from memories.services import memory_delete, memory_purge_trash, memory_store, memory_update
from minds.authentication import AgentPrincipal
from minds.models import MindKey
from minds.services import key_issue
from tests.conftest import jwt_client, key_client, messages_of, text

pytestmark = pytest.mark.django_db

OUT = "zqoutsidecanary"
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PATHS = ["projects/a", "team/x"]


class World:
    """Alice's mind, its memories in and out of the scope, and the keys."""

    def __init__(self, alice, mind):
        self.alice, self.mind = alice, mind
        self.inside, self.outside = {}, {}

        def put(bucket, name, path, content, **fields):
            fields.setdefault("category", "fact")
            memory = memory_store(mind=mind, actor=alice, key=name, content=content,
                                  path=path, tags=["shared"], **fields).memory
            bucket[name] = memory
            return memory

        put(self.inside, "plan", "projects/a", "The launch plan of project a, inside")
        put(self.inside, "notes", "projects/a/notes", "Launch notes deep inside project a")
        put(self.inside, "turn_1", "projects/a", "Launch turn one of the meeting",
            category="context", memory_type="episodic", occurred_at=T0)
        put(self.inside, "turn_2", "projects/a", "Launch turn two of the meeting",
            category="context", memory_type="episodic", occurred_at=T0 + timedelta(hours=1))
        put(self.outside, "sibling", "projects/ab", f"The launch plan {OUT} of project ab")
        put(self.outside, "root", "", f"The launch secret {OUT} at the root")
        put(self.outside, "diary", "personal", f"Launch diary {OUT} personal",
            expires_at=datetime.now(UTC) + timedelta(days=2), expires_given=True)
        put(self.outside, "personal_turn", "personal", f"Launch turn {OUT} personal",
            category="context", memory_type="episodic", occurred_at=T0 + timedelta(hours=2))
        put(self.outside, "token", "personal", f"token {OUT}", category="credentials")
        trashed = put(self.outside, "trashed", "personal", f"Launch trashed {OUT}")
        memory_delete(memory=trashed, actor=alice)
        purged = put(self.outside, "purged", "personal", f"Launch purged {OUT}")
        memory_delete(memory=purged, actor=alice)
        Memory.objects.filter(pk=purged.pk).update(deleted_at=T0)
        memory_purge_trash(older_than=datetime.now(UTC) - timedelta(days=1))
        assert MemoryTombstone.objects.filter(pk=purged.pk).exists()
        while embed_batch(limit=100, mind=mind):
            pass
        self.key_row, self.key = key_issue(mind=mind, name="scoped", created_by=alice,
                                           paths=PATHS)
        self.reader_row, self.reader = key_issue(mind=mind, name="scoped reader",
                                                 scope="read", created_by=alice,
                                                 paths=["projects/a"])
        self.client = key_client(self.key)

    def outside_rows(self) -> list:
        """Every stored field of the memories outside the scope (and its tombstone)."""
        ids = [memory.id for memory in self.outside.values()]
        return [list(Memory.objects.filter(pk__in=ids).order_by("id").values()),
                list(MemoryTombstone.objects.filter(pk__in=ids).values())]


@pytest.fixture
def world(alice, alice_mind) -> World:
    return World(alice, alice_mind)


def body(response) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode()


def ids_in(text: str, memories) -> set[str]:
    return {memory.id for memory in memories if memory.id in text}


# -- Issuing ------------------------------------------------------------------------------

def test_the_human_api_issues_a_key_with_paths_normalised(human, alice_mind):
    response = human.post(f"/minds/{alice_mind.id}/keys", {
        "name": "scoped", "paths": [" Projects/A/ ", "projects/a/notes", "team/x",
                                    "projects/a"]}, format="json")
    assert response.status_code == 201, response.json()
    issued = response.json()
    # Normalised, duplicates and prefixes below another left out, in the order given.
    assert issued["paths"] == ["projects/a", "team/x"]
    listed = human.get(f"/minds/{alice_mind.id}/keys").json()
    assert [key["paths"] for key in listed] == [["projects/a", "team/x"]]
    assert human.get(f"/minds/{alice_mind.id}/keys/{issued['id']}").json()["paths"] == [
        "projects/a", "team/x"]
    event = AuditEvent.objects.get(mind=alice_mind, action="key_issue")
    assert event.details["paths"] == ["projects/a", "team/x"]
    unscoped = human.post(f"/minds/{alice_mind.id}/keys", {"name": "whole"}, format="json")
    assert unscoped.json()["paths"] == []


@pytest.mark.parametrize("paths, message", [
    (["projects//a"], "no empty segments"),
    (["../etc"], "'.' or '..'"),
    ([""], "The root is not a path prefix"),
    (["/"], "The root is not a path prefix"),
    ([f"p{index}" for index in range(MAX_KEY_PATHS + 1)], f"at most {MAX_KEY_PATHS} path"),
    ("projects/a", "list"),
])
def test_invalid_paths_are_a_400_naming_the_field(human, alice_mind, paths, message):
    response = human.post(f"/minds/{alice_mind.id}/keys", {"name": "bad", "paths": paths},
                          format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and "paths" in error["fields"]
    assert message.lower() in json.dumps(error["fields"]).lower()
    assert not alice_mind.keys.exists()


def test_sixteen_prefixes_are_accepted(human, alice_mind):
    paths = [f"p{index}" for index in range(MAX_KEY_PATHS)]
    response = human.post(f"/minds/{alice_mind.id}/keys", {"name": "many", "paths": paths},
                          format="json")
    assert response.status_code == 201 and response.json()["paths"] == paths


def test_the_web_ui_issues_and_lists_keys_with_paths(owner, ui, alice_mind):
    response = owner.post(ui("keys"), {"name": "scoped laptop", "scope": "write",
                                       "expires_at": "",
                                       "paths": "Projects/A, team/x\nprojects/a/notes\n\n"})
    assert response.status_code == 200
    key = MindKey.objects.get(mind=alice_mind, name="scoped laptop")
    assert key.paths == ["projects/a", "team/x"]
    page = text(owner.get(ui("keys")))
    whole = '<span class="muted">whole mind</span>'
    assert "projects/a/" in page and "team/x/" in page and whole not in page
    key_issue(mind=alice_mind, name="unscoped")
    assert whole in text(owner.get(ui("keys")))


def test_the_web_ui_refuses_invalid_paths(owner, ui, alice_mind):
    response = owner.post(ui("keys"), {"name": "bad", "scope": "write", "expires_at": "",
                                       "paths": "projects/../etc"})
    assert response.status_code == 400
    assert "no &#x27;.&#x27; or &#x27;..&#x27; segments" in text(response)
    assert not MindKey.objects.filter(mind=alice_mind).exists()


def test_the_admin_issues_and_shows_keys_with_paths(staff, alice_mind):
    response = staff.post("/admin/minds/mindkey/add/", {
        "mind": alice_mind.pk, "name": "admin scoped", "scope": "read",
        "paths": "Projects/A,team/x"}, follow=True)
    assert response.status_code == 200, messages_of(response)
    key = MindKey.objects.get(name="admin scoped")
    assert key.paths == ["projects/a", "team/x"]
    assert "projects/a, team/x" in text(staff.get("/admin/minds/mindkey/"))
    assert "projects/a, team/x" in text(staff.get(f"/admin/minds/mindkey/{quote(key.pk)}/change/"))
    refused = staff.post("/admin/minds/mindkey/add/", {
        "mind": alice_mind.pk, "name": "admin bad", "scope": "read", "paths": "/"})
    assert "The root is not a path prefix" in text(refused)
    assert not MindKey.objects.filter(name="admin bad").exists()


def test_issue_key_takes_paths(alice_mind, capsys):
    from django.core.management import CommandError, call_command

    call_command("issue_key", alice_mind.id, "--name", "cli scoped", "--path", "Projects/A",
                 "--path", "team/x")
    assert MindKey.objects.get(name="cli scoped").paths == ["projects/a", "team/x"]
    with pytest.raises(CommandError, match="no empty segments"):
        call_command("issue_key", alice_mind.id, "--name", "cli bad", "--path", "a//b")
    assert not MindKey.objects.filter(name="cli bad").exists()


# -- Reads --------------------------------------------------------------------------------

READ_ROUTES = [
    ("/memory", {}),
    ("/memory", {"path": "personal"}),
    ("/memory", {"tag": "shared"}),
    ("/memory/recall", {}),
    ("/memory/recall", {"format": "json"}),
    ("/memory/recall", {"q": "launch plan", "format": "json"}),
    ("/memory/recall", {"budget": 2000}),
    ("/memory/search", {"q": "launch"}),
    ("/memory/search", {"q": "launch plan", "mode": "semantic", "explain": "true"}),
    ("/memory/search", {"q": "launch turn", "mode": "hybrid", "explain": "true"}),
    ("/memory/semantic-search", {"q": "launch plan"}),
    ("/memory/by-tag", {"tag": "shared"}),
    ("/memory/timeline", {"path": "projects/a"}),
    ("/memory/timeline", {"path": "personal"}),
    ("/memory/timeline", {}),
    ("/memory/trash", {}),
    ("/memory/expiring", {"within": "7d"}),
    ("/memory/unverified", {}),
    ("/memory/stats", {}),
    ("/memory/diff", {}),
    ("/memory/mind-export", {}),
    ("/memory/mind-export", {"format": "csv"}),
    ("/mind/export", {}),
    ("/memory/contradictions", {}),
    ("/memory/health", {}),
    ("/memory/embed-batch-status", {}),
]


@pytest.mark.parametrize("url, params", READ_ROUTES)
def test_no_read_route_shows_a_memory_outside_the_scope(world, url, params):
    response = world.client.get(url, params)
    assert response.status_code == 200, body(response)[:300]
    text = body(response)
    assert OUT not in text
    assert not ids_in(text, world.outside.values())
    # The same request with an unscoped key does see outside memories (the test can fail).
    counts_only = ("/memory/health", "/memory/embed-batch-status", "/memory/contradictions",
                   "/memory/stats", "/memory/unverified")
    if url not in counts_only and params.get("path") != "projects/a" and not (
            url == "/memory/timeline" and not params):
        whole = key_client(key_issue(mind=world.mind, name="whole")[1]).get(url, params)
        whole_text = body(whole)
        assert OUT in whole_text or ids_in(whole_text, world.outside.values()), url


def test_in_scope_memories_are_listed_searched_and_recalled(world):
    client, inside = world.client, world.inside
    listed = {m["id"] for m in client.get("/memory").json()["results"]}
    assert listed == {memory.id for memory in inside.values()}
    recall = client.get("/memory/recall", {"format": "json"}).json()
    assert {m["id"] for m in recall["memories"]} == listed and recall["total"] == 4
    for mode in ("keyword", "semantic", "hybrid"):
        found = client.get("/memory/search", {"q": "launch plan", "mode": mode}).json()
        assert found["count"] >= 1, mode
        assert {hit["id"] for hit in found["results"]} <= listed, mode
    tagged = client.get("/memory/by-tag", {"tag": "shared"}).json()
    assert tagged["count"] == 4
    timeline = client.get("/memory/timeline", {"path": "projects/a"}).json()
    assert [m["id"] for m in timeline["results"]] == [inside["turn_1"].id, inside["turn_2"].id]
    assert client.get("/memory/timeline", {"path": "personal"}).json()["count"] == 0


def test_stats_count_only_the_scope(world):
    stats = world.client.get("/memory/stats").json()
    assert stats["total"] == 4 and stats["in_trash"] == 0 and stats["purged"] == 0
    assert stats["by_category"]["credentials"] == 0
    assert stats["embeddings"]["total"] == 4
    whole = key_client(key_issue(mind=world.mind, name="whole")[1]).get("/memory/stats").json()
    assert whole["total"] > 4 and whole["in_trash"] == 1 and whole["purged"] == 1


def test_export_and_diff_hold_only_the_scope(world):
    export = json.loads(body(world.client.get("/memory/mind-export")))
    assert {m["id"] for m in export["memories"]} == {m.id for m in world.inside.values()}
    assert export["tombstones"] == []
    diff = world.client.get("/memory/diff").json()
    sent = {m["id"] for part in ("added", "updated", "deleted") for m in diff[part]}
    assert sent == {m.id for m in world.inside.values()}


def test_detail_routes_on_a_memory_outside_the_scope_are_404(world):
    client = world.client
    for memory in world.outside.values():
        if memory.key == "purged":
            continue
        base = f"/memory/{memory.id}"
        answers = [
            client.get(base), client.put(base, {"content": "overwritten"}, format="json"),
            client.delete(base), client.get(f"{base}/versions"),
            client.post(f"{base}/restore"), client.post(f"{base}/revert", {"version": 1},
                                                         format="json"),
            client.get(f"/memory/related/{memory.id}"), client.get(f"{base}/related"),
            client.get(f"{base}/neighbours"),
        ]
        for response in answers:
            assert response.status_code == 404, (memory.key, response.request["PATH_INFO"])
            assert response.json()["error"]["code"] == "not_found"
            assert OUT not in body(response)
    other_mind_memory = client.get("/memory/mem_doesnotexist").json()
    assert client.get(f"/memory/{world.outside['root'].id}").json() == other_mind_memory


def test_detail_routes_inside_the_scope_work(world):
    client, plan = world.client, world.inside["plan"]
    assert client.get(f"/memory/{plan.id}").status_code == 200
    assert client.get(f"/memory/{plan.id}/versions").json()["count"] == 1
    related = client.get(f"/memory/related/{plan.id}").json()
    assert related["count"] >= 1 and OUT not in json.dumps(related)
    neighbours = client.get(f"/memory/{world.inside['turn_1'].id}/neighbours").json()
    assert [m["id"] for m in neighbours["after"]] == [world.inside["turn_2"].id]
    assert client.delete(f"/memory/{plan.id}").status_code == 200
    trash = client.get("/memory/trash").json()
    assert [m["id"] for m in trash["results"]] == [plan.id]
    assert client.post(f"/memory/{plan.id}/restore").status_code == 200


# -- Writes -------------------------------------------------------------------------------

def test_a_store_without_a_path_goes_to_the_first_prefix(world):
    response = world.client.post("/memory", {"category": "fact", "key": "new_one",
                                             "content": "Stored without a path"}, format="json")
    assert response.status_code == 201
    assert Memory.objects.get(pk=response.json()["id"]).path == "projects/a"
    derived = world.client.post("/memory", {"category": "note", "content": "Derived key"},
                                format="json")
    assert Memory.objects.get(pk=derived.json()["id"]).path == "projects/a"


def test_a_store_under_any_prefix_is_accepted(world):
    for path in ("projects/a/deeper", "team/x", "Team/X/y/"):
        response = world.client.post("/memory", {"category": "fact", "key": f"k_{len(path)}",
                                                 "content": "inside", "path": path},
                                     format="json")
        assert response.status_code == 201, response.json()


@pytest.mark.parametrize("path", ["projects/ab", "", "personal", "team", "projects"])
def test_a_store_outside_the_prefixes_is_a_403(world, path):
    before = world.outside_rows()
    response = world.client.post("/memory", {"category": "fact", "key": "escape",
                                             "content": "out", "path": path}, format="json")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "path_out_of_scope"
    assert "projects" not in error["message"] and "personal" not in error["message"]
    assert not Memory.objects.filter(mind=world.mind, key="escape").exists()
    assert world.outside_rows() == before


def test_an_upsert_of_a_key_held_outside_is_a_409_that_reveals_nothing(world):
    before = world.outside_rows()
    for path in (None, "projects/a"):
        payload = {"category": "fact", "key": "diary", "content": "overwrite attempt"}
        if path:
            payload["path"] = path
        response = world.client.post("/memory", payload, format="json")
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "key_out_of_scope"
        assert OUT not in body(response) and world.outside["diary"].id not in body(response)
        assert "personal" not in error["message"]
    assert world.outside_rows() == before
    # With an Idempotency-Key too.
    response = world.client.post("/memory", {"category": "fact", "key": "diary",
                                             "content": "again"}, format="json",
                                 HTTP_IDEMPOTENCY_KEY="retry-1")
    assert response.status_code == 409
    assert world.outside_rows() == before


def test_an_idempotency_key_used_by_another_key_is_never_replayed_to_a_scoped_one(world):
    payload = {"category": "fact", "key": "shared_retry", "content": "stored at the root"}
    whole = key_client(key_issue(mind=world.mind, name="whole")[1])
    first = whole.post("/memory", payload, format="json", HTTP_IDEMPOTENCY_KEY="same-1")
    assert first.status_code == 201
    again = world.client.post("/memory", payload, format="json", HTTP_IDEMPOTENCY_KEY="same-1")
    assert again.status_code == 409 and first.json()["id"] not in body(again)
    assert not again.has_header("Idempotent-Replayed")


def test_an_upsert_inside_the_scope_updates(world):
    response = world.client.post("/memory", {"category": "fact", "key": "plan",
                                             "content": "A revised plan"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "updated"
    plan = Memory.objects.get(pk=world.inside["plan"].id)
    assert plan.path == "projects/a" and plan.content == "A revised plan"


def test_moving_a_memory_out_of_the_scope_is_a_403(world):
    plan = world.inside["plan"]
    for move in (lambda: world.client.put(f"/memory/{plan.id}", {"path": "personal"},
                                          format="json"),
                 lambda: world.client.post("/memory", {"category": "fact", "key": "plan",
                                                       "content": "moved",
                                                       "path": "projects/ab"},
                                           format="json")):
        response = move()
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "path_out_of_scope"
    assert Memory.objects.get(pk=plan.id).path == "projects/a"
    moved = world.client.put(f"/memory/{plan.id}", {"path": "team/x/plans"}, format="json")
    assert moved.status_code == 200 and moved.json()["path"] == "team/x/plans"


def test_reverting_to_a_version_outside_the_scope_is_a_403(world):
    """A human moved the memory into the scope: its first version lives outside it."""
    memory = world.inside["notes"]
    memory_update(memory=memory, actor=world.alice, path="personal")
    memory_update(memory=Memory.objects.get(pk=memory.pk), actor=world.alice,
                  path="projects/a/notes", content="Back in scope")
    version_outside = 2
    response = world.client.post(f"/memory/{memory.id}/revert", {"version": version_outside},
                                 format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "path_out_of_scope"
    assert Memory.objects.get(pk=memory.pk).path == "projects/a/notes"
    assert world.client.post(f"/memory/{memory.id}/revert", {"version": 1},
                             format="json").status_code == 200


def test_bulk_delete_leaves_outside_memories_untouched(world):
    before = world.outside_rows()
    ids = [m.id for m in world.outside.values()] + [world.inside["plan"].id]
    response = world.client.post("/memory/bulk-delete", {"ids": ids}, format="json")
    assert response.status_code == 200
    assert response.json()["deleted"] == [world.inside["plan"].id]
    assert world.outside_rows() == before


def test_sync_touches_only_the_scope(world):
    before = world.outside_rows()
    stamp = "2099-01-01T00:00:00Z"
    diary, root = world.outside["diary"], world.outside["root"]
    response = world.client.post("/memory/sync", {"memories": [
        # An outside memory by its id, by its (category, key), and one moved out.
        {"id": root.id, "category": "fact", "key": "other_key", "content": "hijack",
         "updated_at": stamp},
        {"category": "fact", "key": "diary", "content": "hijack", "updated_at": stamp},
        {"category": "fact", "key": "plan", "content": "moved", "path": "personal",
         "updated_at": stamp},
        {"category": "fact", "key": "fresh", "content": "new from a peer", "updated_at": stamp},
        {"category": "fact", "key": "escaped", "content": "new elsewhere", "path": "personal",
         "updated_at": stamp},
    ], "deleted": [{"id": diary.id, "category": "fact", "key": "diary",
                    "deleted_at": stamp, "updated_at": stamp}]}, format="json")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert OUT not in json.dumps(result)
    assert world.outside_rows() == before
    reasons = {conflict["key"]: conflict["reason"] for conflict in result["conflicts"]}
    assert set(reasons) == {"diary", "plan", "escaped"}
    assert "not under any of them" in reasons["plan"]
    assert Memory.objects.get(pk=world.inside["plan"].id).path == "projects/a"
    # The new one without a path went to the first prefix; the one aimed at an outside id
    # became a new memory of its own, in the scope.
    assert Memory.objects.get(mind=world.mind, key="fresh").path == "projects/a"
    hijack = Memory.objects.get(mind=world.mind, key="other_key")
    assert hijack.id != root.id and hijack.path == "projects/a"
    assert not Memory.objects.filter(mind=world.mind, key="escaped").exists()


@pytest.mark.parametrize("method, url, payload", [
    ("get", "/memory/audit", None),
    ("post", "/memory/compact", {"dry_run": True}),
    ("post", "/memory/mind-import", {"format": "synapse.mind-export", "format_version": 1,
                                     "memories": [], "tombstones": []}),
])
def test_mind_wide_routes_refuse_a_scoped_key(world, method, url, payload):
    response = getattr(world.client, method)(url, payload, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "path_scoped_key"
    unscoped = key_client(key_issue(mind=world.mind, name="whole")[1])
    assert getattr(unscoped, method)(url, payload, format="json").status_code != 403


def test_uncompact_refuses_a_scoped_key(world):
    response = world.client.post(f"/memory/{world.inside['plan'].id}/uncompact")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "path_scoped_key"


def test_a_read_only_scoped_key_stays_read_only(world):
    reader = key_client(world.reader)
    assert reader.get("/memory").json()["count"] == 4
    response = reader.post("/memory", {"category": "fact", "key": "x", "content": "y"},
                           format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "This Mind Key is read-only."
    assert reader.put(f"/memory/{world.inside['plan'].id}", {"content": "z"},
                      format="json").status_code == 403


def test_humans_and_unscoped_keys_still_reach_the_whole_mind(world):
    total = Memory.objects.filter(mind=world.mind).current().count()
    human = jwt_client(world.alice)
    assert human.get("/memory", {"mind": world.mind.id}).json()["count"] == total
    whole = key_client(key_issue(mind=world.mind, name="whole")[1])
    assert whole.get("/memory").json()["count"] == total
    stored = whole.post("/memory", {"category": "fact", "key": "rooted", "content": "at root"},
                        format="json")
    assert Memory.objects.get(pk=stored.json()["id"]).path == ""


def test_the_scope_is_read_from_the_key_on_every_request(world):
    """The key's own Mind instance is never narrowed: a scoped principal hands out a copy."""
    principal = AgentPrincipal(key=world.key_row)
    assert principal.mind.reach == tuple(PATHS)
    assert world.key_row.mind.reach == () and world.mind.reach == ()


# -- Query counts -------------------------------------------------------------------------

def queries_for(world, paths: list[str], url: str, params: dict) -> int:
    _row, plaintext = key_issue(mind=world.mind, name=f"k{len(paths)}", paths=paths)
    client = key_client(plaintext)
    client.get(url, params)  # last_used_at is written once a minute: not in the count
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params)
    assert response.status_code == 200
    return len(captured)


@pytest.mark.parametrize("url, params", [
    ("/memory", {}), ("/memory/recall", {"format": "json"}), ("/memory/search", {"q": "launch"}),
    ("/memory/stats", {}), ("/memory/diff", {}),
])
def test_query_counts_do_not_grow_with_the_number_of_prefixes(world, url, params):
    one = queries_for(world, ["projects/a"], url, params)
    many = queries_for(world, ["projects/a", *(f"p{index}" for index in range(15))], url,
                       params)
    assert one == many


def test_the_scope_is_one_condition_in_the_sql(world):
    _row, plaintext = key_issue(mind=world.mind, name="three", paths=["a", "b", "c"])
    with CaptureQueriesContext(connection) as captured:
        key_client(plaintext).get("/memory")
    listing = [q["sql"] for q in captured if 'FROM "memories_memory"' in q["sql"]]
    assert listing and all(sql.count('"memories_memory"."path"::text LIKE') == 3
                           and sql.count(" OR ") == 5 for sql in listing)
