"""Agent events (a command ran, a decision was made, …) as memories.

:func:`normalize_agent_event` turns an event as a hook sends it into a canonical event;
:func:`to_memory_candidate` turns that into a body for ``POST /memory`` plus the
provenance to send with it. Both are pure and deterministic — no clock, no randomness,
no network — so another client can reproduce them exactly: the cases in
``tests/fixtures/agent_events.json`` are the contract (docs/agents.md, "Agent events").

Rules worth knowing:

- An event names its type in ``type`` (or ``event``, ``event_type``, ``kind``), in any
  spelling: ``command_completed``, ``command-completed``, ``CommandCompleted``,
  ``command.completed``. A few aliases are accepted (``TYPE_ALIASES``), and two hook
  payloads as they come: Claude Code's ``PostToolUse`` (``Bash`` → a command; ``Edit``,
  ``MultiEdit``, ``Write``, ``NotebookEdit`` → a file edit) and Codex's
  ``agent-turn-complete`` notification (→ a completed task). Anything else is a
  ValueError naming the types accepted.
- Lengths are counted in Unicode code points. Command output and diffs keep their first
  1,000 and last 2,900 characters around a line ``[… N characters cut …]`` when longer
  than 4,000; any other text field longer than 4,000 (a command: 1,000) keeps the longest
  start that fits in that limit together with the marker `` […N characters cut]``.
- ``occurred_at`` (or ``timestamp``, ``time``, ``ts``): RFC 3339 (an offset or ``Z``;
  without one, UTC) or epoch seconds (numbers above 10^11 are read as milliseconds);
  written back as UTC ``YYYY-MM-DDTHH:MM:SSZ`` (``.fff`` when there are milliseconds,
  finer digits dropped). An event without one gets none: the candidate then has no
  ``occurred_at``, and the server stores the time of the write.
- ``path`` is the memory's path (the server's rules: lower-case segments of
  ``a-z 0-9 . _ -`` joined by ``/``, at most 8 of 64 characters; anything else is a
  ValueError); without it, ``project`` (a name) becomes ``projects/<name as a segment>``;
  without either, no path (the root). The edited file of a ``file_edited`` event is
  ``file`` (or ``file_path``), never ``path``.
- Keys: an episode's is ``<prefix>_<12 hex>``, the start of the SHA-256 of
  ``type\\npath\\noccurred_at\\ncontent`` (UTF-8), so the same event sent twice is one
  memory and the same command at two moments is two. Working, preference, decision and
  fix memories are keyed by what they are about (``task_<slug>``, ``preference_<slug>``,
  …) so a newer one replaces the older; with a path, ``_<first 8 hex of the SHA-256 of
  the path>`` is appended (a key is the same memory at any path). Preferences,
  decisions and fixes without a ``subject`` (or ``topic``) get no key: the server
  derives one from the content.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import UTC, datetime

from synapse_client.provenance import ProvenanceError, agent_name_from, check_agent, check_instance

# type → (memory_type, category, priority, key prefix, tags)
MAPPING: dict[str, tuple[str, str, str, str, tuple[str, ...]]] = {
    "command_completed": ("episodic", "context", "low", "command", ("command",)),
    "command_failed": ("episodic", "context", "high", "command", ("command", "error")),
    "file_edited": ("episodic", "context", "low", "edit", ("file",)),
    "decision_made": ("semantic", "project", "high", "decision", ("decision",)),
    "error_fixed": ("procedural", "mistake", "high", "fix", ("error", "fix")),
    "preference_stated": ("semantic", "preference", "high", "preference", ("preference",)),
    "task_started": ("working", "context", "normal", "task", ("task",)),
    "task_progressed": ("working", "context", "normal", "task", ("task",)),
    "task_completed": ("episodic", "context", "normal", "task", ("task", "done")),
    "handoff_note": ("working", "context", "high", "handoff", ("handoff",)),
}
EVENT_TYPES = tuple(MAPPING)
TYPE_ALIASES = {
    "command": "command_completed", "command_run": "command_completed",
    "command_finished": "command_completed", "command_succeeded": "command_completed",
    "command_error": "command_failed",
    "file_edit": "file_edited", "file_changed": "file_edited",
    "file_modified": "file_edited", "file_written": "file_edited",
    "decision": "decision_made",
    "fix": "error_fixed", "bug_fixed": "error_fixed", "mistake_fixed": "error_fixed",
    "preference": "preference_stated", "user_preference": "preference_stated",
    "preference_expressed": "preference_stated",
    "task_start": "task_started", "task_begun": "task_started",
    "task_progress": "task_progressed", "task_updated": "task_progressed",
    "progress": "task_progressed",
    "task_done": "task_completed", "task_finished": "task_completed",
    "agent_turn_complete": "task_completed",
    "handoff": "handoff_note", "handover": "handoff_note", "handoff_created": "handoff_note",
}
EDIT_TOOLS = {"edit", "multiedit", "write", "notebookedit"}

OUTPUT_LIMIT, OUTPUT_HEAD, OUTPUT_TAIL = 4000, 1000, 2900
TEXT_LIMIT = 4000
COMMAND_LIMIT = 1000
SLUG_LIMIT = 48
MAX_TAGS, MAX_TAG_LENGTH = 20, 50
MAX_PATH_DEPTH, MAX_SEGMENT = 8, 64
_SEGMENT = re.compile(rf"[a-z0-9][a-z0-9._-]{{0,{MAX_SEGMENT - 1}}}\Z")
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?\Z")

# Where each canonical field may come from, first found wins.
FIELDS = {
    "command": ("command", "cmd", "command_line", "commandLine"),
    "exit_code": ("exit_code", "exitCode", "returncode", "return_code", "exit_status"),
    "output": ("output", "stdout", "result"),
    "stderr": ("stderr",),
    "file": ("file", "file_path", "filePath", "filename"),
    "summary": ("summary", "description", "message", "change"),
    "diff": ("diff", "patch"),
    "subject": ("subject", "topic"),
    "decision": ("decision", "text", "summary", "message"),
    "rationale": ("rationale", "reason", "why"),
    "error": ("error", "problem", "message"),
    "fix": ("fix", "solution", "resolution"),
    "preference": ("preference", "text", "statement", "message"),
    "task": ("task", "title", "name", "goal"),
    "task_id": ("task_id", "taskId"),
    "note": ("note", "progress", "result", "summary", "details", "message", "text"),
}
# The fields each type reads (beside the common ones) and the ones it needs.
TYPE_FIELDS = {
    "command_completed": (("command", "exit_code", "output", "stderr"), ("command",)),
    "command_failed": (("command", "exit_code", "output", "stderr"), ("command",)),
    "file_edited": (("file", "summary", "diff"), ("file",)),
    "decision_made": (("subject", "decision", "rationale"), ("decision",)),
    "error_fixed": (("subject", "error", "fix"), ("error", "fix")),
    "preference_stated": (("subject", "preference"), ("preference",)),
    "task_started": (("task", "task_id", "note"), ("task",)),
    "task_progressed": (("task", "task_id", "note"), ("task",)),
    "task_completed": (("task", "task_id", "note"), ("task",)),
    "handoff_note": (("task", "note"), ("note",)),
}


# -- Small pieces ---------------------------------------------------------------------------

def _type_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("An event needs a type (`type` or `event`), one of: "
                         f"{', '.join(EVENT_TYPES)}.")
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", value.strip())
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")


def _first(event: dict, names: tuple[str, ...]) -> object:
    for name in names:
        if event.get(name) not in (None, ""):
            return event[name]
    return None


def _text(value: object, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{name} must be text.")
    text = str(value).strip()
    return text or None


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` in at most ``limit`` characters: the longest start that fits beside the
    marker `` […N characters cut]`` (so cutting again changes nothing)."""
    if len(text) <= limit:
        return text
    kept = limit
    while True:
        marker = f" […{len(text) - kept} characters cut]"
        if kept + len(marker) <= limit:
            return text[:kept] + marker
        kept = limit - len(marker)


