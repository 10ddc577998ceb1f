"""The TypeScript client (clients/typescript) with Node against a live server: its unit
tests (the shared agent-events fixture, errors, retries) and its live tests (store → get by
citation → recall → search → update → versions → trash → restore, an Idempotency-Key
replay, 404 and 401 as typed exceptions, provenance recorded).

`npm ci` runs once per package-lock.json (a stamp in node_modules says which), then
`npm run build` and `node --test`. Without Node or npm the test fails saying so."""

import fcntl
import hashlib
import json
import os
import random
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memories.models import MemoryVersion

# One worker installs, builds and runs Node (make test distributes by group).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("typescript-client")]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
STAMP = PACKAGE / "node_modules" / ".synapse-package-lock-sha256"
AGENT = "ts-live-test"


def tools() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.fail("The TypeScript client's tests need Node 20+ and npm on PATH "
                    f"(node: {node or 'missing'}, npm: {npm or 'missing'}); install them "
                    "(README, 'Develop').", pytrace=False)
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    major = int(re.match(r"v(\d+)", version).group(1))
    assert major >= 20, f"Node 20 or later is needed, not {version.strip()}"
    return node, npm


def npm(npm_path: str, *args: str) -> None:
    result = subprocess.run([npm_path, *args], cwd=PACKAGE, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "npm_config_fund": "false",
                                              "npm_config_audit": "false"})
    assert result.returncode == 0, f"npm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"


def install(npm_path: str) -> None:
    """`npm ci` when node_modules was not installed from this package-lock.json."""
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if STAMP.is_file() and STAMP.read_text().strip() == lock:
        return
    npm(npm_path, "ci")
    STAMP.write_text(lock + "\n")


def tap_summary(output: str) -> dict[str, int]:
    return {name: int(count) for name, count in re.findall(
        r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, re.MULTILINE)}


@pytest.fixture(scope="module")
def node() -> str:
    """Node, with the package installed (once per lock file) and built. The lock keeps
    two test processes from installing at once; the build is incremental, so it rewrites
    nothing while another process runs the built tests."""
    node_path, npm_path = tools()
    with open(PACKAGE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        install(npm_path)
        npm(npm_path, "run", "build")
    return node_path


@pytest.mark.django_db(transaction=True)
def test_the_typescript_client_passes_its_tests_against_a_live_server(
        node, synapse_server, alice_key, tmp_path):
    from minds.services import key_issue

    read_key = key_issue(mind=alice_key[0].mind, name="read agent", scope="read")[1]
    config = tmp_path / "config"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "SYNAPSE_URL": synapse_server, "SYNAPSE_MIND_KEY": alice_key[1],
           "SYNAPSE_TEST_READ_KEY": read_key,
           "SYNAPSE_AGENT": AGENT, "SYNAPSE_CONFIG_DIR": str(config)}
    files = sorted(str(path.relative_to(PACKAGE))
                   for path in (PACKAGE / "dist" / "test").glob("*.test.js"))
    assert "dist/test/live.test.js" in files and "dist/test/events.test.js" in files
    result = subprocess.run([node, "--test", "--test-reporter=tap", *files], cwd=PACKAGE,
                            env=env, capture_output=True, text=True, timeout=300)
    summary = tap_summary(result.stdout)
    failures = "\n".join(line for line in result.stdout.splitlines()
                         if line.lstrip().startswith("not ok"))
    assert result.returncode == 0, f"{failures}\n{result.stdout[-6000:]}\n{result.stderr}"
    assert summary["tests"] >= 80 and summary["pass"] == summary["tests"], summary
    assert (summary["fail"], summary["cancelled"], summary["skipped"], summary["todo"]) == (
        0, 0, 0, 0), summary

    # What the server stored, read here rather than from the client: the client's own
    # instance id, made in its config folder, on the versions it wrote.
    instance = (config / "agent_instance_id").read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{16}", instance)
    assert (config / "agent_instance_id").stat().st_mode & 0o777 == 0o600
    written = MemoryVersion.objects.filter(memory__mind=alice_key[0].mind, agent=AGENT)
    assert written.count() >= 5
    assert set(written.values_list("agent_instance", flat=True)) == {instance}
    assert all(device.endswith("; synapse-ts/0.1.0")
               for device in written.values_list("device", flat=True))


def test_the_combining_table_of_the_typescript_client_is_current():
    """src/combining.ts is generated from this Python's unicodedata (JavaScript has no
    combining classes); after a Python upgrade, run the script again."""
    script = PACKAGE / "scripts" / "combining.py"
    namespace = runpy.run_path(str(script))
    current = (PACKAGE / "src" / "combining.ts").read_text(encoding="utf-8")
    assert current == namespace["source"](), (
        f"run {sys.executable} clients/typescript/scripts/combining.py")


# -- Both normalisers on thousands of generated events -------------------------------------

TEXTS = ["", " ", "pytest", "  make test  ", "Éditeur Réglé", "e\u0301cole", "日本語のテキスト",
         "😀 emoji 😀", "Tab\there", "line\nbreak", "ＦＵＬＬ width", "ß straße", "İstanbul",
         "ΣΑΣ ΟΔΟΣ", "x" * 4003, "😀" * 4100, "a" * 1001, "h" * 1000 + "m" * 3100 + "t" * 2900,
         "\u00a0nbsp\u00a0", "\u2028sep\u2029", "-leading", "...", "___", "UPPER Case", "a/b",
         "/Projects/Memory-OS/", "projects/../etc", "ok.name_1-2", "Memory OS", "ǅemo ﬁle",
         "\u1e9b\u0323", "Ⅻ roman", "x" * 70, "a/" * 9 + "a", "Kelvin \u212a", "\x1fctl\x1c"]
