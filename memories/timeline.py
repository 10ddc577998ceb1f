"""Episode timelines: the episodic memories of one path, in the order they happened.

A timeline is ordered by ``occurred_at`` and, between episodes of one moment (many turns of
a conversation share a timestamp), by ``seq``, the order they were written on this instance.
Every query here is a range scan of the partial index ``memory_timeline`` (mind, path,
occurred_at, seq): a page, or the neighbours of an episode, costs one indexed query.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from memories.models import Memory
from minds.models import Mind


class NotAnEpisode(ValueError):
    """A timeline question about a memory that is not an episode (or not on this path)."""


def timeline(mind: Mind | str, path: str):
    """The current episodic memories of ``mind`` (or its id) at exactly ``path`` (its
    timeline; sub-paths have their own), unordered; expired episodes stay on it."""
    return Memory.objects.for_mind(mind).current().episodes().filter(path=path)


def _position(op: str, occurred_at: datetime, seq: int | None):
    """``(occurred_at, seq) op (…)`` as a row comparison, which the index answers as a range
    (two separate conditions joined by OR would not be)."""
    if seq is None:  # a bare moment: everything at that moment counts as after it
        sql = f'"memories_memory"."occurred_at" {"<" if op == "<" else ">="} %s'
        return RawSQL(sql, (occurred_at,), output_field=BooleanField())
    return RawSQL(f'("memories_memory"."occurred_at", "memories_memory"."seq") {op} (%s, %s)',
                  (occurred_at, seq), output_field=BooleanField())


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
        if isinstance(anchor, Memory):
            position = _position("<" if backwards else ">", anchor.occurred_at, anchor.seq)
        else:
            position = _position("<" if backwards else ">=", anchor, None)
        memories = memories.filter(position)
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
    earlier = (around.filter(_position("<", memory.occurred_at, memory.seq))
               .order_by("-occurred_at", "-seq")[:n])
    later = (around.filter(_position(">", memory.occurred_at, memory.seq))
             .order_by("occurred_at", "seq")[:n])
    rows = list(earlier.union(later, all=True))
    key = memory.occurred_at, memory.seq
    before = sorted((row for row in rows if (row.occurred_at, row.seq) < key),
                    key=lambda row: (row.occurred_at, row.seq))
    after = sorted((row for row in rows if (row.occurred_at, row.seq) > key),
                   key=lambda row: (row.occurred_at, row.seq))
    return before, after
