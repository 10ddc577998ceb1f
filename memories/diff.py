"""The memory page's diff of two versions: changed lines and words, bounded in work."""

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from memories.models import VERSIONED_FIELDS, MemoryVersion


@dataclass
class DiffLine:
    kind: str  # "same", "del", "ins" or "gap"
    parts: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) pieces
    skipped: int = 0


_TOKENS = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
CONTEXT_LINES = 3
# SequenceMatcher (autojunk off) is cubic at worst: 1,000 lines of "x" against 500 pairs
# of "x", "y" took 52 s. Every diff of one page view shares this much matching work (the
# lines or words it looks at); past it the versions are shown side by side instead, and
# changed lines past their share are shown whole (bench/diff.py has the figures).
DIFF_WORK_BUDGET = 400_000
# Texts longer than this together, or with more lines than this between their unchanged
# first and last lines, are shown side by side without matching at all.
DIFF_MAX_CHARS = 200_000
DIFF_MAX_LINES = 4000
# Word marking within one changed line pair stops at this length (the whole lines show).
WORD_DIFF_MAX_CHARS = 5000


class DiffTooCostly(Exception):
    """Comparing these texts would take more than the page's diff budget."""


class _BoundedMatcher(SequenceMatcher):
    """A SequenceMatcher (autojunk off) that counts the work of its longest-match searches
    — for each item of ``a`` searched, one step plus one per place it occurs in ``b`` —
    and raises DiffTooCostly before a search would take the total past ``budget``."""

    def __init__(self, a: list[str], b: list[str], budget: "DiffBudget"):
        super().__init__(None, a, b, autojunk=False)
        self.budget = budget
        self._work_before = [0]
        for item in a:
            self._work_before.append(self._work_before[-1] + 1 + len(self.b2j.get(item, ())))

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi = len(self.a) if ahi is None else ahi
        self.budget.spend(self._work_before[ahi] - self._work_before[alo])
        return super().find_longest_match(alo, ahi, blo, bhi)


@dataclass
class DiffBudget:
    left: int = DIFF_WORK_BUDGET

    def spend(self, work: int) -> None:
        if work > self.left:
            raise DiffTooCostly
        self.left -= work


