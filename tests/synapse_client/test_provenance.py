"""synapse_client.provenance: the X-Synapse-Agent, -Agent-Instance and -Device headers the
CLI and synapse-mcp send, from the environment and the config folder, and what a live
server receives."""

import re
import stat
import subprocess
import sys
import threading

import anyio
import httpx
import pytest
from mcp.types import Implementation

from synapse_client import provenance
from synapse_client.provenance import (
    Provenance,
    ProvenanceError,
    agent_name_from,
    clean_device,
    instance_id,
    stored_instance_id,
)
from synapse_client.rest import SynapseClient
from tests.synapse_client.conftest import stdio_session, text_of

HEX16 = re.compile(r"[0-9a-f]{16}")


def headers_of(client: SynapseClient) -> dict[str, str]:
    return {name.lower(): value for name, value in client._http.headers.items()
            if name.lower().startswith("x-synapse-")}


def env(folder, **values) -> dict[str, str]:
    return {"SYNAPSE_URL": "http://synapse.test", "SYNAPSE_MIND_KEY": "mk_test",
            "SYNAPSE_CONFIG_DIR": str(folder), **values}


# -- The instance id -------------------------------------------------------------------------

def test_the_instance_id_is_made_once_and_kept_across_clients(tmp_path):
    folder = tmp_path / "config" / "synapse"
    first = headers_of(SynapseClient.from_env(env(folder)))
    second = headers_of(SynapseClient.from_env(env(folder)))
    assert HEX16.fullmatch(first["x-synapse-agent-instance"])
    assert second["x-synapse-agent-instance"] == first["x-synapse-agent-instance"]
    stored = folder / "agent_instance_id"
    assert stored.read_text() == first["x-synapse-agent-instance"] + "\n"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert [path.name for path in folder.iterdir()] == ["agent_instance_id"]


def test_the_config_folder_follows_xdg_config_home(tmp_path):
    values = {"XDG_CONFIG_HOME": str(tmp_path)}
    made = instance_id(values)
    assert (tmp_path / "synapse" / "agent_instance_id").read_text().strip() == made


def test_the_environment_names_the_instance_and_nothing_is_written(tmp_path):
    client = SynapseClient.from_env(env(tmp_path / "c", SYNAPSE_AGENT_INSTANCE_ID="laptop-1.a_b"))
    assert headers_of(client)["x-synapse-agent-instance"] == "laptop-1.a_b"
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(("name", "value"), [
    ("SYNAPSE_AGENT_INSTANCE_ID", "has space"),
    ("SYNAPSE_AGENT_INSTANCE_ID", "x" * 65),
    ("SYNAPSE_AGENT_INSTANCE_ID", "ünïcode"),
    ("SYNAPSE_AGENT", "-starts-with-dash"),
    ("SYNAPSE_AGENT", "a/b"),
    ("SYNAPSE_AGENT", "y" * 65),
    ("SYNAPSE_DEVICE", "host\nX-Injected: 1"),
    ("SYNAPSE_DEVICE", "d" * 201),
])
def test_an_invalid_value_in_the_environment_is_refused_by_name(tmp_path, name, value):
    with pytest.raises(ProvenanceError, match=name):
        SynapseClient.from_env(env(tmp_path, **{name: value}))


def test_two_processes_starting_at_once_end_up_with_one_id(tmp_path):
    script = ("import sys; from pathlib import Path; "
              "from synapse_client.provenance import stored_instance_id; "
              "print(stored_instance_id(Path(sys.argv[1])))")
    folder = tmp_path / "shared"
    processes = [subprocess.Popen([sys.executable, "-c", script, str(folder)],
                                  stdout=subprocess.PIPE, text=True) for _ in range(6)]
    ids = {process.communicate(timeout=60)[0].strip() for process in processes}
    assert len(ids) == 1 and HEX16.fullmatch(ids.pop())
    assert [path.name for path in folder.iterdir()] == ["agent_instance_id"]


