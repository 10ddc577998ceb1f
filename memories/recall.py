"""Recall: what an agent reads at session start — ordering, token budget, text format.

Text format (SPEC §4), one block per memory, blocks separated by a blank line::

    [001] identity (CRITICAL) [verified]
      user_name
      Michael Schäfer
      Tags: person, identity

Every line of a memory's content is indented by two spaces, so no stored text can start
a line that looks like a block header: the boundary of each memory stays unambiguous
(stored text is data, never instructions).
"""

import math
from dataclasses import dataclass, field

from memories.models import Memory
from minds.models import Mind

REDACTED = "[redacted: credentials are only shown by GET /memory/{id}]"


def estimate_tokens(text: str) -> int:
    """Tokens as LLM tokenizers count them, roughly: one per four characters."""
    return math.ceil(len(text) / 4)


def display_content(memory: Memory) -> str:
    """Content as recall, search and list show it: credentials redacted."""
    return REDACTED.format(id=memory.id) if memory.is_credentials else memory.content


def format_block(position: int, memory: Memory) -> str:
    status = "[verified]" if memory.verified else "[unverified]"
    lines = [f"[{position:03d}] {memory.category} ({memory.priority.upper()}) {status}",
             f"  {memory.key}"]
    lines += [f"  {line}" for line in display_content(memory).splitlines() or [""]]
    if memory.tags:
        lines.append(f"  Tags: {', '.join(memory.tags)}")
    return "\n".join(lines)


def format_header(mind: Mind, memories: list[Memory]) -> str:
    verified = sum(1 for memory in memories if memory.verified)
    return (f"Mind: {mind.name}\n"
            f"Memories: {len(memories)} total ({verified} verified, "
            f"{len(memories) - verified} unverified)")


@dataclass
class Recall:
    mind: Mind
    memories: list[Memory]
    omitted: list[Memory] = field(default_factory=list)
    text: str = ""
    tokens: int = 0


def build_recall(*, mind: Mind, memories: list[Memory], budget: int | None = None) -> Recall:
    """Lay out ``memories`` (already in recall order) within ``budget`` tokens.

    Memories are taken in order while they fit; one that does not fit is left out and
    later (smaller) ones may still fit, so critical memories always go first. The header
    counts what is shown; the total token count never exceeds the budget.
    """
    if budget is None:
        chosen, omitted = list(memories), []
        blocks = [format_block(position, memory) for position, memory in enumerate(chosen, 1)]
    else:
        chosen, omitted, blocks = [], [], []
        used = estimate_tokens(format_header(mind, memories)) + 1
        for memory in memories:
            block = format_block(len(chosen) + 1, memory)
            cost = estimate_tokens(block) + 1  # +1 covers the blank line between blocks
            if used + cost <= budget:
                chosen.append(memory)
                blocks.append(block)
                used += cost
            else:
                omitted.append(memory)
    text = "\n\n".join([format_header(mind, chosen), *blocks]) + "\n"
    result = Recall(mind=mind, memories=chosen, omitted=omitted, text=text,
                    tokens=estimate_tokens(text))
    if budget is not None and result.tokens > budget:
        # The header alone does not fit: answer with nothing rather than exceed it.
        result.memories, result.omitted, result.text, result.tokens = [], list(memories), "", 0
    return result