def cut_output(text: str) -> str:
    """Command output or a diff: the start and the end (where results and errors are)."""
    if len(text) <= OUTPUT_LIMIT:
        return text
    cut_count = len(text) - OUTPUT_HEAD - OUTPUT_TAIL
    return f"{text[:OUTPUT_HEAD]}\n[… {cut_count} characters cut …]\n{text[-OUTPUT_TAIL:]}"


def timestamp(value: object) -> str:
    """RFC 3339 or epoch seconds (milliseconds above 10^11) → ``YYYY-MM-DDTHH:MM:SS[.fff]Z``."""
    if isinstance(value, bool):
        raise ValueError("occurred_at must be an RFC 3339 time or epoch seconds.")
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            moment = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError) as error:
            raise ValueError(f"occurred_at {value!r} is out of range.") from error
    elif isinstance(value, str) and _RFC3339.match(value.strip()):
        text = value.strip().replace("z", "Z").replace("t", "T")
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as error:
            raise ValueError(f"occurred_at {value!r} is not a valid time.") from error
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    else:
        raise ValueError(f"occurred_at must be an RFC 3339 time (2026-05-01T10:00:00Z) or "
                         f"epoch seconds, not {value!r}.")
    milliseconds = moment.microsecond // 1000
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{milliseconds:03d}Z" if milliseconds else f"{text}Z"