def test_threads_racing_on_first_use_end_up_with_one_id(tmp_path, monkeypatch):
    barrier = threading.Barrier(8)
    real_write = provenance._write_new

    def write_together(path, value):  # every thread has missed the file before any writes
        barrier.wait(timeout=10)
        real_write(path, value)

    monkeypatch.setattr(provenance, "_write_new", write_together)
    ids = []
    threads = [threading.Thread(target=lambda: ids.append(stored_instance_id(tmp_path)))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(ids) == 8 and len(set(ids)) == 1


def test_without_hard_links_the_exclusive_create_still_gives_one_id(tmp_path, monkeypatch):
    def no_links(*_args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(provenance.os, "link", no_links)
    first = stored_instance_id(tmp_path)
    assert stored_instance_id(tmp_path) == first
    assert [path.name for path in tmp_path.iterdir()] == ["agent_instance_id"]


def test_an_unwritable_config_folder_sends_no_instance_and_warns_once(tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setattr(provenance, "_warned", False)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    values = env(blocker / "synapse")
    first = SynapseClient.from_env(values)
    second = SynapseClient.from_env(values)
    assert "x-synapse-agent-instance" not in headers_of(first)
    assert headers_of(second)["x-synapse-agent"] == "synapse-cli"
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 1
    assert warnings[0].startswith("synapse: warning: no agent instance id sent: cannot use ")


def test_a_damaged_id_file_is_not_replaced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(provenance, "_warned", False)
    (tmp_path / "agent_instance_id").write_text("not an id!\n")
    assert instance_id(env(tmp_path)) is None
    assert (tmp_path / "agent_instance_id").read_text() == "not an id!\n"
    assert "no agent instance id sent" in capsys.readouterr().err


# -- Agent and device ---------------------------------------------------------------------------

def test_defaults_name_the_program_and_describe_the_device(tmp_path):
    cli = Provenance.from_env("synapse-cli", env(tmp_path))
    mcp = Provenance.from_env("synapse-mcp", env(tmp_path))
    assert (cli.agent, mcp.agent) == ("synapse-cli", "synapse-mcp")
    assert re.fullmatch(r"[ -~]+; [ -~]+; synapse-cli/[0-9A-Za-z.+-]+", cli.device)
    assert mcp.device.endswith("; synapse-mcp/" + provenance.client_version())
    assert cli.instance == mcp.instance


def test_the_environment_names_the_agent_and_the_device(tmp_path):
    named = Provenance.from_env("synapse-cli", env(tmp_path, SYNAPSE_AGENT="codex",
                                                   SYNAPSE_DEVICE="  CI runner  7 "))
    assert (named.agent, named.device) == ("codex", "CI runner 7")
    hidden = Provenance.from_env("synapse-cli", env(tmp_path, SYNAPSE_DEVICE=""))
    assert "X-Synapse-Device" not in hidden.headers()
    assert set(hidden.headers()) == {"X-Synapse-Agent", "X-Synapse-Agent-Instance"}


@pytest.mark.parametrize(("given", "expected"), [
    ("claude-code", "claude-code"),
    ("Claude Desktop", "Claude-Desktop"),
    ("  --my agent!! v2 ", "my-agent-v2"),
    ("a" * 80, "a" * 64),
    ("日本語", None),
    (None, None),
])
def test_an_mcp_client_name_is_made_to_fit_the_agent_header(given, expected):
    assert agent_name_from(given) == expected


def test_device_text_is_printable_ascii():
    assert clean_device("Jürgen’s Mac\tmini; Darwin") == "Jurgen?s Mac mini; Darwin"


def test_a_client_made_without_provenance_sends_none():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json={"total": 0})

    async def scenario():
        async with SynapseClient("http://synapse.test", "mk_test",
                                 transport=httpx.MockTransport(handler)) as client:
            await client.stats()

    anyio.run(scenario)
    assert not [name for name in seen[0].headers if name.lower().startswith("x-synapse-")]


# -- What a live server receives ---------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_cli_sends_the_headers_on_every_request(synapse, received, client_config_dir):
    stored = synapse("remember", "fact", "Lives in Lisbon", env={"SYNAPSE_AGENT": "codex"})
    assert stored.returncode == 0, stored.stderr
    assert synapse("recall").returncode == 0
    [write] = received.headers_of("POST", "/memory")
    [read] = received.headers_of("GET", "/memory/recall")
    kept = (client_config_dir / "agent_instance_id").read_text().strip()
    assert (write["x-synapse-agent"], write["x-synapse-agent-instance"]) == ("codex", kept)
    assert write["x-synapse-device"].endswith("; synapse-cli/" + provenance.client_version())
    assert (read["x-synapse-agent"], read["x-synapse-agent-instance"]) == ("synapse-cli", kept)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_cli_exits_2_on_an_invalid_instance_id(synapse, received):
    result = synapse("recall", env={"SYNAPSE_AGENT_INSTANCE_ID": "not valid"})
    assert result.returncode == 2
    assert result.stderr.startswith("synapse: SYNAPSE_AGENT_INSTANCE_ID must be 1-64 ")
    assert not received.requests


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize(("environment", "agent"), [
    ({}, "Claude-Desktop"),
    ({"SYNAPSE_AGENT": "my-agent", "SYNAPSE_AGENT_INSTANCE_ID": "desk.1",
      "SYNAPSE_DEVICE": "desk"}, "my-agent"),
])
def test_synapse_mcp_names_the_agent_after_its_mcp_client(synapse_server, alice_key, received,
                                                         environment, agent):
    async def scenario():
        async with stdio_session(synapse_server, alice_key[1], env=environment,
                                 client_info=Implementation(name="Claude Desktop",
                                                            version="1.0")) as session:
            return await session.call_tool("remember", {"category": "fact",
                                                        "content": "Has a cat"})

    assert text_of(anyio.run(scenario)).startswith("Stored mem_")
    [write] = received.headers_of("POST", "/memory")
    assert write["x-synapse-agent"] == agent
    if environment:
        assert (write["x-synapse-agent-instance"], write["x-synapse-device"]) == (
            "desk.1", "desk")
    else:
        assert HEX16.fullmatch(write["x-synapse-agent-instance"])
        assert write["x-synapse-device"].endswith("; synapse-mcp/"
                                                  + provenance.client_version())
