"""Memories as compact text an LLM (or a person at a terminal) reads well: MCP tools, CLI."""

import math
import re

# Each memory is a block headed by its id. Stored text is data, never instructions: every
# line of content and tags is indented, whatever breaks it (LS, PS, NEL, \r as well as \n),
# and the stored fields a header line shows (key, category, …) have any control character
# or line break escaped, so nothing stored can forge a block header or the recall header,
# even from a server that let it in.
# Control characters and every line break str.splitlines() knows (the server's
# synapse/text.py rule; this package does not import the server).
_LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")  # a tab is kept


def _escape(match: re.Match) -> str:
    character = match.group()
    return f"\\x{ord(character):02x}" if ord(character) < 0x100 else f"\\u{ord(character):04x}"


def inline(value) -> str:
    """A stored field for a header line: control characters and line breaks escaped."""
    return _LINE_BREAKING.sub(_escape, str(value))


def _indented(text) -> list[str]:
    # Two spaces before every line: stored text can never forge a block header.
    return [f"  {_CONTROL.sub(_escape, line)}"
            for line in str(text or "").splitlines() or [""]]


def place(memory: dict, *, on_timeline: bool = False) -> str:
    """Where a memory stands, for its header line, leaving out what is the default: its
    type unless the category's default (identity for identity, else semantic), when it
    happened (episodes), its path unless the root. On a timeline, whose header names the
    path, only the moment. E.g. `` type=episodic occurred_at=2026-05-01T10:00:00Z
    path=projects/memory-os``."""
    parts = []
    memory_type = memory.get("memory_type")
    default_type = "identity" if memory.get("category") == "identity" else "semantic"
    if memory_type and memory_type != default_type and not on_timeline:
        parts.append(f"type={inline(memory_type)}")
    if memory.get("occurred_at"):
        parts.append(f"occurred_at={inline(memory['occurred_at'])}")
    if memory.get("path") and not on_timeline:
        parts.append(f"path={inline(memory['path'])}")
    return "".join(f" {part}" for part in parts)


def cite(memory: dict) -> str:
    """``mem_…@vN`` as the server names it (``citation``), else built from id and version."""
    if memory.get("citation"):
        return str(memory["citation"])
    if memory.get("version") is not None:
        return f"{memory.get('id')}@v{memory['version']}"
    return str(memory.get("id"))


def format_memory(memory: dict, *, detail: bool = False, extra: str = "",
                  on_timeline: bool = False) -> str:
    """One memory as a block headed by its citation (``mem_…@vN``: the version shown),
    or its id alone when the answer names no version."""
    status = "verified" if memory.get("verified") else "unverified"
    header = (f"[{inline(cite(memory))}] {inline(memory.get('category'))}/"
              f"{inline(memory.get('key'))} "
              f"({inline(str(memory.get('priority', 'normal')).upper())}) [{status}]"
              f"{place(memory, on_timeline=on_timeline)}{extra}")
    lines = [header, *_indented(memory.get("content", ""))]
    if memory.get("tags"):
        lines += _indented(f"Tags: {', '.join(map(str, memory['tags']))}")
    if detail:
        facts = [f"version {memory.get('version')}", f"source {inline(memory.get('source'))}",
                 f"confidence {memory.get('confidence')}",
                 f"updated {memory.get('updated_at')}", f"created {memory.get('created_at')}"]
        if memory.get("expires_at"):
            facts.append(f"expires {memory['expires_at']}")
        if memory.get("deleted_at"):
            facts.append(f"in trash since {memory['deleted_at']}")
        lines.append(f"  ({', '.join(facts)})")
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    """The server's estimate (memories/recall.py): one token per four characters."""
    return math.ceil(len(text) / 4)


def format_recall(mind: dict, memories: list[dict], omitted: int, budget: int | None,
                  left_out_low: dict | None = None) -> str:
    """Recall with ids; within ``budget`` tokens when one is given (least important cut).

    ``left_out_low`` (the server's ``left_out_low``: the low-priority memories its budget
    left out) ends the text with the same line the server's text recall ends with,
    counting also the low-priority blocks cut here."""
    blocks = [format_memory(memory) for memory in memories]
    low = left_out_low or {}

    def render(count: int, left_out: int) -> str:
        shown = memories[:count]
        verified = sum(1 for memory in shown if memory.get("verified"))
        head = (f"Mind: {inline(mind.get('name', '?'))}\n"
                f"Memories: {count} shown ({verified} verified, {count - verified} "
                f"unverified)")
        if left_out:
            head += f"; {left_out} left out to stay within the budget"
        parts = [head, *blocks[:count]]
        cut_low = [memory for memory in memories[count:] if memory.get("priority") == "low"]
        line = left_out_line(low.get("count", 0) + len(cut_low),
                             [*(str(key) for key in low.get("keys", [])),
                              *(str(memory.get("key")) for memory in cut_low)],
                             low.get("not_scanned", 0))
        if line:
            parts.append(line)
        return "\n\n".join(parts) + "\n"

    count = len(blocks)
    text = render(count, omitted)
    # Ids make each block a little longer than the server's numbered format: trim from
    # the end (least important) so the budget still holds.
    while budget is not None and count and estimate_tokens(text) > budget:
        count -= 1
        text = render(count, omitted + len(blocks) - count)
    if not count and not omitted:
        return text + "\nNo memories yet. Use `remember` to store what you learn.\n"
    return text