NUMBERS = [0, 1, -1, 2, 255, 9999, 10000, 1777629600, 1777629600123, -0.0005, 1.5,
           100000000000, 100000000001, -62135596801, -62135596800, 12345.678, 1777629600.9999995,
           253402300800000, 253402300799999]
OTHERS = [True, False, None, [], ["a"], {}, {"a": 1}]
TIMES = ["2026-05-01T10:00:00Z", "2026-05-01t10:00:00z", "2026-05-01 10:00",
         "2026-05-01T10:00:00.5+05:30", "2026-05-01T10:00:00.123456789-0800",
         "2026-02-29T00:00:00Z", "2024-02-29T23:59:59.999Z", "2026-05-01T10:00:00+23:59",
         "2026-05-01T10:00:00+24:00", "0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00",
         "2026-13-01T00:00:00Z", " 2026-05-01T10:00:00Z ", "yesterday", "2026-05-01"]
TYPE_NAMES = ["command_completed", "command_failed", "file_edited", "decision_made",
              "error_fixed", "preference_stated", "task_started", "task_progressed",
              "task_completed", "handoff_note", "CommandCompleted", "command-completed",
              "command.completed", " Decision ", "fix", "progress", "handover", "task_done",
              "agent-turn-complete", "coffee", None, "TaskStarted", "PreferenceStated"]
FIELD_NAMES = ["command", "cmd", "command_line", "commandLine", "exit_code", "exitCode",
               "returncode", "output", "stdout", "result", "stderr", "file", "file_path",
               "filename", "summary", "description", "message", "diff", "patch", "subject",
               "topic", "decision", "text", "rationale", "reason", "error", "problem", "fix",
               "solution", "preference", "statement", "task", "title", "name", "task_id",
               "taskId", "note", "progress", "details"]
EXIT_NAMES = {"exit_code", "exitCode", "returncode"}
EXIT_CODES = [0, 0, 1, 2, "2", " 3 ", "-0012", "12345", "x", 1.5, True, None, ""]


def _value(rng, texts=TEXTS):
    roll = rng.random()
    if roll < 0.7:
        return rng.choice(texts)
    return rng.choice(NUMBERS) if roll < 0.85 else rng.choice(OTHERS)


def _event(rng) -> dict:
    roll = rng.random()
    if roll < 0.12:
        event = {"hook_event_name": rng.choice(["PostToolUse", "post_tool_use", "Stop"]),
                 "tool_name": rng.choice(["Bash", "Edit", "Write", "MultiEdit", "Read", None]),
                 "tool_input": rng.choice([{"command": _value(rng)},
                                           {"file_path": _value(rng)}, "x"]),
                 "tool_response": rng.choice([
                     {"exit_code": rng.choice([0, 1, True, False, None, "2"]),
                      "stdout": _value(rng), "stderr": _value(rng)},
                     {"interrupted": True, "output": "partial"}, "plain output", None])}
    elif roll < 0.2:
        event = {"type": "agent-turn-complete",
                 "input-messages": rng.choice([["Fix the build"], [], None, [7], "text"]),
                 "last-assistant-message": _value(rng)}
    else:
        event = {rng.choice(["type", "event", "event_type", "kind"]): rng.choice(TYPE_NAMES)}
        for name in rng.sample(FIELD_NAMES, rng.randint(3, 12)):
            if name in EXIT_NAMES:
                event[name] = rng.choice(EXIT_CODES)
            else:
                event[name] = _value(rng) if rng.random() < 0.25 else rng.choice(
                    ["pytest -q", "Use helix", "Editor", "it broke", "restart it", "Ship v2",
                     "tabs", "T-1"])
    for name, values in (
            ("occurred_at", TIMES + NUMBERS[:12]), ("path", TEXTS), ("project", TEXTS),
            ("priority", ["low", "high", "critical", "urgent", None, 1]),
            ("agent", ["Claude Desktop", "  ", "codex", "..x", 5, "é", None]),
            ("instance_id", ["desk-1", "has space", 42, True, "x" * 65]),
            ("tags", [["CI", "ci", " Build "], "solo", ["x" * 51], [1], [], ["é" * 50]] )):
        if rng.random() < 0.15:
            event[name] = rng.choice(values)
    return event


def test_both_normalisers_agree_on_generated_events(node):
    """synapse_client.events and the TypeScript port give the same candidate, or both
    refuse, for thousands of generated events (the fixture is the contract; this is the
    net under it)."""
    from synapse_client.events import normalize_agent_event, to_memory_candidate

    rng = random.Random(15)
    cases = [(_event(rng), rng.choice(
        ["generic", "claude-code", "codex", "generic", "my source"]),
              rng.choice([None, "codex", "Claude Desktop", "!!!"])) for _ in range(4000)]
    # Both read the same JSON text.
    lines = [json.dumps(list(case), ensure_ascii=False) for case in cases]
    expected = []
    for line in lines:
        event, source, default = json.loads(line)
        try:
            expected.append(to_memory_candidate(normalize_agent_event(event, source, default)))
        except (ValueError, OverflowError):
            expected.append(None)
    result = subprocess.run([node, "dist/test/normalise-lines.js"], cwd=PACKAGE,
                            input="\n".join(lines), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == len(cases)
    mismatches = [(line, want, got) for line, want, got
                  in zip(lines, expected, answers, strict=True) if want != got.get("candidate")]
    assert not mismatches, "\n\n".join(
        f"{line[:300]}\n python: {str(want)[:600]}\n node: {str(got)[:600]}"
        for line, want, got in mismatches[:5])
    stored = sum(want is not None for want in expected)
    assert 500 < stored < len(cases) - 500, stored  # both outcomes well represented
