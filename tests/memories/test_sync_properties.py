"""Property: two minds standing in for two instances, random writes, deletes, restores and
syncs both ways; after a final two-way sync they hold the same memories, each the latest
write of its key, and nothing deleted came back with an older copy."""

import io
import json
import os

import pytest
from django.db import connection
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from memories.api.serializers.transfer import read_sync
from memories.models import Memory
from memories.services import (
    MemoryConflict,
    memory_delete,
    memory_restore,
    memory_store,
    memory_sync,
)
from memories.sync import diff, parse_since
from minds.authentication import AgentPrincipal
from minds.services import key_issue, mind_create
from synapse.parsers import JSONStream

KEYS = st.sampled_from(["name", "editor", "city", "plan"])
CONTENTS = st.sampled_from(["red", "green", "blue", "ochre", "teal"])
TAGS = st.sampled_from([[], ["a"], ["a", "b"]])
SIDES = st.integers(min_value=0, max_value=1)

# 200 runs of 20 steps in `make test`; `make properties` runs 500 (SYNAPSE_SYNC_EXAMPLES).
EXAMPLES = int(os.environ.get("SYNAPSE_SYNC_EXAMPLES", "200"))


def state(mind) -> dict:
    return {memory.key: (memory.content, memory.tags, memory.priority)
            for memory in Memory.objects.for_mind(mind).alive()}


def build_machine(owner):
    class TwoInstances(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.minds = [mind_create(owner=owner, name=f"instance {side}") for side in (0, 1)]
            self.actors = [AgentPrincipal(key=key_issue(mind=mind, name="sync")[0])
                           for mind in self.minds]
            self.cursors = ["", ""]  # how far each side's changes were pulled
            # Every write and delete, on either side: key -> [(time, deleted, value)].
            self.events: dict[str, list] = {}

        def _record(self, key, when, deleted, value=None):
            self.events.setdefault(key, []).append((when, deleted, value))

        @rule(side=SIDES, key=KEYS, content=CONTENTS, tags=TAGS,
              priority=st.sampled_from(["normal", "high"]))
        def write(self, side, key, content, tags, priority):
            result = memory_store(mind=self.minds[side], actor=self.actors[side],
                                  category="fact", key=key, content=content, tags=tags,
                                  priority=priority)
            if result.status != "unchanged":
                self._record(key, result.memory.updated_at, False, (content, tags, priority))

        @rule(side=SIDES, key=KEYS)
        def delete(self, side, key):
            memory = Memory.objects.for_mind(self.minds[side]).alive().filter(key=key).first()
            if memory is not None:
                deleted = memory_delete(memory=memory, actor=self.actors[side])
                self._record(key, deleted.updated_at, True)

        @rule(side=SIDES, key=KEYS)
        def restore(self, side, key):
            memory = (Memory.objects.for_mind(self.minds[side]).in_trash().filter(key=key)
                      .order_by("-deleted_at").first())
            if memory is None:
                return
            try:
                restored = memory_restore(memory=memory, actor=self.actors[side])
            except MemoryConflict:
                return
            self._record(key, restored.updated_at, False,
                         (restored.content, restored.tags, restored.priority))

        @rule(source=SIDES)
        def sync(self, source):
            self._sync(source)

        def _sync(self, source):
            target = 1 - source
            while True:
                changes = diff(mind=self.minds[source], since=parse_since(self.cursors[source]),
                               limit=7, reveal=True)
                # Through the wire format, read as POST /memory/sync reads it.
                body = io.BytesIO(json.dumps(changes.as_dict()).encode())
                memory_sync(mind=self.minds[target], actor=self.actors[target],
                            changes=read_sync(JSONStream(body, limit=2**30)))
                self.cursors[source] = changes.cursor
                if not changes.has_more:
                    return

        def teardown(self):
            for source in (0, 1, 0):
                self._sync(source)
            first, second = state(self.minds[0]), state(self.minds[1])
            assert first == second, "the two instances diverged"
            expected = {}
            for key, events in self.events.items():
                when, deleted, value = max(events, key=lambda event: (event[0], event[1]))
                if not deleted:
                    expected[key] = value
            # Each key holds its latest write; a key whose latest event is a delete is
            # gone from both (no resurrection).
            assert first == expected

    return TwoInstances


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_instances_syncing_both_ways_converge_without_resurrecting_deletes(alice):
    # Thousands of real commits (the cursor needs them): durability of each is beside the
    # point here, so commits do not wait for the disk.
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO off")
    run_state_machine_as_test(build_machine(alice), settings=settings(
        max_examples=EXAMPLES, stateful_step_count=20, deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