def _word_diff(old: str, new: str, budget: DiffBudget) -> tuple[DiffLine, DiffLine]:
    """One changed line as a deleted and an inserted line, changed words marked."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    budget.spend(len(a) + len(b))  # building the matcher
    removed, added = DiffLine("del"), DiffLine("ins")
    for tag, i1, i2, j1, j2 in _BoundedMatcher(a, b, budget).get_opcodes():
        if tag == "equal":
            removed.parts.append(("same", "".join(a[i1:i2])))
            added.parts.append(("same", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            removed.parts.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            added.parts.append(("ins", "".join(b[j1:j2])))
    return removed, added


def _changed_line(old: str, new: str, budget: DiffBudget) -> list[DiffLine]:
    if len(old) + len(new) <= WORD_DIFF_MAX_CHARS:
        try:
            return list(_word_diff(old, new, budget))
        except DiffTooCostly:
            pass  # this pair shows whole; the rest of the diff goes on
    return [DiffLine("del", [("del", old)]), DiffLine("ins", [("ins", new)])]


def content_diff(old: str, new: str) -> list[DiffLine]:
    """A line diff of two texts, words marked within changed lines, long unchanged runs
    folded. Plain text pieces only: the template escapes them. Raises DiffTooCostly when
    the texts are too long or too repetitive to compare within DIFF_WORK_BUDGET (show
    them side by side instead)."""
    if len(old) + len(new) > DIFF_MAX_CHARS:
        raise DiffTooCostly
    a, b = old.splitlines(), new.splitlines()
    # Unchanged lines at both ends cost nothing to find and need no matching.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle_a, middle_b = a[head:len(a) - tail], b[head:len(b) - tail]
    if len(middle_a) + len(middle_b) > DIFF_MAX_LINES:
        raise DiffTooCostly
    budget = DiffBudget()
    opcodes = _BoundedMatcher(middle_a, middle_b, budget).get_opcodes()
    lines = [DiffLine("same", [("same", line)]) for line in a[:head]]
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            lines += [DiffLine("same", [("same", line)]) for line in middle_a[i1:i2]]
        elif tag == "replace" and i2 - i1 == j2 - j1:
            for old_line, new_line in zip(middle_a[i1:i2], middle_b[j1:j2], strict=True):
                lines += _changed_line(old_line, new_line, budget)
        else:
            lines += [DiffLine("del", [("del", line)]) for line in middle_a[i1:i2]]
            lines += [DiffLine("ins", [("ins", line)]) for line in middle_b[j1:j2]]
    lines += [DiffLine("same", [("same", line)]) for line in a[len(a) - tail:]]
    return _fold(lines)


def _fold(lines: list[DiffLine]) -> list[DiffLine]:
    near_change = set()
    for index, line in enumerate(lines):
        if line.kind != "same":
            near_change.update(range(index - CONTEXT_LINES, index + CONTEXT_LINES + 1))
    folded: list[DiffLine] = []
    for index, line in enumerate(lines):
        if line.kind != "same" or index in near_change:
            folded.append(line)
        elif folded and folded[-1].kind == "gap":
            folded[-1].skipped += 1
        else:
            folded.append(DiffLine("gap", skipped=1))
    return folded


def field_changes(old: MemoryVersion, new: MemoryVersion) -> list[tuple[str, str, str]]:
    """(field, before, after) for every versioned field other than content that differs:
    type, path and moment included."""
    changes = []
    for name in VERSIONED_FIELDS:
        if name == "content":
            continue
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            changes.append((name, _shown(name, before), _shown(name, after)))
    return changes


def _shown(name: str, value) -> str:
    if value is None:
        return "—"
    if name == "path":
        return value or "/ (root)"
    if isinstance(value, list):
        return ", ".join(value) or "—"
    if hasattr(value, "strftime"):
        # Episodes of one session are often seconds apart: a moment shows its seconds.
        return value.strftime("%Y-%m-%d %H:%M:%S UTC" if name == "occurred_at"
                              else "%Y-%m-%d %H:%M UTC")
    return str(value)


# The API's marks of a line in a hunk, as in a unified diff.
HUNK_OPS = {"same": " ", "del": "-", "ins": "+"}


def content_hunks(old: str, new: str) -> list[dict]:
    """The API's line diff of two texts: :func:`content_diff` (same bounds, same folding)
    as hunks of changed lines and their context, each ``{"old_start", "new_start",
    "lines": [{"op": " " | "-" | "+", "text"}]}`` (1-based line numbers, as in a unified
    diff). Raises DiffTooCostly as content_diff does."""
    hunks: list[dict] = []
    hunk = None
    old_line = new_line = 1
    for line in content_diff(old, new):
        if line.kind == "gap":
            hunk = None
            old_line += line.skipped
            new_line += line.skipped
            continue
        if hunk is None:
            hunk = {"old_start": old_line, "new_start": new_line, "lines": []}
            hunks.append(hunk)
        hunk["lines"].append({"op": HUNK_OPS[line.kind],
                              "text": "".join(text for _kind, text in line.parts)})
        old_line += line.kind != "ins"
        new_line += line.kind != "del"
    return hunks


def payload_changes(old: dict, new: dict) -> list[dict]:
    """What changed between two versions as the API shows them (memories.export
    .version_payload, content in plaintext or redacted alike): ``{"field", "from", "to"}``
    for each versioned field other than content, then, when the content differs,
    ``{"field": "content", "hunks": […]}`` (:func:`content_hunks`), or
    ``{"field": "content", "too_large": true, "hunks": []}`` past the diff's bounds."""
    changes = [{"field": name, "from": old[name], "to": new[name]}
               for name in VERSIONED_FIELDS if name != "content" and old[name] != new[name]]
    if old["content"] != new["content"]:
        try:
            changes.append({"field": "content", "too_large": False,
                            "hunks": content_hunks(old["content"], new["content"])})
        except DiffTooCostly:
            changes.append({"field": "content", "too_large": True, "hunks": []})
    return changes
