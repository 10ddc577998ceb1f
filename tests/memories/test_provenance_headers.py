"""X-Synapse-Agent, X-Synapse-Agent-Instance and X-Synapse-Device over real HTTP: recorded
on every version and audit event a write makes, beside (never instead of) ``recorded_by``;
a malformed one is a 400 naming it and writes nothing; shown, filtered and exported.
Rows are re-read from the database, not taken from responses."""

import csv
import io
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import AuditEvent, Memory, MemoryVersion
from synapse.timestamps import format_timestamp

pytestmark = pytest.mark.django_db

CODEX = {"HTTP_X_SYNAPSE_AGENT": "codex", "HTTP_X_SYNAPSE_AGENT_INSTANCE": "04f9b8c2",
         "HTTP_X_SYNAPSE_DEVICE": "MacBook; Darwin 24.1.0; synapse-cli/0.1.0"}
CLAUDE = {"HTTP_X_SYNAPSE_AGENT": "claude-desktop", "HTTP_X_SYNAPSE_AGENT_INSTANCE": "a1"}


def provenance_of(row) -> tuple[str, str, str]:
    return row.agent, row.agent_instance, row.device


def store(client, content: str, key: str = "editor", headers=None, on: str = ""):
    response = client.post(f"/memory{on}", {"category": "preference", "key": key,
                                            "content": content}, format="json",
                           **(headers or {}))
    assert response.status_code in (200, 201), response.json()
    return response.json()


def test_each_version_records_the_headers_of_the_request_that_wrote_it(agent, alice_key):
    stored = store(agent, "Vim", headers=CODEX)
    store(agent, "Helix", headers=CLAUDE)
    store(agent, "Emacs")
    versions = MemoryVersion.objects.filter(memory_id=stored["id"]).order_by("version")
    assert [provenance_of(v) for v in versions] == [
        ("codex", "04f9b8c2", "MacBook; Darwin 24.1.0; synapse-cli/0.1.0"),
        ("claude-desktop", "a1", ""), ("", "", "")]
    # The trusted writer is the key, whatever the request claimed.
    assert {(v.recorded_by_type, v.recorded_by_id) for v in versions} == {
        ("key", alice_key[0].id)}
    events = AuditEvent.objects.filter(memory_id=stored["id"]).order_by("id")
    assert [(e.action, e.agent, e.agent_instance) for e in events] == [
        ("store", "codex", "04f9b8c2"), ("update", "claude-desktop", "a1"), ("update", "", "")]


def test_update_revert_delete_and_restore_record_the_headers(agent, remember):
    memory = remember(key="office", content="Bonn")
    assert agent.put(f"/memory/{memory.id}", {"content": "Paris"}, format="json",
                     **CODEX).status_code == 200
    assert agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json",
                      **CLAUDE).status_code == 200
    assert agent.delete(f"/memory/{memory.id}", **CODEX).status_code == 200
    assert agent.post(f"/memory/{memory.id}/restore", **CLAUDE).status_code == 200
    versions = MemoryVersion.objects.filter(memory=memory).order_by("version")
    assert [(v.version, v.agent) for v in versions] == [(1, ""), (2, "codex"),
                                                       (3, "claude-desktop")]
    events = AuditEvent.objects.filter(memory_id=memory.id).order_by("id")
    assert [(e.action, e.agent) for e in events] == [
        ("store", ""), ("update", "codex"), ("revert", "claude-desktop"), ("delete", "codex"),
        ("restore", "claude-desktop")]


def test_a_utf8_device_name_is_kept(agent):
    stored = store(agent, "Vim", headers={
        "HTTP_X_SYNAPSE_DEVICE": "Michaëls Mac".encode().decode("latin-1")})
    assert MemoryVersion.objects.get(memory_id=stored["id"]).device == "Michaëls Mac"


@pytest.mark.parametrize(("header", "value"), [
    ("X-Synapse-Agent", ""),
    ("X-Synapse-Agent", "-codex"),
    ("X-Synapse-Agent", "codex desktop"),
    ("X-Synapse-Agent", "c" * 65),
    ("X-Synapse-Agent", "codex/1"),
    ("X-Synapse-Agent-Instance", ""),
    ("X-Synapse-Agent-Instance", "a" * 65),
    ("X-Synapse-Agent-Instance", "04f9 b8c2"),
    ("X-Synapse-Device", ""),
    ("X-Synapse-Device", "d" * 201),
    ("X-Synapse-Device", "MacBook\tPro"),
    ("X-Synapse-Device", "MacBook\x7f"),
])
def test_a_malformed_header_is_a_400_naming_it_and_nothing_is_written(agent, alice_mind,
                                                                      header, value):
    meta = {"HTTP_" + header.upper().replace("-", "_"): value}
    response = agent.post("/memory", {"category": "fact", "key": "office",
                                      "content": "Bonn"}, format="json", **meta)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (400, "invalid")
    assert list(error["fields"]) == [header]
    assert error["message"].startswith(f"{header}: ")
    assert not Memory.objects.filter(mind=alice_mind).exists()
    assert not AuditEvent.objects.filter(mind=alice_mind).exclude(action="key_issue").exists()


