"""Credentials: encrypted at rest, out of the index, embeddings, audit and logs; rotation."""

import logging
import os
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction

from memories.crypto import decrypt
from memories.embeddings import embed_batch, pending_memories
from memories.models import Memory, MemoryVersion
from memories.recall import REDACTED
from memories.services import CredentialsContentRequired, memory_revert, memory_update

pytestmark = pytest.mark.django_db

SECRET = "zebracorn-Qx93 hunter2 github_pat_11ABCDEF"
SECRET_WORDS = ("zebracorn", "hunter2", "github_pat_11abcdef", "qx93")
GITHUB = {"category": "credentials", "key": "github_token", "content": SECRET,
          "tags": ["github"]}


def raw(sql: str, params=()) -> str:
    """Every value the query returns, as one lowercase string."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return " ".join(str(value) for row in cursor.fetchall() for value in row).lower()


def assert_no_secret(text: str) -> None:
    text = text.lower()
    for word in SECRET_WORDS:
        assert word not in text


@pytest.fixture
def github(agent) -> str:
    response = agent.post("/memory", GITHUB, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def test_memory_row_holds_a_token_not_the_secret(github):
    stored = raw("SELECT content FROM memories_memory WHERE id = %s", [github])
    assert_no_secret(stored)
    assert decrypt(Memory.objects.get(pk=github).content) == SECRET


def test_version_rows_hold_tokens_not_the_secret(agent, github):
    agent.post("/memory", {**GITHUB, "content": SECRET + " rotated"}, format="json")
    assert MemoryVersion.objects.filter(memory_id=github).count() == 2
    assert_no_secret(raw("SELECT content FROM memories_memoryversion WHERE memory_id = %s",
                         [github]))
    versions = MemoryVersion.objects.filter(memory_id=github).order_by("version")
    assert [v.plaintext_content() for v in versions] == [SECRET, SECRET + " rotated"]


def test_search_vector_holds_key_and_tags_but_no_secret(github):
    document = raw("SELECT search_vector::text FROM memories_memory WHERE id = %s", [github])
    assert "github" in document
    assert_no_secret(document)


def test_audit_log_holds_no_secret(agent, github):
    agent.post("/memory", {**GITHUB, "content": "zebracorn changed"}, format="json")
    agent.delete(f"/memory/{github}")
    details = raw("SELECT action, details::text, actor_label FROM memories_auditevent")
    assert "store" in details and "update" in details and "delete" in details
    assert_no_secret(details)


def test_whole_database_dump_of_memory_tables_holds_no_secret(agent, github):
    agent.post("/memory", {**GITHUB, "content": SECRET + " v2"}, format="json")
    for table in ("memories_memory", "memories_memoryversion", "memories_auditevent",
                  "memories_idempotentrequest"):
        assert_no_secret(raw(f"SELECT t::text FROM {table} AS t"))  # noqa: S608


def test_credentials_are_never_embedded(github):
    memory = Memory.objects.get(pk=github)
    assert (memory.embedding, memory.embedding_pending) == (None, False)
    assert not pending_memories().filter(pk=github).exists()
    embed_batch(limit=10)
    assert Memory.objects.get(pk=github).embedding is None


def test_owner_reads_the_plaintext_by_id(agent, human, alice_mind, github):
    assert agent.get(f"/memory/{github}").json()["content"] == SECRET
    assert human.get(f"/memory/{github}?mind={alice_mind.id}").json()["content"] == SECRET


def test_another_mind_cannot_read_it(bob_agent, github):
    assert bob_agent.get(f"/memory/{github}").status_code == 404


def test_list_and_recall_redact_the_content(agent, github):
    listed = agent.get("/memory").json()["results"]
    assert [m["content"] for m in listed] == [REDACTED.format(id=github)]
    recall_text = agent.get("/memory/recall").content.decode()
    assert "github_token" in recall_text and REDACTED.format(id=github) in recall_text
    assert_no_secret(recall_text)
    recall_json = agent.get("/memory/recall?format=json").content.decode()
    assert_no_secret(recall_json)


def test_update_answer_reveals_to_the_owner_but_delete_answer_redacts(agent, github):
    updated = agent.put(f"/memory/{github}", {"content": SECRET + "!"}, format="json")
    assert updated.json()["content"] == SECRET + "!"
    assert_no_secret(agent.delete(f"/memory/{github}").content.decode())


def test_storing_the_same_secret_again_is_unchanged_despite_random_iv(agent, github):
    again = agent.post("/memory", GITHUB, format="json")
    assert again.json() == {"id": github, "status": "unchanged", "version": 1,
                            "citation": f"{github}@v1"}
    assert MemoryVersion.objects.filter(memory_id=github).count() == 1


def test_credentials_stored_without_key_get_a_key_without_words_of_the_secret(agent):
    body = {"category": "credentials", "content": SECRET}
    first = agent.post("/memory", body, format="json").json()
    memory = Memory.objects.get(pk=first["id"])
    assert memory.key.startswith("credentials_")
    assert_no_secret(memory.key)
    assert agent.post("/memory", body, format="json").json()["status"] == "unchanged"


def test_recategorising_a_note_as_credentials_encrypts_it_and_back_decrypts(agent, remember):
    note = remember(category="note", key="wifi", content="zebracorn wifi password")
    memory, changed = memory_update(memory=note, actor=None, category="credentials")
    assert changed
    assert_no_secret(raw("SELECT content, search_vector::text FROM memories_memory "
                         "WHERE id = %s", [note.id]))
    assert agent.get(f"/memory/{note.id}").json()["content"] == "zebracorn wifi password"
    memory, _ = memory_update(memory=memory, actor=None, category="note",
                              content="zebracorn wifi password")
    assert Memory.objects.get(pk=note.id).content == "zebracorn wifi password"


def test_moving_credentials_out_without_the_content_is_400_and_changes_nothing(
        agent, human, alice_mind, github):
    before = Memory.objects.get(pk=github)
    for client, query in ((agent, ""), (human, f"?mind={alice_mind.id}")):
        response = client.put(f"/memory/{github}{query}", {"category": "note",
                                                           "tags": ["moved"]}, format="json")
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert (error["status"], error["code"]) == (400, "invalid")
        assert "content" in error["fields"] and "send the content again" in error["message"]
    after = Memory.objects.get(pk=github)
    assert (after.category, after.content, after.tags, after.version) == (
        "credentials", before.content, ["github"], 1)
    assert not after.embedding_pending
    assert MemoryVersion.objects.filter(memory_id=github).count() == 1
    assert_no_secret(raw("SELECT search_vector::text FROM memories_memory WHERE id = %s",
                         [github]))
    with pytest.raises(CredentialsContentRequired):
        memory_update(memory=after, actor=None, category="note")


def test_moving_credentials_out_with_the_content_re_sent_goes_through(agent, github):
    response = agent.put(f"/memory/{github}", {"category": "note", "content": SECRET},
                         format="json")
    assert response.status_code == 200
    memory = Memory.objects.get(pk=github)
    assert (memory.category, memory.content, memory.version) == ("note", SECRET, 2)


def test_other_changes_to_credentials_need_no_content(agent, github):
    response = agent.put(f"/memory/{github}", {"tags": ["github", "work"], "key": "gh"},
                         format="json")
    assert response.status_code == 200
    assert Memory.objects.get(pk=github).category == "credentials"


def test_revert_restores_an_earlier_secret_encrypted(agent, github):
    agent.post("/memory", {**GITHUB, "content": "a newer secret"}, format="json")
    memory = memory_revert(memory=Memory.objects.get(pk=github), actor=None, version=1)
    assert memory.version == 3
    assert memory.plaintext_content() == SECRET
    assert_no_secret(raw("SELECT content FROM memories_memoryversion WHERE memory_id = %s",
                         [github]))


def test_database_refuses_plaintext_credentials(github):
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.filter(pk=github).update(content="plain secret")
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryVersion.objects.filter(memory_id=github).update(content="plain secret")


def test_no_secret_reaches_any_log_line_or_sql_statement(agent, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django.db.backends")
    connection.force_debug_cursor = True  # log every SQL statement with its parameters
    try:
        stored = agent.post("/memory", GITHUB, format="json")
        memory_id = stored.json()["id"]
        agent.post("/memory", {**GITHUB, "content": SECRET + " again"}, format="json")
        agent.get("/memory")
        agent.get("/memory/recall")
        refused = agent.post("/memory", {**GITHUB, "verified": True}, format="json")
        too_long = agent.post("/memory", {**GITHUB, "tags": ["x" * 51]}, format="json")
        agent.delete(f"/memory/{memory_id}")
    finally:
        connection.force_debug_cursor = False
    assert (refused.status_code, too_long.status_code) == (400, 400)
    assert_no_secret(refused.content.decode() + too_long.content.decode())
    sql_lines = [r for r in caplog.records if r.name == "django.db.backends"]
    assert any("memories_memory" in r.getMessage() for r in sql_lines)
    assert any("Bad Request" in r.getMessage() for r in caplog.records)
    for record in caplog.records:
        assert_no_secret(record.getMessage())


@pytest.fixture
def two_keys(settings):
    old, new = settings.CREDENTIALS_KEYS[0], Fernet.generate_key().decode()
    return settings, old, new


def test_rotation_re_encrypts_memories_and_versions_with_the_newest_key(agent, github,
                                                                        two_keys):
    settings, old, new = two_keys
    agent.post("/memory", {**GITHUB, "content": SECRET + " v2"}, format="json")
    before = Memory.objects.get(pk=github)
    settings.CREDENTIALS_KEYS = [new, old]
    call_command("rotate_credentials", stdout=open(os.devnull, "w"))  # noqa: SIM115
    settings.CREDENTIALS_KEYS = [new]  # the old key is gone: everything must still open
    after = Memory.objects.get(pk=github)
    assert after.plaintext_content() == SECRET + " v2"
    assert (after.version, after.updated_at) == (before.version, before.updated_at)
    versions = MemoryVersion.objects.filter(memory_id=github).order_by("version")
    assert [v.plaintext_content() for v in versions] == [SECRET, SECRET + " v2"]
    assert agent.get(f"/memory/{github}").json()["content"] == SECRET + " v2"


def test_rotation_reaches_the_trash_too(agent, github, two_keys):
    settings, old, new = two_keys
    agent.delete(f"/memory/{github}")
    settings.CREDENTIALS_KEYS = [new, old]
    call_command("rotate_credentials", stdout=open(os.devnull, "w"))  # noqa: SIM115
    settings.CREDENTIALS_KEYS = [new]
    assert Memory.objects.get(pk=github).plaintext_content() == SECRET


def test_rotation_without_the_old_key_stops_with_a_clear_error(github, two_keys):
    settings, _old, new = two_keys
    settings.CREDENTIALS_KEYS = [new]
    with pytest.raises(CommandError, match="no key in SYNAPSE_CREDENTIALS_KEYS opens it"):
        call_command("rotate_credentials")


def test_reading_with_a_missing_key_is_a_clear_error_not_a_crash(agent, github, two_keys):
    settings, _old, new = two_keys
    settings.CREDENTIALS_KEYS = [new]
    response = agent.get(f"/memory/{github}")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "credentials_unreadable"
    assert agent.get("/memory").status_code == 200  # listing never decrypts


def _settings_error(**env) -> str:
    environment = {**os.environ, "DATABASE_URL": "postgres://u:p@127.0.0.1:1/x", **env}
    environment.pop("SYNAPSE_CREDENTIALS_KEYS", None)
    environment.update(env)
    result = subprocess.run([sys.executable, "-c", "import synapse.settings"],
                            env=environment, capture_output=True, text=True, check=False)
    return result.stderr


def test_production_refuses_to_start_without_credentials_keys():
    stderr = _settings_error(SYNAPSE_PRODUCTION="true", SECRET_KEY="s" * 50,
                             ALLOWED_HOSTS="example.com", JWT_SIGNING_KEY="j" * 50)
    assert "ImproperlyConfigured" in stderr and "SYNAPSE_CREDENTIALS_KEYS" in stderr


def test_a_malformed_credentials_key_is_refused():
    stderr = _settings_error(SYNAPSE_CREDENTIALS_KEYS=f"{Fernet.generate_key().decode()},nope")
    assert "key 2 is not a Fernet key" in stderr


@pytest.mark.django_db(transaction=True)
def test_a_live_request_logs_no_secret_through_the_configured_handlers(live_server, alice_key,
                                                                      caplog):
    import io

    import httpx

    from synapse.logging import RedactSecretsFilter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecretsFilter())
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    caplog.set_level(logging.DEBUG)
    headers = {"Authorization": f"Bearer {alice_key[1]}"}
    try:
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
            stored = client.post("/memory", json=GITHUB)
            client.post("/memory", json={**GITHUB, "confidence": 7})  # a 400 is logged
            client.get(f"/memory?key={alice_key[1]}")
            revealed = client.get(f"/memory/{stored.json()['id']}")
    finally:
        root.removeHandler(handler)
    assert stored.status_code == 201 and revealed.json()["content"] == SECRET
    assert "Bad Request" in stream.getvalue()
    assert_no_secret(stream.getvalue())
    for record in caplog.records:
        assert_no_secret(record.getMessage())


def test_the_migration_encrypts_credentials_written_before_encryption(github):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("memories.migrations.0004_credentials_and_compaction")
    with connection.cursor() as cursor:  # the state before migration 0004 (rolled back)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE memories_memory DROP CONSTRAINT memory_credentials_encrypted")
        cursor.execute("ALTER TABLE memories_memoryversion "
                       "DROP CONSTRAINT memory_version_credentials_encrypted")
    Memory.objects.filter(pk=github).update(content=SECRET)
    MemoryVersion.objects.filter(memory_id=github).update(content=SECRET)
    migration.encrypt_existing_credentials(apps, None)
    assert_no_secret(raw("SELECT content FROM memories_memory WHERE id = %s", [github]))
    assert_no_secret(raw("SELECT content FROM memories_memoryversion WHERE memory_id = %s",
                         [github]))
    assert Memory.objects.get(pk=github).plaintext_content() == SECRET


def test_an_idempotency_fingerprint_cannot_be_checked_against_a_guessed_secret(agent):
    import hashlib
    import json

    response = agent.post("/memory", GITHUB, format="json", HTTP_IDEMPOTENCY_KEY="once")
    assert response.status_code == 201
    stored = raw("SELECT fingerprint FROM memories_idempotentrequest WHERE key = 'once'")
    guessed = hashlib.sha256(json.dumps(GITHUB, sort_keys=True).encode()).hexdigest()
    assert len(stored) == 64 and stored != guessed
    # The same request still replays; a different one is still refused.
    again = agent.post("/memory", GITHUB, format="json", HTTP_IDEMPOTENCY_KEY="once")
    assert (again.status_code, again["Idempotent-Replayed"]) == (201, "true")
    other = agent.post("/memory", {**GITHUB, "content": "other"}, format="json",
                       HTTP_IDEMPOTENCY_KEY="once")
    assert other.status_code == 409
