"""The TypeScript client (clients/typescript) with Node against a live server: its unit
tests (the shared agent-events fixture, errors, retries) and its live tests (store → get by
citation → recall → search → update → versions → trash → restore, an Idempotency-Key
replay, 404 and 401 as typed exceptions, provenance recorded).

`npm ci` runs once per package-lock.json (a stamp in node_modules says which), then
`npm run build` and `node --test`. Without Node or npm the test fails saying so."""

import hashlib
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memories.models import MemoryVersion

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

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


def test_the_typescript_client_passes_its_tests_against_a_live_server(
        synapse_server, alice_key, tmp_path):
    node, npm_path = tools()
    install(npm_path)
    npm(npm_path, "run", "build")
    config = tmp_path / "config"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "SYNAPSE_URL": synapse_server, "SYNAPSE_MIND_KEY": alice_key[1],
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