def test_a_malformed_header_on_an_update_changes_nothing(agent, remember):
    memory = remember(key="office", content="Bonn")
    response = agent.put(f"/memory/{memory.id}", {"content": "Paris"}, format="json",
                         HTTP_X_SYNAPSE_AGENT="codex desktop")
    assert response.status_code == 400
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Bonn", 1)
    assert MemoryVersion.objects.filter(memory=memory).count() == 1


def test_headers_on_a_read_are_ignored_even_when_malformed(agent, remember):
    remember(key="office", content="Bonn")
    response = agent.get("/memory/recall", HTTP_X_SYNAPSE_AGENT="codex desktop")
    assert response.status_code == 200


def test_a_human_writing_without_headers_records_no_agent(human, alice_mind, alice):
    stored = store(human, "Vim", on=f"?mind={alice_mind.id}")
    version = MemoryVersion.objects.get(memory_id=stored["id"])
    assert provenance_of(version) == ("", "", "")
    assert (version.recorded_by_type, version.recorded_by_id) == ("user", str(alice.pk))


def test_a_human_sending_the_headers_on_the_api_records_them_as_claims(human, alice_mind,
                                                                       alice):
    stored = store(human, "Vim", on=f"?mind={alice_mind.id}", headers=CLAUDE)
    version = MemoryVersion.objects.get(memory_id=stored["id"])
    assert provenance_of(version) == ("claude-desktop", "a1", "")
    assert (version.recorded_by_type, version.recorded_by_id) == ("user", str(alice.pk))
    memory = Memory.objects.get(pk=stored["id"])
    assert (memory.source, memory.verified) == ("user", True)


def test_a_human_writing_in_the_web_ui_records_no_agent(owner, ui, alice_mind):
    response = owner.post(ui("memories/new"), {
        "category": "fact", "memory_type": "semantic", "key": "office", "content": "Bonn",
        "priority": "normal", "confidence": "1.0"}, **CODEX)
    assert response.status_code == 302
    version = MemoryVersion.objects.get(memory__mind=alice_mind)
    assert provenance_of(version) == ("", "", "")


def test_versions_and_version_items_show_the_claims(agent):
    stored = store(agent, "Vim", headers=CODEX)
    store(agent, "Helix", headers=CLAUDE)
    versions = agent.get(f"/memory/{stored['id']}/versions").json()["versions"]
    assert [(v["agent"], v["agent_instance"], v["device"]) for v in versions] == [
        ("codex", "04f9b8c2", "MacBook; Darwin 24.1.0; synapse-cli/0.1.0"),
        ("claude-desktop", "a1", "")]
    assert versions[0]["recorded_by"]["type"] == "key"


def test_versions_filter_by_agent_and_instance(agent):
    stored = store(agent, "Vim", headers=CODEX)
    store(agent, "Helix", headers=CLAUDE)
    store(agent, "Emacs", headers=CODEX)
    url = f"/memory/{stored['id']}/versions"
    by_agent = agent.get(f"{url}?agent=codex").json()
    assert [v["version"] for v in by_agent["versions"]] == [1, 3]
    assert by_agent["count"] == 2
    by_instance = agent.get(f"{url}?instance=a1").json()
    assert [v["version"] for v in by_instance["versions"]] == [2]
    assert agent.get(f"{url}?agent=codex&instance=a1").json()["versions"] == []
    assert agent.get(f"{url}?agent=" + "c" * 65).status_code == 400


def test_audit_shows_and_filters_the_claims(agent, remember):
    stored = store(agent, "Vim", headers=CODEX)
    store(agent, "Helix", key="shell", headers=CLAUDE)
    agent.delete(f"/memory/{stored['id']}", **CLAUDE)
    events = agent.get("/memory/audit").json()["results"]
    assert [(e["action"], e["agent"], e["agent_instance"], e["device"]) for e in events][:3] == [
        ("delete", "claude-desktop", "a1", ""), ("store", "claude-desktop", "a1", ""),
        ("store", "codex", "04f9b8c2", "MacBook; Darwin 24.1.0; synapse-cli/0.1.0")]
    codex = agent.get("/memory/audit?agent=codex").json()
    assert [(e["action"], e["memory_id"]) for e in codex["results"]] == [("store",
                                                                          stored["id"])]
    by_instance = agent.get("/memory/audit?instance=a1&action=delete").json()["results"]
    assert [e["memory_id"] for e in by_instance] == [stored["id"]]


def test_the_versions_list_costs_the_same_queries_with_more_versions(agent, remember):
    few = remember(key="few", content="v1")
    many = remember(key="many", content="v1")
    for number in range(2, 30):
        agent.put(f"/memory/{many.id}", {"content": f"v{number}"}, format="json", **CODEX)
    counts = []
    for memory in (few, many):
        with CaptureQueriesContext(connection) as queries:
            response = agent.get(f"/memory/{memory.id}/versions?agent=codex&limit=500")
        assert response.status_code == 200
        counts.append(len(queries))
    assert len(response.json()["versions"]) == 28
    assert counts[0] == counts[1]


