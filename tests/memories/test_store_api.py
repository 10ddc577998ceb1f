"""POST /memory: store, upsert, unchanged, provenance, idempotency, strict input."""

import pytest

from memories.models import AuditEvent, Memory, MemoryVersion

pytestmark = pytest.mark.django_db

NAME = {"category": "identity", "key": "user_name", "content": "Michael Schäfer",
        "tags": ["Person", "identity"], "priority": "critical"}


def test_store_creates_memory_with_agent_provenance(agent, alice_mind):
    response = agent.post("/memory", NAME, format="json")
    assert response.status_code == 201
    assert response.json()["status"] == "stored"
    memory = Memory.objects.get(pk=response.json()["id"])
    assert memory.mind == alice_mind
    assert (memory.source, memory.verified, memory.confidence) == ("agent", False, 0.7)
    assert memory.tags == ["person", "identity"]
    assert memory.version == 1
    assert memory.embedding_pending is True


def test_identical_store_is_unchanged_and_writes_nothing(agent):
    first = agent.post("/memory", NAME, format="json").json()
    second = agent.post("/memory", NAME, format="json")
    assert second.status_code == 200
    assert second.json() == {"id": first["id"], "status": "unchanged", "version": 1,
                                 "citation": f"{first['id']}@v1"}
    assert MemoryVersion.objects.filter(memory_id=first["id"]).count() == 1
    assert AuditEvent.objects.filter(memory_id=first["id"]).count() == 1


