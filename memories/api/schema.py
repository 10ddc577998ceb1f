"""OpenAPI bits of the memory routes: their error answers and the Idempotency-Key header."""

from drf_spectacular.utils import OpenApiParameter

from synapse.api import error_responses

ERRORS = error_responses(not_found="No such memory in this mind")
IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="A retried request with the same key returns the first answer and writes "
                "nothing twice (kept 24 hours).")

# What a client says about itself on a write (synapse.provenance): recorded on the versions
# and audit events it writes, beside the credentials-derived ``recorded_by``; never trusted.
AGENT_HELP = ("The agent the writing request claimed (X-Synapse-Agent, e.g. codex); blank "
              "when it sent none. A claim, never checked: recorded_by is the writer.")
INSTANCE_HELP = ("The agent instance the writing request claimed (X-Synapse-Agent-Instance); "
                 "blank when it sent none.")
DEVICE_HELP = "The device the writing request claimed (X-Synapse-Device); blank when none."
PROVENANCE_HEADERS = [
    OpenApiParameter(
        "X-Synapse-Agent", str, OpenApiParameter.HEADER, required=False,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="The agent writing (e.g. codex, claude-desktop), recorded on what this "
                    "request writes. A claim: never used to authorize. Malformed: 400."),
    OpenApiParameter(
        "X-Synapse-Agent-Instance", str, OpenApiParameter.HEADER, required=False,
        pattern=r"^[A-Za-z0-9._-]{1,64}$",
        description="A stable, non-secret id of this agent's installation (e.g. 04f9b8c2), "
                    "recorded beside the agent. Malformed: 400."),
    OpenApiParameter(
        "X-Synapse-Device", str, OpenApiParameter.HEADER, required=False,
        description="Free text about the machine, at most 200 printable characters (e.g. "
                    "MacBook; Darwin 24.1.0; synapse-cli/0.1.0). Malformed: 400."),
]
