"""Recall: what an agent reads at session start — ordering, token budget, text format."""

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from django.db.models import Count, Q

from memories.models import Category, Memory
from minds.models import Mind
from synapse.text import indented, inline

REDACTED = "[redacted: credentials are only shown by GET /memory/{id}]"
# The smallest block costs more than this; below it nothing more can fit.
MIN_BLOCK_TOKENS = 8
# Under a budget, stop looking for smaller memories that still fit after this many misses.
MAX_CONSECUTIVE_MISSES = 200
# Without a budget, a recall of more memories than this is streamed, in pieces of this many.
STREAM_CHUNK = 500


class RecallItem(NamedTuple):
    """The fields a recall block shows — fetched as tuples, far cheaper than models."""

    id: str
    category: str
    key: str
    content: str
    tags: list[str]
    priority: str
    verified: bool


RECALL_FIELDS = RecallItem._fields


def recall_memories(mind: Mind):
    """The memories recall shows for ``mind``: current and unexpired, and only verified ones
    when the mind leaves unverified memories out (``unverified_in_recall``)."""
    memories = Memory.objects.for_mind(mind).in_recall()
    if mind.unverified_in_recall == Mind.UnverifiedInRecall.HIDDEN:
        memories = memories.filter(verified=True)
    return memories


def recall_items(memories) -> Iterable[RecallItem]:
    """Stream a queryset (already in recall order) as RecallItems."""
    for row in memories.values_list(*RECALL_FIELDS).iterator(chunk_size=500):
        yield RecallItem(*row)


def estimate_tokens(text: str) -> int:
    """Tokens as LLM tokenizers count them, roughly: one per four characters."""
    return math.ceil(len(text) / 4)


def display_content(memory: Memory | RecallItem) -> str:
    """Content as recall, search and list show it: credentials redacted."""
    if memory.category == Category.CREDENTIALS:
        return REDACTED.format(id=memory.id)
    return memory.content


def format_block(position: int, memory: Memory | RecallItem) -> str:
    """One memory as recall shows it (docs/api.md#recall); blocks are separated by a blank line::

        [001] identity (CRITICAL) [verified]
          user_name
          Michael Schäfer
          Tags: person, identity

    Every line of every stored field (key, content, tags) is indented by two spaces, whatever
    breaks it (LS, PS, NEL, CR as well as LF), and the fields of a header line (here and in
    :func:`format_header`) show any control character escaped, so no stored text can start a
    line that looks like a block header or the recall header: the boundary of each memory
    stays unambiguous (stored text is data, never instructions). Writes refuse such keys and
    tags (synapse.text); this holds for rows that got in before.
    """
    status = "[verified]" if memory.verified else "[unverified]"
    lines = [f"[{position:03d}] {inline(memory.category)} ({inline(memory.priority.upper())}) "
             f"{status}"]
    lines += indented(memory.key)
    lines += indented(display_content(memory))
    if memory.tags:
        lines += indented(f"Tags: {', '.join(memory.tags)}")
    return "\n".join(lines)


def format_header(mind: Mind, memories: list) -> str:
    verified = sum(1 for memory in memories if memory.verified)
    return _header(mind, len(memories), verified)


def _header(mind: Mind, total: int, verified: int) -> str:
    return (f"Mind: {inline(mind.name)}\n"
            f"Memories: {total} total ({verified} verified, {total - verified} unverified)")


@dataclass
class Recall:
    mind: Mind
    memories: list
    omitted: int
    text: str
    tokens: int


def build_recall(*, mind: Mind, memories: Iterable, budget: int | None = None,
                 total: int | None = None) -> Recall:
    """Lay out ``memories`` (in recall order) within ``budget`` tokens.

    Memories are taken in order while they fit; one that does not fit is left out and
    later (smaller) ones may still fit, so critical memories always go first. Under a
    budget the scan stops once nothing more can fit, so ``total`` (how many memories are
    in recall) is needed to report how many were left out. The header counts what is
    shown; the token count of the text never exceeds the budget.
    """
    if budget is None:
        chosen = list(memories)
        blocks = [format_block(position, memory) for position, memory in enumerate(chosen, 1)]
    else:
        chosen, blocks, misses, seen = [], [], 0, 0
        # The header is costed at its largest (every memory shown) and a blank line.
        used = estimate_tokens(format_header(mind, [])) + 3
        for memory in memories:
            seen += 1
            block = format_block(len(chosen) + 1, memory)
            cost = estimate_tokens(block) + 1  # +1 covers the blank line between blocks
            if used + cost <= budget:
                chosen.append(memory)
                blocks.append(block)
                used += cost
                misses = 0
            else:
                misses += 1
            if budget - used < MIN_BLOCK_TOKENS or misses >= MAX_CONSECUTIVE_MISSES:
                break
        total = seen if total is None else total
    text = "\n\n".join([format_header(mind, chosen), *blocks]) + "\n"
    omitted = (len(chosen) if total is None else total) - len(chosen)
    result = Recall(mind=mind, memories=chosen, omitted=omitted, text=text,
                    tokens=estimate_tokens(text))
    if budget is not None and result.tokens > budget:
        # Not even the header fits: answer with nothing rather than exceed the budget.
        result = Recall(mind=mind, memories=[], omitted=omitted + len(chosen), text="",
                        tokens=0)
    return result


# -- Without a budget: every memory, streamed ------------------------------------------------

@dataclass
class RecallTotals:
    """How many memories an unbudgeted recall shows, counted before it is streamed."""

    total: int
    verified: int

    @property
    def unverified(self) -> int:
        return self.total - self.verified


def count_recall(memories) -> RecallTotals:
    """The totals of ``memories`` (the recall queryset), in one query."""
    counts = memories.aggregate(total=Count("id"), verified=Count("id", filter=Q(verified=True)))
    return RecallTotals(total=counts["total"], verified=counts["verified"])


def recall_header(mind: Mind, totals: RecallTotals) -> str:
    return _header(mind, totals.total, totals.verified)


def stream_text(*, mind: Mind, totals: RecallTotals, memories: Iterable) -> Iterator[str]:
    """The text of an unbudgeted recall (the same text :func:`build_recall` lays out), in
    pieces of STREAM_CHUNK blocks: memory holds one piece, never the mind.

    ``memories`` is an iterator in recall order; the header shows ``totals``, counted just
    before (a write that lands in between may show in the blocks but not the counts)."""
    piece = [recall_header(mind, totals)]
    for position, memory in enumerate(memories, 1):
        piece.append(format_block(position, memory))
        if len(piece) >= STREAM_CHUNK:
            yield "\n\n".join(piece)
            piece = [""]  # the next piece starts with the blank line before its block
    yield "\n\n".join(piece) + "\n"
