"""Who is writing: the provenance headers the ``synapse`` CLI and ``synapse-mcp`` send.

The contract (docs/agents.md, "Provenance"), which the server reads on every request:

- ``X-Synapse-Agent``: the agent's name (``claude-desktop``, ``codex``): 1-64 characters
  of ``A-Z a-z 0-9 . _ -``, starting with a letter or a digit. ``SYNAPSE_AGENT``; by
  default the program (``synapse-cli``, ``synapse-mcp``), or for ``synapse-mcp`` the MCP
  client's name from the initialize handshake, made to fit (:func:`agent_name_from`).
- ``X-Synapse-Agent-Instance``: a stable, non-secret id of this installation: 1-64
  characters of ``A-Z a-z 0-9 . _ -``. ``SYNAPSE_AGENT_INSTANCE_ID``; otherwise 16
  lower-case hex characters made on first use and kept in the config folder, so it
  survives restarts. When that folder cannot be written, no instance header is sent and
  one warning goes to stderr.
- ``X-Synapse-Device``: short free text, ``<host>; <OS> <release>; <program>/<version>``:
  at most 200 printable ASCII characters. ``SYNAPSE_DEVICE`` replaces it; set empty, no
  device header is sent.

Invalid values in the environment raise :class:`ProvenanceError` (the CLI exits 2).
"""

from __future__ import annotations

import os
import platform
import re
import secrets
import sys
import time
import unicodedata
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

AGENT_HEADER = "X-Synapse-Agent"
INSTANCE_HEADER = "X-Synapse-Agent-Instance"
DEVICE_HEADER = "X-Synapse-Device"

MAX_NAME = 64
MAX_DEVICE = 200
AGENT_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}\Z")
INSTANCE_PATTERN = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_NAME}}}\Z")
INSTANCE_FILE = "agent_instance_id"
DISTRIBUTION = "synapse-memory"

_warned = False


class ProvenanceError(ValueError):
    """A provenance value from the environment (or an event) that the contract refuses."""


def check_agent(value: str, *, setting: str = "SYNAPSE_AGENT") -> str:
    if not AGENT_PATTERN.match(value):
        raise ProvenanceError(
            f"{setting} must be 1-{MAX_NAME} characters of A-Z, a-z, 0-9, '.', '_' and '-', "
            f"starting with a letter or a digit, not {value!r}.")
    return value


def check_instance(value: str, *, setting: str = "SYNAPSE_AGENT_INSTANCE_ID") -> str:
    if not INSTANCE_PATTERN.match(value):
        raise ProvenanceError(
            f"{setting} must be 1-{MAX_NAME} characters of A-Z, a-z, 0-9, '.', '_' and '-', "
            f"not {value!r}.")
    return value


def agent_name_from(name: object) -> str | None:
    """Any name (an MCP client's ``clientInfo.name``: ``Claude Desktop``) made to fit the
    agent header: each run of other characters becomes one ``-``, leading ``.``, ``_``
    and ``-`` go, and it is cut to 64 characters. None when nothing is left."""
    if not isinstance(name, str):
        return None
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip("._-")[:MAX_NAME].rstrip("-")
    return cleaned or None