def normalize_path(value: object) -> str:
    """The server's normal form of a path (memories/paths.py), or ValueError."""
    if not isinstance(value, str):
        raise ValueError("path must be text.")
    path = value.strip().strip("/").lower()
    if not path:
        return ""
    segments = path.split("/")
    if len(segments) > MAX_PATH_DEPTH:
        raise ValueError(f"A path has at most {MAX_PATH_DEPTH} segments.")
    for segment in segments:
        if not _SEGMENT.match(segment):
            raise ValueError(f"path {value!r}: segments use a-z, 0-9, '.', '_' and '-', start "
                             f"with a letter or a digit and have at most {MAX_SEGMENT} "
                             "characters.")
    return path


def project_path(name: object) -> str:
    """A project's name → ``projects/<segment>``: lower-cased, each run of other characters
    one ``-``; a name with ``/`` is taken as a path."""
    if not isinstance(name, str):
        raise ValueError("project must be text.")
    if "/" in name.strip().strip("/"):
        return normalize_path(name)
    segment = re.sub(r"[^a-z0-9._-]+", "-", _ascii(name).lower()).strip(".-_")[:MAX_SEGMENT]
    segment = segment.rstrip(".-_")
    if not segment:
        raise ValueError(f"project {name!r} has no letters or digits to make a path of.")
    return f"projects/{segment}"


def _ascii(text: str) -> str:
    return "".join(char for char in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(char))


