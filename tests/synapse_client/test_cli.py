"""The installed ``synapse`` console script, run as a subprocess against a real server."""

import json
import re

import pytest

from memories.models import Memory
from minds.services import key_issue, mind_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MEMORY_ID = re.compile(r"mem_[A-Za-z0-9]+")


def test_remember_then_recall_shows_the_memory_with_its_id(synapse):
    stored = synapse("remember", "identity", "Ada Lovelace", "--key", "user_name",
                     "--priority", "critical", "--tag", "Person")
    assert stored.returncode == 0, stored.stderr
    status, cited = stored.stdout.split()
    memory_id = cited.removesuffix("@v1")
    assert status == "stored" and MEMORY_ID.fullmatch(memory_id) and cited == f"{memory_id}@v1"
    recalled = synapse("recall")
    assert recalled.returncode == 0
    assert f"[{memory_id}@v1] identity/user_name (CRITICAL) [unverified]\n  Ada Lovelace\n" \
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
    assert text.stdout.startswith(f"[{memory.id}@v1] fact/city (NORMAL) [unverified]\n")
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


def test_restore_undoes_forget(synapse, remember):
    memory = remember(category="fact", key="city", content="Lives in Lisbon")
    assert synapse("forget", memory.id).returncode == 0
    restored = synapse("restore", memory.id)
    assert (restored.returncode, restored.stdout) == (0, f"restored  {memory.id}\n")
    memory.refresh_from_db()
    assert memory.deleted_at is None


def test_stats_counts_memories(synapse, remember):
    remember(category="fact", key="a", content="one")
    remember(category="note", key="b", content="two")
    result = synapse("stats")
    assert result.stdout.startswith("Memories: 2 total (0 verified, 2 unverified)\n")
    assert json.loads(synapse("stats", "--json").stdout)["by_category"]["note"] == 1


def test_export_then_import_restores_the_mind_exactly(synapse, synapse_server, remember,
                                                     bob, tmp_path):
    remember(category="fact", key="city", content="Lives in Lisbon", tags=["home"])
    remember(category="preference", key="tea", content="Green tea", priority="high")
    backup = tmp_path / "backup.json"
    exported = synapse("export", "-o", str(backup), "--progress")
    assert exported.returncode == 0, exported.stderr
    assert exported.stderr.startswith("Exporting ")
    assert exported.stderr.rstrip().endswith(f"to {backup}.")
    assert len(json.loads(backup.read_text())["memories"]) == 2

    empty_mind = mind_create(owner=bob, name="Bob's Mind")
    _key, bob_key = key_issue(mind=empty_mind, name="bob", created_by=bob)
    imported = synapse("import", str(backup), "--progress", key=bob_key)
    assert imported.returncode == 0, imported.stderr
    assert "Uploading " in imported.stderr
    copied = Memory.objects.for_mind(empty_mind).order_by("key")
    assert [(m.key, m.content, m.tags) for m in copied] == [
        ("city", "Lives in Lisbon", ["home"]), ("tea", "Green tea", [])]


def test_export_to_stdout_writes_the_backup(synapse, remember):
    remember(category="fact", key="city", content="Lives in Lisbon")
    result = synapse("export")
    assert result.returncode == 0
    assert [m["key"] for m in json.loads(result.stdout)["memories"]] == ["city"]


def test_stats_and_export_take_a_path(synapse, remember):
    remember(category="fact", key="root", content="At the root")
    remember(category="fact", key="inside", content="In project a", path="projects/a")
    remember(category="fact", key="below", content="Below project a",
             path="projects/a/decisions", memory_type="procedural")
    remember(category="fact", key="beside", content="In project ab", path="projects/ab")
    stats = json.loads(synapse("stats", "--json", "--path", "projects/a").stdout)
    assert (stats["total"], stats["by_memory_type"]["procedural"]) == (2, 1)
    typed = json.loads(synapse("stats", "--json", "--type", "procedural").stdout)
    assert typed["total"] == 1
    exported = synapse("export", "--path", "projects/a")
    assert exported.returncode == 0, exported.stderr
    assert sorted(m["key"] for m in json.loads(exported.stdout)["memories"]) == [
        "below", "inside"]
    refused = synapse("export", "--path", "Projects/../a")
    assert refused.returncode == 1 and "path" in refused.stderr


def test_recall_ends_with_the_low_priority_memories_left_out(synapse, remember):
    remember(category="identity", key="user_name", content="Ada", priority="critical")
    for number in range(6):
        remember(category="note", key=f"aside_{number}", content="filler text " * 20,
                 priority="low")
    text = synapse("recall", "--budget", "120").stdout
    assert len(text) / 4 <= 120 and "identity/user_name (CRITICAL)" in text
    shown = text.count("] note/aside_")
    assert shown < 6
    assert re.match(rf"Left out \(low priority, {6 - shown}(; \d not scanned)?\): aside_",
                    text.splitlines()[-1]), text
    answer = json.loads(synapse("recall", "--budget", "120", "--json").stdout)
    assert answer["left_out_low"]["count"] == 6 - len(answer["memories"]) + 1


def test_import_refuses_a_csv_export(synapse, tmp_path):
    csv = tmp_path / "backup.csv"
    csv.write_text("id,category\n")
    result = synapse("import", str(csv))
    assert result.returncode == 1
    assert "import restores JSON backups" in result.stderr