def clean_device(text: str) -> str:
    """Free text as a header value: accents dropped (``é`` → ``e``), any other character
    outside printable ASCII replaced by ``?``, whitespace collapsed, cut to 200."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(char if " " <= char <= "~" else ("" if unicodedata.combining(char)
                                                    else ("?" if not char.isspace() else " "))
                   for char in decomposed)
    return " ".join(kept.split())[:MAX_DEVICE]


def client_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "dev"


def default_device(program: str) -> str:
    """``MacBook; Darwin 24.1.0; synapse-cli/0.1.0``."""
    system = " ".join(part for part in (platform.system(), platform.release()) if part)
    return clean_device(f"{platform.node() or 'unknown'}; {system or 'unknown'}; "
                        f"{program}/{client_version()}")


def config_dir(environ: dict[str, str] | None = None) -> Path:
    """``$SYNAPSE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/synapse``, else
    ``~/.config/synapse``."""
    environ = os.environ if environ is None else environ
    if environ.get("SYNAPSE_CONFIG_DIR"):
        return Path(environ["SYNAPSE_CONFIG_DIR"]).expanduser()
    if environ.get("XDG_CONFIG_HOME"):
        return Path(environ["XDG_CONFIG_HOME"]).expanduser() / "synapse"
    return Path.home() / ".config" / "synapse"


def _read_id(path: Path) -> str:
    """The id in ``path``; an empty file is another process between creating and writing
    it (only where hard links are missing), so wait a moment for it."""
    for _attempt in range(50):
        text = path.read_text(encoding="ascii", errors="replace").strip()
        if text:
            return check_instance(text, setting=str(path))
        time.sleep(0.02)
    raise ProvenanceError(f"{path} is empty.")


def _write_new(path: Path, value: str) -> None:
    """Create ``path`` holding ``value``, or leave it alone when it already exists.

    Written to a private temporary file and hard-linked into place: the link either
    creates the whole file at once or fails because another process got there first,
    so every process ends up reading the same id. Where hard links are not available,
    the file itself is created with O_EXCL (readers wait for its content).
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(value + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
            return
        except FileExistsError:
            return
        except OSError:
            pass  # no hard links here (some network or FAT file systems)
    finally:
        temporary.unlink(missing_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(value + "\n")


def stored_instance_id(folder: Path) -> str:
    """The id kept in ``folder/agent_instance_id``, made (16 hex characters) on first use.

    The folder is created private (0700), the file 0600. Raises OSError when the folder
    cannot be made or the file read or written, ProvenanceError when it holds no valid id.
    """
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / INSTANCE_FILE
    if not path.exists():
        _write_new(path, secrets.token_hex(8))
    return _read_id(path)


def _warn_once(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        print(f"synapse: warning: {message}", file=sys.stderr)


def instance_id(environ: dict[str, str] | None = None) -> str | None:
    """``SYNAPSE_AGENT_INSTANCE_ID`` (checked; empty counts as unset), else the stored id;
    None (and one warning on stderr) when the config folder cannot be used."""
    environ = os.environ if environ is None else environ
    if environ.get("SYNAPSE_AGENT_INSTANCE_ID"):
        return check_instance(environ["SYNAPSE_AGENT_INSTANCE_ID"])
    folder = config_dir(environ)
    try:
        return stored_instance_id(folder)
    except (OSError, ProvenanceError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        _warn_once(f"no agent instance id sent: cannot use {folder / INSTANCE_FILE} "
                   f"({reason}); set SYNAPSE_AGENT_INSTANCE_ID or SYNAPSE_CONFIG_DIR.")
        return None


@dataclass(frozen=True)
class Provenance:
    """The three header values; None leaves a header out."""

    agent: str
    instance: str | None = None
    device: str | None = None

    @classmethod
    def from_env(cls, program: str, environ: dict[str, str] | None = None) -> Provenance:
        """For ``program`` (``synapse-cli``, ``synapse-mcp``): the environment's values,
        else the defaults. Raises ProvenanceError for an invalid value."""
        environ = os.environ if environ is None else environ
        agent = check_agent(environ["SYNAPSE_AGENT"]) if environ.get("SYNAPSE_AGENT") \
            else program
        if "SYNAPSE_DEVICE" in environ:
            device = environ["SYNAPSE_DEVICE"]
            if any(unicodedata.category(char) == "Cc" for char in device):
                raise ProvenanceError("SYNAPSE_DEVICE must not contain control characters.")
            device = clean_device(device)
            if len(" ".join(environ["SYNAPSE_DEVICE"].split())) > MAX_DEVICE:
                raise ProvenanceError(f"SYNAPSE_DEVICE has at most {MAX_DEVICE} characters.")
        else:
            device = default_device(program)
        return cls(agent=agent, instance=instance_id(environ), device=device or None)

    def headers(self) -> dict[str, str]:
        values = {AGENT_HEADER: self.agent, INSTANCE_HEADER: self.instance,
                  DEVICE_HEADER: self.device}
        return {name: value for name, value in values.items() if value}
