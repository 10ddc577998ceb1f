"""Recall: what an agent reads at session start — ordering, token budget, text format."""

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import Count, Q

from memories.models import (
    PRIORITY_RANK,
    Category,
    Memory,
    MemoryFacts,
    Priority,
    default_memory_type,
)
from minds.models import Mind
from synapse.text import indent_lines, inline

REDACTED = "[redacted: credentials are only shown by GET /memory/{id}]"
# The smallest block costs more than this; below it nothing more can fit.
MIN_BLOCK_TOKENS = 8
# Under a budget, stop looking for smaller memories that still fit after this many misses.
MAX_CONSECUTIVE_MISSES = 200
# Without a budget, a recall of up to WHOLE_LIMIT memories is read in one query (no
# cursor, and no count query: its rows are the counts) and answered whole; a larger one is
# streamed over a server-side cursor, in pieces of STREAM_CHUNK memories.
WHOLE_LIMIT = 2000
STREAM_CHUNK = 500
# A budgeted recall reads no more rows than it shows plus SCAN_CHUNK (BudgetedScan).
SCAN_CHUNK = 500
# Its first fetch asks for the rows a scan most likely looks at (first_fetch): what the
# budget shows, counting this many tokens a memory, and the MAX_CONSECUTIVE_MISSES after
# them that end the scan.
TOKENS_PER_MEMORY_GUESS = 40


class _RecallFields(NamedTuple):
    id: str
    category: str
    key: str
    content: str
    tags: list[str]
    priority: str
    verified: bool
    memory_type: str
    path: str
    occurred_at: datetime | None
    version: int


class RecallItem(_RecallFields, MemoryFacts):
    """The fields a recall block shows — fetched as tuples, far cheaper than models."""

    __slots__ = ()


def recall_memories(mind: Mind):
    """The memories recall shows for ``mind``: current and unexpired, and only verified ones
    when the mind leaves unverified memories out (``unverified_in_recall``)."""
    memories = Memory.objects.for_mind(mind).in_recall()
    if mind.unverified_in_recall == Mind.UnverifiedInRecall.HIDDEN:
        memories = memories.filter(verified=True)
    return memories


def recall_items(memories, *, whole: bool = False, row=RecallItem) -> Iterable:
    """Stream a queryset (already in recall order) as ``row`` tuples (RecallItem, or
    MemoryRow for JSON); ``whole``: every row will be read (:func:`read_through`)."""
    rows = memories.values_list(*row._fields)
    for values in (read_through(rows) if whole else rows.iterator(chunk_size=500)):
        yield row(*values)


class BudgetedScan:
    """The rows of ``queryset`` (in recall order) as ``row`` tuples, for a budgeted recall:
    read over a server-side cursor so that the rows read never exceed the rows taken
    (:meth:`take`, called by :func:`build_recall` for each memory it shows) plus one
    chunk. Each fetch asks for SCAN_CHUNK rows less those read and passed over so far
    (the first for at most :func:`first_fetch`); once a chunk's worth have been passed over
    (memories too large for what was left of the budget), the scan ends. ``first``
    (memories ranked by a query, read already) come before the cursor's rows and count as
    read. Read it inside a transaction (synapse.db.reading)."""

    def __init__(self, queryset, *, budget: int, row=RecallItem, first: Iterable = ()):
        self.rows = queryset.values_list(*row._fields)
        self.budget = budget
        self.row = row
        self.first = list(first)
        self.read = 0
        self.taken = 0

    def take(self) -> None:
        self.taken += 1

    def __iter__(self) -> Iterator:
        self.read += len(self.first)
        yield from self.first
        compiler = self.rows.query.get_compiler(using=self.rows.db)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:
            return
        with connections[self.rows.db].chunked_cursor() as cursor:
            cursor.execute(sql, params)
            for values in compiler.results_iter(results=self._fetches(cursor)):
                yield self.row(*values)

    def _fetches(self, cursor) -> Iterator[list]:
        # Called for the next fetch only once every row fetched before has been looked at.
        most = first_fetch(self.budget)
        while (wanted := min(most, SCAN_CHUNK - (self.read - self.taken))) > 0:
            rows = cursor.fetchmany(wanted)
            most = SCAN_CHUNK
            self.read += len(rows)
            if rows:
                yield rows
            if len(rows) < wanted:
                return


