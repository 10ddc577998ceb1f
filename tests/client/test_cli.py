"""The installed ``synapse`` console script, run as a subprocess against a real server."""

import json
import re
import subprocess

import pytest

from memories.models import Memory
from minds.services import key_issue, mind_create
from tests.client.conftest import BIN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MEMORY_ID = re.compile(r"mem_[A-Za-z0-9]+")


@pytest.fixture
def synapse(synapse_server, alice_key):
    """``synapse(*args, key=…, stdin=…)`` runs the CLI as alice's agent by default."""

    def _run(*args: str, key: str | None = alice_key[1], stdin: str | None = None,
             url: str = synapse_server) -> subprocess.CompletedProcess:
        env = {"SYNAPSE_URL": url, "COLUMNS": "200"}
        if key is not None:
            env["SYNAPSE_MIND_KEY"] = key
        return subprocess.run([str(BIN / "synapse"), *args], env=env, input=stdin,
                              capture_output=True, text=True, timeout=60)

    return _run


def test_remember_then_recall_shows_the_memory_with_its_id(synapse):
    stored = synapse("remember", "identity", "Ada Lovelace", "--key", "user_name",
                     "--priority", "critical", "--tag", "Person")
    assert stored.returncode == 0, stored.stderr
    status, memory_id, *_ = stored.stdout.split()
    assert status == "stored" and MEMORY_ID.fullmatch(memory_id)
    recalled = synapse("recall")
    assert recalled.returncode == 0
    assert f"[{memory_id}] identity/user_name (CRITICAL) [unverified]\n  Ada Lovelace\n" \
           "  Tags: person" in recalled.stdout


def test_remember_reads_content_from_stdin_and_answers_json(synapse):
    result = synapse("remember", "note", "-", "--json", stdin="line one\nline two\n")
    assert result.returncode == 0
    body = json.loads(result.stdout)
    assert body["status"] == "stored"
    assert Memory.objects.get(pk=body["id"]).content == "line one\nline two\n"


def test_recall_json_is_the_api_answer(synapse, remember):
    memory = remember(category="fact", key="city", content="Lives in Lisbon")
    body = json.loads(synapse("recall", "--json").stdout)
    assert [item["id"] for item in body["memories"]] == [memory.id]
    assert body["mind"]["name"] == "Alice's Mind"


def test_get_shows_the_memory_in_full(synapse, remember):
    memory = remember(category="fact", key="city", content="Lives in Lisbon")
    text = synapse("get", memory.id)
    assert text.returncode == 0
    assert text.stdout.startswith(f"[{memory.id}] fact/city (NORMAL) [unverified]\n")
    assert "version 1, source agent, confidence 0.7" in text.stdout
    assert json.loads(synapse("get", memory.id, "--json").stdout)["content"] == \
        "Lives in Lisbon"


def test_forget_moves_to_the_trash_and_get_then_fails_with_the_api_message(synapse,
                                                                           remember):
    memory = remember(category="fact", key="city", content="Lives in Lisbon")
    forgotten = synapse("forget", memory.id)
    assert forgotten.returncode == 0
    assert forgotten.stdout.startswith(f"trashed  {memory.id}")
    missing = synapse("get", memory.id)
    assert missing.returncode == 1
    assert missing.stderr == "synapse: No such memory. [HTTP 404 not_found]\n"
    assert missing.stdout == ""


def test_invalid_input_exits_1_naming_the_field(synapse):
    result = synapse("remember", "fact", "x", "--confidence", "7")
    assert result.returncode == 1
    assert result.stderr.startswith("synapse: confidence: ")
    assert "[HTTP 400 invalid]" in result.stderr


def test_wrong_key_exits_3(synapse, alice_key):
    plaintext = alice_key[1]
    wrong = plaintext[:-1] + ("a" if plaintext[-1] != "a" else "b")
    result = synapse("recall", key=wrong)
    assert result.returncode == 3
    assert result.stderr == "synapse: Unknown Mind Key. [HTTP 401 authentication_failed]\n"


def test_read_only_key_writing_exits_3(synapse, alice_mind, alice):
    _key, plaintext = key_issue(mind=alice_mind, name="reader", scope="read", created_by=alice)
    result = synapse("remember", "fact", "x", key=plaintext)
    assert result.returncode == 3
    assert "This Mind Key is read-only." in result.stderr
    assert not Memory.objects.exists()


def test_missing_key_exits_1_and_says_what_to_set(synapse):
    result = synapse("recall", key=None)
    assert result.returncode == 1
    assert "set SYNAPSE_MIND_KEY" in result.stderr


def test_unreachable_server_exits_1(synapse):
    result = synapse("recall", url="http://127.0.0.1:9")
    assert result.returncode == 1
    assert result.stderr.startswith("synapse: Cannot reach Synapse at http://127.0.0.1:9")


@pytest.mark.parametrize("args", [[], ["remember", "bogus", "x"], ["get"], ["nonsense"]])
def test_bad_usage_exits_2(synapse, args):
    result = synapse(*args)
    assert result.returncode == 2
    assert "usage: synapse" in result.stderr


def test_one_minds_key_never_reaches_another_minds_memory(synapse, bob, remember):
    bob_mind = mind_create(owner=bob, name="Bob's Mind")
    secret = remember(mind=bob_mind, category="fact", key="plan", content="Bob's plan")
    assert synapse("get", secret.id).returncode == 1
    assert synapse("forget", secret.id).returncode == 1
    assert "Bob's plan" not in synapse("recall").stdout
    secret.refresh_from_db()
    assert secret.deleted_at is None