# -- remember-event -----------------------------------------------------------------------------

CITATION = re.compile(r"(stored|updated|unchanged)  (mem_[A-Za-z0-9]+)@v(\d+)")


def test_remember_event_stores_a_command_run_as_an_episode(synapse, received):
    event = {"type": "command_completed", "command": "pytest", "exit_code": 0,
             "output": "12 passed", "occurred_at": "2026-05-01T10:00:00Z",
             "project": "Memory OS", "agent": "claude-code"}
    result = synapse("remember-event", json.dumps(event), "--source", "claude-code")
    assert result.returncode == 0, result.stderr
    status, memory_id, version = CITATION.fullmatch(result.stdout.strip()).groups()
    assert (status, version) == ("stored", "1")
    memory = Memory.objects.get(pk=memory_id)
    assert (memory.category, memory.memory_type, memory.path, memory.priority) == (
        "context", "episodic", "projects/memory-os", "low")
    assert memory.key.startswith("command_") and memory.tags == ["command"]
    assert memory.content == "Ran: pytest (exit 0)\nOutput:\n12 passed"
    assert memory.occurred_at.isoformat() == "2026-05-01T10:00:00+00:00"
    [write] = received.headers_of("POST", "/memory")
    assert write["x-synapse-agent"] == "claude-code"

    again = synapse("remember-event", json.dumps(event))
    assert again.stdout == f"unchanged  {memory_id}@v1\n"


def test_remember_event_reads_json_lines_from_stdin(synapse, received):
    lines = "\n".join(json.dumps(event) for event in [
        {"type": "task_started", "task": "Fix flaky tests", "project": "memory-os"},
        {},  # replaced below: blank lines are skipped
        {"type": "task_progressed", "task": "Fix flaky tests", "note": "3 of 5",
         "project": "memory-os"},
        {"type": "decision", "subject": "Database", "decision": "Use PostgreSQL"},
    ]).replace("{}", "   ")
    result = synapse("remember-event", "--lines", stdin=lines + "\n",
                     env={"SYNAPSE_AGENT": "codex"})
    assert result.returncode == 0, result.stderr
    answers = [CITATION.fullmatch(line).groups() for line in result.stdout.splitlines()]
    assert [status for status, _id, _version in answers] == ["stored", "updated", "stored"]
    assert answers[0][1] == answers[1][1] and answers[1][2] == "2"
    task = Memory.objects.get(pk=answers[0][1])
    assert (task.memory_type, task.content) == ("working", "Task in progress: Fix flaky "
                                                           "tests\n3 of 5")
    decision = Memory.objects.get(pk=answers[2][1])
    assert (decision.category, decision.key, decision.priority) == (
        "project", "decision_database", "high")
    assert {headers["x-synapse-agent"] for headers in received.headers_of("POST", "/memory")
            } == {"codex"}


def test_remember_event_checks_every_line_before_storing_any(synapse):
    lines = (json.dumps({"type": "handoff", "note": "Deploy is half done"}) + "\n"
             + json.dumps({"type": "coffee_brewed"}) + "\n")
    result = synapse("remember-event", "--lines", "-", stdin=lines)
    assert result.returncode == 1
    assert result.stderr.startswith("synapse: line 2: Unknown event type 'coffee_brewed'")
    assert result.stdout == ""
    assert not Memory.objects.exists()


@pytest.mark.parametrize(("stdin", "message"), [
    ("{not json", "not JSON"),
    ("", "No event given"),
    ('{"type": "command_completed"}', "needs command"),
])
def test_remember_event_refuses_a_bad_event_with_exit_1(synapse, stdin, message):
    result = synapse("remember-event", stdin=stdin)
    assert result.returncode == 1
    assert message in result.stderr
    assert not Memory.objects.exists()


def test_remember_event_dry_run_prints_the_candidates_and_needs_no_key(synapse):
    event = {"type": "preference_stated", "subject": "Editor",
             "preference": "Prefers Helix over Vim"}
    result = synapse("remember-event", "--dry-run", "--agent", "codex", json.dumps(event),
                     key=None, url="http://127.0.0.1:9")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "category": "preference", "key": "preference_editor",
        "content": "Editor: Prefers Helix over Vim", "memory_type": "semantic",
        "priority": "high", "tags": ["preference"],
        "provenance": {"agent": "codex", "source": "generic"}}
    lines = synapse("remember-event", "--dry-run", "--lines", "--json",
                    stdin=json.dumps(event) + "\n" + json.dumps(event) + "\n")
    assert len(json.loads(lines.stdout)) == 2
    assert not Memory.objects.exists()


def test_remember_event_json_answers_and_api_refusals(synapse, alice_mind, alice):
    event = json.dumps({"type": "handoff", "note": "Resume at step 4", "agent": "codex"})
    answer = json.loads(synapse("remember-event", "--json", event).stdout)
    assert answer["status"] == "stored"
    assert Memory.objects.get(pk=answer["id"]).key == "handoff"
    _key, reader = key_issue(mind=alice_mind, name="reader", scope="read", created_by=alice)
    refused = synapse("remember-event", event, key=reader)
    assert refused.returncode == 3
    assert "read-only" in refused.stderr
