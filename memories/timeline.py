"""Episode timelines: the episodic memories of one path, in the order they happened.

A timeline is ordered by ``occurred_at`` and, between episodes of one moment (many turns of
a conversation share a timestamp), by ``seq``, the order they were written on this instance.
Every query here is a range scan of the partial index ``memory_timeline`` (mind, path,
occurred_at, seq): a page, or the neighbours of an episode, costs one indexed query.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Q
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan

from memories.models import Memory
from minds.models import Mind


class NotAnEpisode(ValueError):
    """A timeline question about a memory that is not an episode (or not on this path)."""


def timeline(mind: Mind | str, path: str):
    """The current episodic memories of ``mind`` (or its id) at exactly ``path`` (its
    timeline; sub-paths have their own), unordered; expired episodes stay on it."""
    return Memory.objects.for_mind(mind).current().episodes().filter(path=path)


def position(op: str, occurred_at: datetime, seq: int | None):
    """Before (``<``) or after (``>``) a place on the timeline: ``(occurred_at, seq) op (…)``
    as a row comparison, which the index answers as a range (two conditions joined by OR
    would not be). A bare moment (``seq`` None): everything at that moment is after it."""
    if seq is None:
        return Q(occurred_at__lt=occurred_at) if op == "<" else Q(occurred_at__gte=occurred_at)
    lookup = TupleLessThan if op == "<" else TupleGreaterThan
    return lookup(Tuple(F("occurred_at"), F("seq")), (occurred_at, seq))


@dataclass
class TimelinePage:
    memories: list[Memory]  # in timeline order
    has_more: bool  # more episodes beyond this page, in the direction it was read


def timeline_page(memories, *, limit: int, after: Memory | datetime | None = None,
                  before: Memory | datetime | None = None) -> TimelinePage:
    """One page of a timeline queryset: the ``limit`` episodes just after ``after`` (an
    episode, or a moment: from that moment on), or just before ``before``, or the first
    ``limit`` of all. Pages are always in timeline order."""
    anchor = after if after is not None else before
    backwards = after is None and before is not None
    if anchor is not None:
        op = "<" if backwards else ">"
        if isinstance(anchor, Memory):
            memories = memories.filter(position(op, anchor.occurred_at, anchor.seq))
        else:
            memories = memories.filter(position(op, anchor, None))
    order = ("-occurred_at", "-seq") if backwards else ("occurred_at", "seq")
    rows = list(memories.order_by(*order)[:limit + 1])
    page = rows[:limit]
    if backwards:
        page.reverse()
    return TimelinePage(page, has_more=len(rows) > limit)


def neighbours(memory: Memory, n: int) -> tuple[list[Memory], list[Memory]]:
    """The ``n`` episodes just before ``memory`` on its path's timeline and the ``n`` just
    after it (both in timeline order), whoever wrote them: one query."""
    if memory.occurred_at is None:
        raise NotAnEpisode(f"Memory {memory.id} is not episodic: only episodes are on a "
                           "timeline.")
    around = timeline(memory.mind_id, memory.path).without_vectors()
    earlier = (around.filter(position("<", memory.occurred_at, memory.seq))
               .order_by("-occurred_at", "-seq")[:n])
    later = (around.filter(position(">", memory.occurred_at, memory.seq))
             .order_by("occurred_at", "seq")[:n])
    rows = list(earlier.union(later, all=True))
    key = memory.occurred_at, memory.seq
    before = sorted((row for row in rows if (row.occurred_at, row.seq) < key),
                    key=lambda row: (row.occurred_at, row.seq))
    after = sorted((row for row in rows if (row.occurred_at, row.seq) > key),
                   key=lambda row: (row.occurred_at, row.seq))
    return before, after