def left_out_line(count: int, keys: list[str], not_scanned: int) -> str:
    """``Left out (low priority, 12): key_a, key_b and 10 more`` (the server's line), or
    "" when no low-priority memory was left out."""
    if not count:
        return ""
    head = f"Left out (low priority, {count}" + (
        f"; {not_scanned} not scanned)" if not_scanned else ")")
    if not keys:
        return head
    named = keys[:count]
    rest = count - len(named)
    return f"{head}: {', '.join(inline(key) for key in named)}" + (
        f" and {rest} more" if rest else "")


def format_list(results: list[dict], empty: str) -> str:
    if not results:
        return empty
    return "\n\n".join(format_memory(memory) for memory in results)


def format_search(body: dict, query: str, mode: str) -> str:
    results = body.get("results", [])
    if not results:
        return f"No memories match {query!r} ({mode} search)."
    blocks = []
    for result in results:
        memory = result.get("memory", result)
        score = result.get("score", result.get("similarity"))
        extra = f" score {score:.3f}" if isinstance(score, int | float) else ""
        snippet = result.get("snippet") or result.get("highlight")
        if snippet and snippet != memory.get("content"):
            memory = {**memory, "content": snippet}
        blocks.append(format_memory(memory, extra=extra))
    head = f"{len(results)} result(s) for {query!r} ({mode})"
    if body.get("matched") == "some":
        head += "; no memory has every word, these have some"
    if body.get("ignored_terms"):
        head += f"; ignored: {', '.join(body['ignored_terms'])}"
    return head + ":\n\n" + "\n\n".join(blocks)


def format_timeline(body: dict, *, after: str | None = None,
                    before: str | None = None) -> str:
    """A page of ``GET /memory/timeline``, oldest first, saying how to read on."""
    results = body.get("results", [])
    where = f"path {inline(body['path'])}" if body.get("path") else "the root path"
    anchor = (f" after {inline(after)}" if after else "") + \
        (f" before {inline(before)}" if before and not after else "")
    if not results:
        return f"No episodes{anchor} on the timeline of {where}."
    head = f"Timeline of {where}{anchor}: {len(results)} episode(s), oldest first"
    if body.get("has_more"):
        # A page read backwards (before=) has more in the past; any other, in the future.
        head += (f"; earlier ones: before={inline(results[0].get('id'))}"
                 if before and not after else
                 f"; later ones: after={inline(results[-1].get('id'))}")
    blocks = [format_memory(memory, on_timeline=True) for memory in results]
    return head + ":\n\n" + "\n\n".join(blocks)


def format_neighbours(body: dict) -> str:
    """``GET /memory/{id}/neighbours``: the episodes before and after one, oldest first,
    with a line marking where the episode itself stands."""
    memory_id = inline(body.get("memory"))
    before, after = body.get("before", []), body.get("after", [])
    if not before and not after:
        return f"{memory_id} has no neighbouring episodes on its timeline."
    path = next((memory.get("path") for memory in [*before, *after]), "")
    where = f"path {inline(path)}" if path else "the root path"
    head = (f"{len(before)} episode(s) before and {len(after)} after {memory_id} on the "
            f"timeline of {where}, oldest first:")
    blocks = [*(format_memory(memory, on_timeline=True) for memory in before),
              f"(here: {memory_id})",
              *(format_memory(memory, on_timeline=True) for memory in after)]
    return head + "\n\n" + "\n\n".join(blocks)


def format_stats(stats: dict) -> str:
    lines = []
    if "total" in stats:
        lines.append(f"Memories: {stats['total']} total ({stats.get('verified', '?')} verified, "
                     f"{stats.get('unverified', '?')} unverified)")
    for name, value in stats.items():
        if name in ("total", "verified", "unverified"):
            continue
        label = name.replace("_", " ")
        if isinstance(value, dict):
            parts = ", ".join(f"{key} {count}" for key, count in value.items())
            lines.append(f"{label.capitalize()}: {parts or 'none'}")
        elif not isinstance(value, list):
            lines.append(f"{label.capitalize()}: {value}")
    return "\n".join(lines)


def describe_store(result: dict, category: str) -> str:
    """A store's answer, naming the version stored as its citation (``mem_…@vN``)."""
    memory_id, cited = result.get("id"), cite(result)
    return {
        "stored": f"Stored {cited} ({category}).",
        "updated": f"Updated {memory_id}: now {cited}.",
        "unchanged": f"Unchanged: {cited} already holds exactly this.",
    }.get(result.get("status"), f"{result.get('status')}: {cited}")