def test_the_json_export_carries_each_versions_claims_and_lineage(agent, remember):
    memory = remember(key="office", content="Bonn")
    agent.put(f"/memory/{memory.id}", {"content": "Paris"}, format="json", **CODEX)
    agent.post(f"/memory/{memory.id}/revert", {"version": 1}, format="json", **CLAUDE)
    body = json.loads(b"".join(agent.get("/memory/mind-export").streaming_content))
    versions = body["memories"][0]["versions"]
    assert [(v["version"], v["agent"], v["agent_instance"], v["parent"], v["reverted_from"])
            for v in versions] == [(1, "", "", None, None), (2, "codex", "04f9b8c2", 1, None),
                                   (3, "claude-desktop", "a1", 2, 1)]
    assert versions[1]["device"] == "MacBook; Darwin 24.1.0; synapse-cli/0.1.0"


def test_the_csv_export_carries_the_claims_of_each_current_version(agent, remember):
    office = remember(key="office", content="Bonn")
    agent.put(f"/memory/{office.id}", {"content": "Paris"}, format="json", **CODEX)
    remember(key="shell", content="fish")
    response = agent.get("/memory/mind-export?format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_key = {row["key"]: row for row in rows}
    assert (by_key["office"]["agent"], by_key["office"]["agent_instance"],
            by_key["office"]["device"]) == ("codex", "04f9b8c2",
                                            "MacBook; Darwin 24.1.0; synapse-cli/0.1.0")
    assert (by_key["shell"]["agent"], by_key["shell"]["agent_instance"]) == ("", "")


def _sync_item(memory_id: str, content: str, **extra) -> dict:
    now = format_timestamp(timezone.now())
    return {"id": memory_id, "category": "fact", "key": "office", "content": content,
            "tags": [], "priority": "normal", "confidence": 0.7, "expires_at": None,
            "source": "agent", "verified": False, "created_at": now, "updated_at": now,
            **extra}


def test_a_sync_body_cannot_set_the_claims(agent, alice_mind):
    forged = _sync_item("mem_synced1", "Bonn", agent="forged", agent_instance="x",
                        device="y")
    response = agent.post("/memory/sync", {"memories": [forged]}, format="json", **CODEX)
    assert response.status_code == 400
    # Refused as any field a sync item does not have.
    assert "agent" in response.json()["error"]["fields"]["memories"]["0"]
    assert not Memory.objects.filter(mind=alice_mind).exists()
    response = agent.post("/memory/sync", {"memories": [_sync_item("mem_synced1", "Bonn")]},
                          format="json", **CODEX)
    assert response.status_code == 200, response.json()
    version = MemoryVersion.objects.get(memory__mind=alice_mind)
    assert provenance_of(version)[:2] == ("codex", "04f9b8c2")
    assert AuditEvent.objects.get(mind=alice_mind, action="sync").agent == "codex"


def test_an_import_records_the_importers_claims_not_the_backups(agent, alice_mind, bob_agent,
                                                                remember):
    memory = remember(key="office", content="Bonn")
    agent.put(f"/memory/{memory.id}", {"content": "Paris"}, format="json", **CODEX)
    backup = json.loads(b"".join(agent.get("/memory/mind-export").streaming_content))
    response = bob_agent.post("/memory/mind-import", backup, format="json", **CLAUDE)
    assert response.status_code == 200, response.json()
    restored = MemoryVersion.objects.filter(
        memory__mind__memberships__user__username="bob").order_by("version")
    assert [(v.version, v.agent, v.agent_instance, v.parent) for v in restored] == [
        (1, "claude-desktop", "a1", None), (2, "claude-desktop", "a1", 1)]
    # What the backup said about its writer stays a claim.
    assert restored[1].claimed_actor.startswith("key:alice agent")


def test_bulk_delete_and_a_humans_verification_record_the_headers(agent, human, alice_mind,
                                                                   remember):
    memory = remember(key="office", content="Bonn")
    other = remember(key="shell", content="fish")
    response = human.post(f"/memory/{memory.id}/verify?mind={alice_mind.id}",
                          {"version": 1}, format="json", **CLAUDE)
    assert response.status_code == 200, response.json()
    assert agent.post("/memory/bulk-delete", {"ids": [other.id]}, format="json",
                      **CODEX).status_code == 200
    assert (AuditEvent.objects.get(action="verify", memory_id=memory.id).agent
            == "claude-desktop")
    assert AuditEvent.objects.get(action="bulk_delete", mind=alice_mind).agent_instance == (
        "04f9b8c2")


def test_the_schema_documents_the_headers_on_writes_and_the_claims_on_versions():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    store = schema["paths"]["/memory"]["post"]
    headers = {p["name"] for p in store["parameters"] if p["in"] == "header"}
    assert {"X-Synapse-Agent", "X-Synapse-Agent-Instance", "X-Synapse-Device"} <= headers
    version = schema["components"]["schemas"]["Version"]["properties"]
    assert {"agent", "agent_instance", "device", "parent", "reverted_from"} <= set(version)
    listing = schema["paths"]["/memory/{memory_id}/versions"]["get"]
    assert {"agent", "instance"} <= {p["name"] for p in listing["parameters"]}
