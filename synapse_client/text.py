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


def format_memory(memory: dict, *, detail: bool = False, extra: str = "") -> str:
    """One memory as a block headed by its id."""
    status = "verified" if memory.get("verified") else "unverified"
    header = (f"[{inline(memory.get('id'))}] {inline(memory.get('category'))}/"
              f"{inline(memory.get('key'))} "
              f"({inline(str(memory.get('priority', 'normal')).upper())}) [{status}]{extra}")
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


def format_recall(mind: dict, memories: list[dict], omitted: int, budget: int | None) -> str:
    """Recall with ids; within ``budget`` tokens when one is given (least important cut)."""
    blocks = [format_memory(memory) for memory in memories]

    def render(count: int, left_out: int) -> str:
        shown = memories[:count]
        verified = sum(1 for memory in shown if memory.get("verified"))
        head = (f"Mind: {inline(mind.get('name', '?'))}\n"
                f"Memories: {count} shown ({verified} verified, {count - verified} "
                f"unverified)")
        if left_out:
            head += f"; {left_out} left out to stay within the budget"
        return "\n\n".join([head, *blocks[:count]]) + "\n"

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
    memory_id, version = result.get("id"), result.get("version")
    return {
        "stored": f"Stored {memory_id} ({category}, version {version}).",
        "updated": f"Updated {memory_id} to version {version}.",
        "unchanged": f"Unchanged: {memory_id} already holds exactly this (version {version}).",
    }.get(result.get("status"), f"{result.get('status')}: {memory_id}")
