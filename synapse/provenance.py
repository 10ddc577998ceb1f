"""What a client says about itself on a write (``X-Synapse-Agent``, ``-Agent-Instance``,
``-Device``): checked here, recorded beside the credentials-derived writer, never trusted."""

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

AGENT_HEADER = "X-Synapse-Agent"
INSTANCE_HEADER = "X-Synapse-Agent-Instance"
DEVICE_HEADER = "X-Synapse-Device"

AGENT_MAX_LENGTH = 64
INSTANCE_MAX_LENGTH = 64
DEVICE_MAX_LENGTH = 200
_AGENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_INSTANCE = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class Provenance:
    """The agent (``codex``), its instance (stable, non-secret) and the device (free text)
    a request claims; blank when not sent. Claims only: authorization and ``recorded_by``
    come from the credentials."""

    agent: str = ""
    agent_instance: str = ""
    device: str = ""

    def as_fields(self) -> dict[str, str]:
        """The model fields (MemoryVersion, AuditEvent) of the same names."""
        return asdict(self)


NO_PROVENANCE = Provenance()

# Lists of versions and audit events (API and web UI) filter by what the writing request
# claimed: query parameter → field of MemoryVersion and AuditEvent.
CLAIM_FILTERS = {"agent": "agent", "instance": "agent_instance"}


def claim_filters(params: Mapping[str, str]) -> dict[str, str]:
    """The field lookups of ``?agent=`` and ``?instance=`` in ``params`` (a validated
    query or request.GET); a blank one filters nothing."""
    return {field: str(params[name]).strip() for name, field in CLAIM_FILTERS.items()
            if str(params.get(name) or "").strip()}


class InvalidProvenance(ValueError):
    """A provenance header that breaks its format; ``header`` names it."""

    def __init__(self, header: str, message: str):
        super().__init__(message)
        self.header = header
        self.message = message


def _header_text(value: str) -> str:
    # WSGI hands header values over as latin-1; a client that sent UTF-8 gets it back.
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def provenance_from_headers(headers: Mapping[str, str]) -> Provenance:
    """The claims of a request's headers (a case-insensitive mapping: Django's
    ``request.headers``, Starlette's ``Headers``). An absent header is blank; an empty,
    too long or malformed one raises InvalidProvenance naming it."""
    agent = headers.get(AGENT_HEADER)
    instance = headers.get(INSTANCE_HEADER)
    device = headers.get(DEVICE_HEADER)
    if agent is not None and not _AGENT.fullmatch(agent):
        raise InvalidProvenance(AGENT_HEADER, (
            f"1 to {AGENT_MAX_LENGTH} characters from A-Z, a-z, 0-9, '.', '_' and '-', "
            "starting with a letter or a digit (e.g. codex, claude-desktop)."))
    if instance is not None and not _INSTANCE.fullmatch(instance):
        raise InvalidProvenance(INSTANCE_HEADER, (
            f"1 to {INSTANCE_MAX_LENGTH} characters from A-Z, a-z, 0-9, '.', '_' and '-' "
            "(a stable, non-secret id of this agent's installation, e.g. 04f9b8c2)."))
    if device is not None:
        device = _header_text(device)
        if not device or len(device) > DEVICE_MAX_LENGTH or not device.isprintable():
            raise InvalidProvenance(DEVICE_HEADER, (
                f"1 to {DEVICE_MAX_LENGTH} printable characters, no control characters "
                "(e.g. MacBook; Darwin 24.1.0; synapse-cli/0.1.0)."))
    return Provenance(agent=agent or "", agent_instance=instance or "", device=device or "")