def first_fetch(budget: int) -> int:
    """How many rows a budgeted scan asks for first: about as many as it will look at, so
    a budget of up to a few thousand tokens is read in one fetch and few rows more. (A
    whole chunk, asked for every time before, read up to twice the rows looked at, each
    of them dear when a path filter leaves its rows far apart in the recall order.)"""
    return min(SCAN_CHUNK, MAX_CONSECUTIVE_MISSES + budget // TOKENS_PER_MEMORY_GUESS)


def read_whole(queryset, *, row=RecallItem, limit: int = WHOLE_LIMIT) -> list:
    """Up to ``limit + 1`` rows of ``queryset`` (in recall order) in one query, as ``row``
    tuples (RecallItem, or MemoryRow for JSON). One more than ``limit`` means
    the recall is too large to hold: stream it instead (the caller reads it again over a
    cursor, from the start: one snapshot, no memory shown twice or missed)."""
    return [row(*values) for values in queryset.values_list(*row._fields)[:limit + 1]]


def read_through(queryset, chunk_size: int = 500) -> Iterator:
    """Iterate ``queryset`` in chunks over a cursor planned for reading every row.

    PostgreSQL plans a server-side cursor for its first tenth of rows by default
    (``cursor_tuple_fraction``), so a recall narrowed by a filter (a path: a tenth of the
    mind) walked the recall-order index over the whole mind, filtering — twice the time of
    reading the few rows through the path index and sorting them (bench/results/core.md).
    The setting applies when the cursor is declared (the first row), and only then, on
    the connection the queryset reads from: it is set for the transaction (read inside one:
    :func:`synapse.db.streamed`), never for the session, which behind PgBouncer would stay
    on a server connection other clients get."""
    rows = queryset.iterator(chunk_size=chunk_size)
    with connections[queryset.db].cursor() as cursor:
        cursor.execute("SET LOCAL cursor_tuple_fraction = 1")
        first = next(rows, _END)
        # An error above ends the transaction, and the setting with it.
        cursor.execute("SET LOCAL cursor_tuple_fraction TO DEFAULT")
    if first is not _END:
        yield first
        yield from rows


_END = object()


def estimate_tokens(text: str) -> int:
    """Tokens as LLM tokenizers count them, roughly: one per four characters."""
    return tokens_of_length(len(text))


def tokens_of_length(characters: int) -> int:
    return math.ceil(characters / 4)


def display_content(memory: Memory | RecallItem) -> str:
    """Content as recall, search and list show it: credentials redacted."""
    if memory.category == Category.CREDENTIALS:
        return REDACTED.format(id=memory.id)
    return memory.content


def format_block(position: int, memory: Memory | RecallItem) -> str:
    """One memory as recall shows it (docs/api.md#recall); blocks are separated by a blank line::

        [001] identity (CRITICAL) [verified] mem_4Fq2xT9kLm3nPq8rS1vW@v3
          user_name
          Michael Schäfer
          Tags: person, identity

    The header line names the version shown, to cite (``mem_…@vN``), and ends with where
    the memory lives when that is not the default (:func:`format_place`): ``[002] context
    (NORMAL) [verified] mem_…@v1 episodic talks/one @2026-05-01T12:00:00Z``.

    Every line of every stored field (key, content, tags) is indented by two spaces, whatever
    breaks it (LS, PS, NEL, CR as well as LF), and the fields of a header line (here and in
    :func:`format_header`) show any control character escaped, so no stored text can start a
    line that looks like a block header or the recall header: the boundary of each memory
    stays unambiguous (stored text is data, never instructions). Writes refuse such keys and
    tags (synapse.text); this holds for rows that got in before.
    """
    fields = _header_fields(memory.category, memory.priority, memory.verified)
    header = f"[{position:03d}] {fields} {memory.citation}"
    place = format_place(memory)
    parts = [f"{header} {place}" if place else header, indent_lines(memory.key),
             indent_lines(display_content(memory))]
    if memory.tags:
        parts.append(indent_lines(f"Tags: {', '.join(memory.tags)}"))
    return "\n".join(parts)


def shortest_block(memory: Memory | RecallItem) -> int:
    """A length no block of ``memory`` is shorter than, at any position: what
    :func:`format_block` writes whatever the fields (``[001] `` and the header's
    punctuation, ``[verified]``, ``@v`` and a digit, two line breaks) and each field
    shown once. Escaping only lengthens a field, and indenting a field adds two characters
    where dropping its last line break takes at most two (``\\r\\n``)."""
    return 26 + (len(memory.category) + len(memory.priority) + len(memory.id)
                 + len(memory.key) + len(display_content(memory)))


# A recall lays out thousands of blocks whose headers share a few categories, priorities,
# types and paths: their escaped forms are kept (bounded; pure functions of their arguments).
@lru_cache(maxsize=1024)
def _header_fields(category: str, priority: str, verified: bool) -> str:
    status = "[verified]" if verified else "[unverified]"
    return f"{inline(category)} ({inline(priority.upper())}) {status}"


@lru_cache(maxsize=4096)
def _place(category: str, memory_type: str, path: str) -> str:
    if memory_type == default_memory_type(category) and not path:
        return ""
    return f"{inline(memory_type)} {inline(path)}" if path else inline(memory_type)


def format_place(memory: Memory | RecallItem) -> str:
    """Type, path and moment for a block header, each only when not the default: ``""`` for
    a memory of its category's default type at the root (every memory from before types
    and paths), ``procedural``, ``semantic projects/synapse``, ``episodic talks/one
    @2026-05-01T12:00:00Z``.

    The type is also shown, default or not, when a path follows it: a path may be a single
    segment spelled like a type (``working``), and a header must read one way only."""
    if memory.occurred_at is None:
        return _place(memory.category, memory.memory_type, memory.path)
    where = _place(memory.category, memory.memory_type, memory.path) or inline(
        memory.memory_type)
    return f"{where} @{format_moment(memory.occurred_at)}"


def format_moment(moment: datetime) -> str:
    """An episode's moment in a header: UTC, to the second (``2026-05-01T12:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_header(mind: Mind, memories: list, path: str = "") -> str:
    verified = sum(1 for memory in memories if memory.verified)
    return _header(mind, len(memories), verified, path)


def _header(mind: Mind, total: int, verified: int, path: str = "") -> str:
    lines = [f"Mind: {inline(mind.name)}"]
    if path:
        lines.append(f"Path: {inline(path)}")
    lines.append(f"Memories: {total} total ({verified} verified, {total - verified} unverified)")
    return "\n".join(lines)


@dataclass
class RecallTotals:
    """How many memories a recall covers, counted before it is laid out or streamed."""

    total: int
    verified: int
    low: int = 0

    @property
    def unverified(self) -> int:
        return self.total - self.verified


def count_recall(memories) -> RecallTotals:
    """The totals of ``memories`` (the recall queryset), in one query.

    Every column it reads is in the index ``memory_recall_counts``, so a whole mind is
    counted from that index alone: ``mind`` (never null) is what is counted, not ``id``,
    and low priority is read as its rank."""
    low = Q(priority_rank=PRIORITY_RANK[Priority.LOW])
    counts = memories.aggregate(total=Count("mind"),
                                verified=Count("mind", filter=Q(verified=True)),
                                low=Count("mind", filter=low))
    return RecallTotals(total=counts["total"], verified=counts["verified"], low=counts["low"])


def recall_header(mind: Mind, totals: RecallTotals, path: str = "") -> str:
    return _header(mind, totals.total, totals.verified, path)


# -- Under a budget: the memories that fit, and a word on the low-priority ones left out -----

@dataclass
class LeftOutLow:
    """The low-priority memories a budget left out (docs/api.md#recall): how many, the keys
    the summary line names, and how many the budgeted scan never read (keys unknown)."""

    count: int = 0
    keys: list[str] = field(default_factory=list)
    not_scanned: int = 0


@dataclass
class Recall:
    mind: Mind
    memories: list
    omitted: int
    text: str
    tokens: int
    left_out_low: LeftOutLow = field(default_factory=LeftOutLow)


def build_recall(*, mind: Mind, memories: Iterable, budget: int | None = None,
                 totals: RecallTotals | None = None, path: str = "",
                 scan: BudgetedScan | None = None) -> Recall:
    """Lay out ``memories`` (in recall order) within ``budget`` tokens.

    Memories are taken in order while they fit; one that does not fit is left out and
    later (smaller) ones may still fit, so critical memories always go first. Under a
    budget the scan stops once nothing more can fit, so ``totals`` (counted over the
    memories in recall) are needed to report how many were left out. The header counts
    what is shown; ``path`` (the filter recall was asked for) is named under the mind.

    When low-priority memories are left out, the text ends with one line saying how many
    and naming as many of their keys as the budget allows (:func:`left_out_line`): the
    keys of those the scan read, with no second query. Room for the shortest such line is
    kept from the start whenever the recall holds a low-priority memory. The token count
    of the text never exceeds the budget. ``scan``: the BudgetedScan ``memories`` come
    from, told of each memory shown.
    """
    header = format_header(mind, [], path)
    if budget is None:
        chosen = list(memories)
        blocks = [format_block(position, memory) for position, memory in enumerate(chosen, 1)]
        text = "\n\n".join([format_header(mind, chosen, path), *blocks]) + "\n"
        return Recall(mind=mind, memories=chosen, omitted=0, text=text,
                      tokens=estimate_tokens(text))
    low_total = totals.low if totals is not None else None
    chosen, blocks, misses, seen = [], [], 0, 0
    low_seen, low_chosen, low_keys, low_key_chars = 0, 0, [], 0
    # The header is costed at its largest (every memory shown) and a blank line; the
    # summary line at its shortest, when a low-priority memory may be left out.
    used = estimate_tokens(header) + 3
    if low_total is None or low_total > 0:
        used += _shortest_line_tokens(low_total)
    for memory in memories:
        seen += 1
        low = memory.priority == Priority.LOW
        low_seen += low
        # +1 covers the blank line between blocks. Once the budget is nearly spent, most
        # memories read are too large: those whose shortest block would not fit are
        # passed over without being laid out.
        block = None
        if used + tokens_of_length(shortest_block(memory)) + 1 <= budget:
            block = format_block(len(chosen) + 1, memory)
        if block is not None and used + (cost := estimate_tokens(block) + 1) <= budget:
            if scan is not None:
                scan.take()
            chosen.append(memory)
            blocks.append(block)
            used += cost
            low_chosen += low
            misses = 0
        else:
            misses += 1
            # Keys past what the whole budget could spell are never named: not kept.
            if low and low_key_chars <= 4 * budget:
                low_keys.append(memory.key)
                low_key_chars += len(memory.key) + 2
        if budget - used < MIN_BLOCK_TOKENS or misses >= MAX_CONSECUTIVE_MISSES:
            break
    total = seen if totals is None else totals.total
    low_total = low_seen if low_total is None else low_total
    omitted = total - len(chosen)
    # Counts taken just before the scan may lag a write that landed in between.
    left_out = LeftOutLow(count=max(low_total - low_chosen, len(low_keys)),
                          not_scanned=max(low_total - low_seen, 0))
    body = "\n\n".join([format_header(mind, chosen, path), *blocks])
    text = body + "\n"
    if left_out.count:
        # Room for the line: the budget less the text before it and its blank line.
        room = 4 * budget - len(body) - 3
        line, left_out.keys = left_out_line(left_out.count, low_keys, left_out.not_scanned,
                                            room)
        if line is not None:
            text = f"{body}\n\n{line}\n"
    result = Recall(mind=mind, memories=chosen, omitted=omitted, text=text,
                    tokens=estimate_tokens(text), left_out_low=left_out)
    if result.tokens > budget:
        # Not even the header fits: answer with nothing rather than exceed the budget.
        result = Recall(mind=mind, memories=[], omitted=total, text="", tokens=0,
                        left_out_low=LeftOutLow(count=low_total,
                                                not_scanned=left_out.not_scanned))
    return result


def left_out_line(count: int, keys: list[str], not_scanned: int,
                  room: int) -> tuple[str | None, list[str]]:
    """The line that ends a budgeted recall leaving ``count`` low-priority memories out,
    at most ``room`` characters, and the keys it names (the first of ``keys`` that fit)::

        Left out (low priority, 12): key_a, key_b and 10 more
        Left out (low priority, 12; 7 not scanned): key_a, key_b and 10 more

    "not scanned": the budget was spent before the scan reached them, so their keys are
    unknown (the "more" counts them too). ``None`` when not even the counts fit."""
    head = f"Left out (low priority, {count}"
    head += f"; {not_scanned} not scanned)" if not_scanned else ")"
    if len(head) > room:
        return None, []
    named, length = 0, len(head)
    for key in keys:
        length += len(inline(key)) + 2  # ": " before the first key, ", " before the others
        rest = count - named - 1
        if length + (len(f" and {rest} more") if rest else 0) > room:
            break
        named += 1
    if not named:
        return head, []
    rest = count - named
    line = f"{head}: {', '.join(inline(key) for key in keys[:named])}"
    return (line + f" and {rest} more" if rest else line), keys[:named]


def _shortest_line_tokens(low_total: int | None) -> int:
    """Tokens the shortest summary line can take, with its blank line; both counts at
    most ``low_total`` (seven digits when it is unknown)."""
    digits = "9" * len(str(low_total)) if low_total is not None else "9" * 7
    return estimate_tokens(f"\n\nLeft out (low priority, {digits}; {digits} not scanned)") + 1


# -- Without a budget: every memory, streamed ------------------------------------------------

def stream_text(*, mind: Mind, totals: RecallTotals, memories: Iterable,
                path: str = "") -> Iterator[str]:
    """The text of an unbudgeted recall (the same text :func:`build_recall` lays out), in
    pieces of STREAM_CHUNK blocks: memory holds one piece, never the mind.

    ``memories`` is an iterator in recall order; the header shows ``totals``, counted just
    before (a write that lands in between may show in the blocks but not the counts)."""
    piece = [recall_header(mind, totals, path)]
    for position, memory in enumerate(memories, 1):
        piece.append(format_block(position, memory))
        if len(piece) >= STREAM_CHUNK:
            yield "\n\n".join(piece)
            piece = [""]  # the next piece starts with the blank line before its block
    yield "\n\n".join(piece) + "\n"