def test_upsert_with_same_key_creates_version_2(agent):
    first = agent.post("/memory", NAME, format="json").json()
    response = agent.post("/memory", {**NAME, "content": "Michael Schaefer"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"id": first["id"], "status": "updated", "version": 2,
                               "citation": f"{first['id']}@v2"}
    versions = MemoryVersion.objects.filter(memory_id=first["id"]).order_by("version")
    assert [v.content for v in versions] == ["Michael Schäfer", "Michael Schaefer"]


def test_upsert_keeps_fields_left_out(agent):
    first = agent.post("/memory", NAME, format="json").json()
    agent.post("/memory", {"category": "identity", "key": "user_name", "content": "M. S."},
               format="json")
    memory = Memory.objects.get(pk=first["id"])
    assert (memory.priority, memory.tags) == ("critical", ["person", "identity"])


def test_store_without_key_derives_a_stable_one(agent):
    body = {"category": "note", "content": "The build server is in Frankfurt"}
    first = agent.post("/memory", body, format="json").json()
    second = agent.post("/memory", body, format="json").json()
    assert second == {"id": first["id"], "status": "unchanged", "version": 1,
                                 "citation": f"{first['id']}@v1"}
    assert Memory.objects.get(pk=first["id"]).key.startswith("the_build_server_is_in_")


def test_human_store_is_verified_user_memory(human, alice_mind):
    response = human.post(f"/memory?mind={alice_mind.id}", NAME, format="json")
    assert response.status_code == 201
    memory = Memory.objects.get(pk=response.json()["id"])
    assert (memory.source, memory.verified, memory.confidence) == ("user", True, 1.0)


def test_agent_repeating_verified_memory_keeps_it_verified(agent, human, alice_mind):
    memory_id = human.post(f"/memory?mind={alice_mind.id}", NAME, format="json").json()["id"]
    assert agent.post("/memory", NAME, format="json").json()["status"] == "unchanged"
    assert Memory.objects.get(pk=memory_id).verified is True


def test_agent_changing_verified_memory_makes_it_unverified(agent, human, alice_mind):
    memory_id = human.post(f"/memory?mind={alice_mind.id}", NAME, format="json").json()["id"]
    agent.post("/memory", {**NAME, "content": "Someone else"}, format="json")
    memory = Memory.objects.get(pk=memory_id)
    assert (memory.verified, memory.source, memory.version) == (False, "agent", 2)


@pytest.mark.parametrize("field, value", [
    ("verified", True), ("source", "user"), ("mind_id", "m_other"), ("id", "mem_x"),
    ("version", 7), ("created_at", "2026-01-01T00:00:00Z"), ("updated_at", 0),
])
def test_server_set_fields_are_refused_and_row_unchanged(agent, field, value):
    first = agent.post("/memory", NAME, format="json").json()
    before = Memory.objects.filter(pk=first["id"]).values().get()
    response = agent.post("/memory", {**NAME, "content": "changed", field: value},
                          format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert Memory.objects.filter(pk=first["id"]).values().get() == before


def test_unknown_body_field_is_named(agent):
    response = agent.post("/memory", {**NAME, "colour": "blue"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"colour": ["Unknown field."]}


@pytest.mark.parametrize("body, field", [
    ({"key": "k", "content": "c"}, "category"),
    ({"category": "wish", "content": "c"}, "category"),
    ({"category": "note", "content": ""}, "content"),
    ({"category": "note", "content": "   "}, "content"),
    ({"category": "note", "content": "x" * 50_001}, "content"),
    ({"category": "note", "content": "c", "tags": ["t"] * 21}, "tags"),
    ({"category": "note", "content": "c", "tags": ["x" * 51]}, "tags"),
    ({"category": "note", "content": "c", "priority": "urgent"}, "priority"),
    ({"category": "note", "content": "c", "confidence": 1.5}, "confidence"),
    ({"category": "note", "content": "c", "expires_at": "tomorrow"}, "expires_at"),
    ({"category": "note", "content": "nul \u0000 byte"}, "content"),
    ({"category": "note", "content": "c", "key": "a\u0000b"}, "key"),
])
def test_bad_input_is_400_naming_the_field(agent, body, field):
    response = agent.post("/memory", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Memory.objects.exists()


def test_content_of_50000_characters_in_any_language_is_stored(agent):
    content = "日本語のテキスト🙂" * 5000
    response = agent.post("/memory", {"category": "note", "content": content}, format="json")
    assert response.status_code == 201
    assert Memory.objects.get(pk=response.json()["id"]).content == content


def test_expires_at_accepts_epoch_seconds_and_rfc3339(agent):
    epoch = agent.post("/memory", {"category": "note", "key": "a", "content": "a",
                                   "expires_at": 1893456000}, format="json").json()
    rfc = agent.post("/memory", {"category": "note", "key": "b", "content": "b",
                                 "expires_at": "2030-01-01T01:00:00+01:00"}, format="json").json()
    assert Memory.objects.get(pk=epoch["id"]).expires_at == Memory.objects.get(
        pk=rfc["id"]).expires_at


def test_invalid_utf8_body_is_400(agent):
    response = agent.generic("POST", "/memory", b'{"category": "note", "content": "\xff\xfe"}',
                             content_type="application/json")
    assert response.status_code == 400
    assert "error" in response.json()


def test_malformed_json_is_400(agent):
    response = agent.generic("POST", "/memory", b'{"category": ', content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["status"] == 400


def test_oversized_body_is_413(agent, settings):
    settings.MAX_BODY_BYTES = 1000
    response = agent.post("/memory", {"category": "note", "content": "x" * 2000}, format="json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_idempotency_key_replays_first_answer_and_writes_once(agent):
    headers = {"HTTP_IDEMPOTENCY_KEY": "retry-1"}
    first = agent.post("/memory", NAME, format="json", **headers)
    again = agent.post("/memory", NAME, format="json", **headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert AuditEvent.objects.filter(action="store").count() == 1


def test_idempotency_key_with_another_body_is_409(agent):
    agent.post("/memory", NAME, format="json", HTTP_IDEMPOTENCY_KEY="retry-2")
    response = agent.post("/memory", {**NAME, "content": "other"}, format="json",
                          HTTP_IDEMPOTENCY_KEY="retry-2")
    assert response.status_code == 409
    assert Memory.objects.get().content == NAME["content"]


def test_read_only_key_cannot_store(reader):
    response = reader.post("/memory", NAME, format="json")
    assert response.status_code == 403
    assert not Memory.objects.exists()