def slug(text: str) -> str:
    """``Editor Setup`` → ``editor_setup``; accents dropped; a text with no letter or digit
    of a-z 0-9 → the first 8 hex of its SHA-256."""
    words = re.sub(r"[^a-z0-9]+", "_", _ascii(text).lower()).strip("_")
    words = words[:SLUG_LIMIT].rstrip("_")
    return words or _sha(text)[:8]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _tags(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise ValueError("tags must be a list of text.")
    tags = []
    for tag in value:
        cleaned = tag.strip().lower()
        if len(cleaned) > MAX_TAG_LENGTH:
            raise ValueError(f"A tag has at most {MAX_TAG_LENGTH} characters: {tag!r}.")
        if cleaned and cleaned not in tags:
            tags.append(cleaned)
    return tags


# -- Hook payloads as they come --------------------------------------------------------------

def _from_hook(event: dict) -> dict:
    """Claude Code's PostToolUse and Codex's agent-turn-complete → plain events."""
    hook = event.get("hook_event_name")
    if isinstance(hook, str) and hook.replace("_", "").lower() == "posttooluse":
        tool = str(event.get("tool_name", ""))
        given = event.get("tool_input") if isinstance(event.get("tool_input"), dict) else {}
        answer = event.get("tool_response")
        answer = answer if isinstance(answer, dict) else {"output": answer}
        base = {name: event[name] for name in ("agent", "agent_id", "occurred_at", "timestamp",
                                               "path", "project", "tags") if name in event}
        if tool.lower() == "bash":
            failed = answer.get("interrupted") is True or (
                isinstance(answer.get("exit_code"), int) and answer["exit_code"] != 0)
            return {**base, "type": "command_failed" if failed else "command_completed",
                    "command": given.get("command"), "exit_code": answer.get("exit_code"),
                    "output": answer.get("stdout") or answer.get("output"),
                    "stderr": answer.get("stderr")}
        if tool.lower() in EDIT_TOOLS:
            return {**base, "type": "file_edited",
                    "file": given.get("file_path") or given.get("notebook_path")}
        raise ValueError(f"A PostToolUse event of tool {tool!r} is not an agent event "
                         "Synapse remembers (Bash, Edit, MultiEdit, Write, NotebookEdit are).")
    if _type_name(event.get("type") or "x") == "agent_turn_complete":
        messages = event.get("input-messages") or event.get("input_messages") or []
        first = messages[0] if isinstance(messages, list) and messages else None
        return {**event, "type": "task_completed", "task": first,
                "note": event.get("last-assistant-message")
                or event.get("last_assistant_message")}
    return event


# -- The two steps ------------------------------------------------------------------------------

def normalize_agent_event(event: dict, source: str = "generic",
                          default_agent_id: str | None = None) -> dict:
    """One event from a hook or agent → the canonical event.

    ``{"type", "source", "agent_id"?, "instance_id"?, "occurred_at"?, "path"?, "tags"?,
    "priority"?, …the type's text fields}``; fields without a value are left out.
    ``source`` names where events come from (``claude-code``, ``codex``, ``generic``);
    ``default_agent_id`` is the agent when the event names none (``agent``,
    ``agent_id``, ``agentId``, ``agent_name``). Raises ValueError for an event that is
    not one of :data:`EVENT_TYPES` or lacks what its type needs.
    """
    if not isinstance(event, dict):
        raise ValueError("An event is a JSON object.")
    event = _from_hook(event)
    kind = _type_name(_first(event, ("type", "event", "event_type", "kind")))
    kind = TYPE_ALIASES.get(kind, kind)
    if kind not in MAPPING:
        raise ValueError(f"Unknown event type {kind!r}; known: {', '.join(EVENT_TYPES)}.")
    try:
        source = check_agent(source, setting="source")
    except ProvenanceError as error:
        raise ValueError(str(error)) from None

    exit_code = _first(event, FIELDS["exit_code"])
    if exit_code is not None:
        if isinstance(exit_code, str) and re.fullmatch(r"-?\d{1,4}", exit_code.strip()):
            exit_code = int(exit_code)
        if isinstance(exit_code, bool) or not isinstance(exit_code, int):
            raise ValueError("exit_code must be a whole number.")
    if kind == "command_completed" and exit_code not in (None, 0):
        kind = "command_failed"

    canonical: dict = {"type": kind, "source": source}
    agent = _first(event, ("agent", "agent_id", "agentId", "agent_name"))
    if agent is not None:
        canonical["agent_id"] = agent_name_from(agent)
        if canonical["agent_id"] is None:
            raise ValueError(f"agent {agent!r} has no letters or digits.")
    elif default_agent_id:
        canonical["agent_id"] = agent_name_from(default_agent_id)
    instance = _first(event, ("agent_instance", "agent_instance_id", "instance_id"))
    if instance is not None:
        try:
            canonical["instance_id"] = check_instance(str(instance), setting="agent_instance")
        except ProvenanceError as error:
            raise ValueError(str(error)) from None
    moment = _first(event, ("occurred_at", "timestamp", "time", "ts"))
    if moment is not None:
        canonical["occurred_at"] = timestamp(moment)
    if event.get("path") not in (None, ""):
        canonical["path"] = normalize_path(event["path"])
    elif event.get("project") not in (None, ""):
        canonical["path"] = project_path(event["project"])
    if not canonical.get("path"):
        canonical.pop("path", None)
    if event.get("priority") is not None:
        if event["priority"] not in ("low", "normal", "high", "critical"):
            raise ValueError("priority must be low, normal, high or critical.")
        canonical["priority"] = event["priority"]

    wanted, needed = TYPE_FIELDS[kind]
    for name in wanted:
        if name == "exit_code":
            value = exit_code
        else:
            value = _text(_first(event, FIELDS[name]), name)
            if value is not None:
                value = (cut(value, COMMAND_LIMIT) if name == "command"
                         else cut_output(value) if name in ("output", "stderr", "diff")
                         else cut(value))
        if value is not None:
            canonical[name] = value
    missing = [name for name in needed if name not in canonical]
    if missing:
        raise ValueError(f"A {kind} event needs {' and '.join(missing)}.")
    tags = _tags(event.get("tags"))
    if tags:
        canonical["tags"] = tags
    return canonical


def _content(event: dict) -> str:
    kind = event["type"]
    if kind in ("command_completed", "command_failed"):
        code = f" (exit {event['exit_code']})" if "exit_code" in event else ""
        verb = "Ran" if kind == "command_completed" else "Failed"
        lines = [f"{verb}: {event['command']}{code}"]
        if "output" in event:
            lines.append(f"Output:\n{event['output']}")
        if "stderr" in event:
            lines.append(f"Errors:\n{event['stderr']}")
        return "\n".join(lines)
    if kind == "file_edited":
        lines = [f"Edited {event['file']}" + (f": {event['summary']}" if "summary" in event
                                              else "")]
        if "diff" in event:
            lines.append(f"Change:\n{event['diff']}")
        return "\n".join(lines)
    if kind == "decision_made":
        about = f" ({event['subject']})" if "subject" in event else ""
        return f"Decision{about}: {event['decision']}" + (
            f"\nWhy: {event['rationale']}" if "rationale" in event else "")
    if kind == "error_fixed":
        about = f" ({event['subject']})" if "subject" in event else ""
        return f"Error{about}: {event['error']}\nFix: {event['fix']}"
    if kind == "preference_stated":
        return (f"{event['subject']}: " if "subject" in event else "") + event["preference"]
    if kind == "handoff_note":
        return f"Handoff: {event['note']}" + (f"\nTask: {event['task']}" if "task" in event
                                             else "")
    heading = {"task_started": "Task started", "task_progressed": "Task in progress",
               "task_completed": "Task completed"}[kind]
    return f"{heading}: {event['task']}" + (f"\n{event['note']}" if "note" in event else "")


def _key(event: dict, content: str, prefix: str, memory_type: str) -> str | None:
    kind, path = event["type"], event.get("path", "")
    if memory_type == "episodic":
        digest = _sha("\n".join((kind, path, event.get("occurred_at", ""), content)))
        return f"{prefix}_{digest[:12]}"
    if kind in ("task_started", "task_progressed"):
        stem = slug(event.get("task_id") or event["task"])
    elif kind == "handoff_note":
        stem = ""
    elif "subject" in event:
        stem = slug(event["subject"])
    else:
        return None
    key = f"{prefix}_{stem}" if stem else prefix
    return f"{key}_{_sha(path)[:8]}" if path else key


def to_memory_candidate(event: dict) -> dict:
    """A canonical event (from :func:`normalize_agent_event`) → ``{category, key?, content,
    memory_type, path?, priority, tags, occurred_at?, provenance: {agent?, instance?,
    source}}``: the body of ``POST /memory`` and, apart, what the provenance headers
    should say."""
    memory_type, category, priority, prefix, tags = MAPPING[event["type"]]
    content = _content(event)
    candidate: dict = {"category": category}
    key = _key(event, content, prefix, memory_type)
    if key:
        candidate["key"] = key
    candidate.update(content=content, memory_type=memory_type)
    if event.get("path"):
        candidate["path"] = event["path"]
    candidate["priority"] = event.get("priority", priority)
    candidate["tags"] = (list(tags) + [tag for tag in event.get("tags", [])
                                       if tag not in tags])[:MAX_TAGS]
    if memory_type == "episodic" and event.get("occurred_at"):
        candidate["occurred_at"] = event["occurred_at"]
    provenance = {"agent": event.get("agent_id"), "instance": event.get("instance_id"),
                  "source": event["source"]}
    candidate["provenance"] = {name: value for name, value in provenance.items() if value}
    return candidate
