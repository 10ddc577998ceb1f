"""synapse_client.events: agent events → canonical events → POST /memory bodies, checked
against tests/fixtures/agent_events.json (the contract other clients read too)."""

import json
from pathlib import Path

import pytest

from synapse_client.events import (
    EVENT_TYPES,
    OUTPUT_HEAD,
    OUTPUT_TAIL,
    cut,
    cut_output,
    normalize_agent_event,
    to_memory_candidate,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_events.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))
STORED = [case for case in CASES if "candidate" in case]
REFUSED = [case for case in CASES if "error" in case]


@pytest.mark.parametrize("case", STORED, ids=[case["name"] for case in STORED])
def test_each_event_becomes_its_candidate(case):
    event = normalize_agent_event(case["event"], case["source"], case["default_agent_id"])
    assert to_memory_candidate(event) == case["candidate"]


@pytest.mark.parametrize("case", REFUSED, ids=[case["name"] for case in REFUSED])
def test_each_bad_event_is_refused_saying_why(case):
    with pytest.raises(ValueError, match=case["error"]):
        normalize_agent_event(case["event"], case["source"], case["default_agent_id"])


def test_the_fixture_covers_every_event_type_and_is_well_formed():
    kinds = {normalize_agent_event(case["event"], case["source"])["type"] for case in STORED}
    assert kinds == set(EVENT_TYPES)
    assert len({case["name"] for case in CASES}) == len(CASES)
    for case in CASES:
        assert set(case) in ({"name", "event", "source", "default_agent_id", "candidate"},
                             {"name", "event", "source", "default_agent_id", "error"})


@pytest.mark.parametrize("case", STORED, ids=[case["name"] for case in STORED])
def test_a_canonical_event_normalises_to_itself(case):
    canonical = normalize_agent_event(case["event"], case["source"], case["default_agent_id"])
    assert normalize_agent_event(canonical, canonical["source"]) == canonical


def test_the_canonical_event_keeps_the_type_fields_and_where_it_came_from():
    event = {"event": "command-completed", "cmd": "pytest -q", "exit_code": 3,
             "output": "1 failed", "project": "Memory OS", "ts": "2026-05-01T12:00:00+02:00",
             "agent": "claude-code", "instance_id": "desk-1", "tags": ["CI"]}
    assert normalize_agent_event(event, "claude-code") == {
        "type": "command_failed", "source": "claude-code", "agent_id": "claude-code",
        "instance_id": "desk-1", "occurred_at": "2026-05-01T10:00:00Z",
        "path": "projects/memory-os", "command": "pytest -q", "exit_code": 3,
        "output": "1 failed", "tags": ["ci"]}


def test_episodes_differ_by_moment_and_repeat_as_one_memory():
    first = {"type": "command_completed", "command": "pytest", "occurred_at": 1777629600}
    later = {**first, "occurred_at": 1777629660}

    def key(event):
        return to_memory_candidate(normalize_agent_event(event))["key"]

    assert key(first) == key(dict(first)) != key(later)


def test_long_output_keeps_its_start_and_end():
    text = "h" * OUTPUT_HEAD + "m" * 600 + "t" * OUTPUT_TAIL
    assert cut_output(text) == ("h" * OUTPUT_HEAD + "\n[… 600 characters cut …]\n"
                                + "t" * OUTPUT_TAIL)
    assert cut_output("short") == "short"
    assert cut("x" * 4003) == "x" * 3979 + " […24 characters cut]"
    assert len(cut("y" * 100_000)) == 4000


def test_every_candidate_fits_the_api_limits():
    huge = "z" * 200_000
    for kind in EVENT_TYPES:
        event = {"type": kind, "command": huge, "output": huge, "stderr": huge, "file": huge,
                 "diff": huge, "decision": huge, "rationale": huge, "subject": huge,
                 "error": huge, "fix": huge, "preference": huge, "task": huge, "note": huge}
        candidate = to_memory_candidate(normalize_agent_event(event))
        assert len(candidate["content"]) < 50_000
        assert len(candidate.get("key", "")) <= 200


@pytest.mark.parametrize("event", [
    ["not", "an", "object"],
    {"type": 7},
    {"type": "command_completed", "command": "ls", "exit_code": True},
    {"type": "decision", "decision": {"nested": "object"}},
    {"type": "decision", "decision": "x", "tags": "x" * 51},
    {"type": "decision", "decision": "x", "path": "/".join(["a"] * 9)},
    {"type": "decision", "decision": "x", "project": "!!!"},
])
def test_malformed_events_are_value_errors(event):
    with pytest.raises(ValueError):
        normalize_agent_event(event)


def test_the_source_must_be_a_name():
    with pytest.raises(ValueError, match="source"):
        normalize_agent_event({"type": "handoff", "note": "x"}, source="my source")
