"""Web UI for memories: browser, verification queue, memory page with diffs, trash, stats."""

import re
from dataclasses import dataclass, field
from datetime import timedelta
from difflib import SequenceMatcher

from django.conf import settings
from django.contrib import messages
from django.contrib.postgres.search import SearchRank
from django.core.paginator import Paginator
from django.db.models import Count, F
from django.db.models.functions import TruncDate
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from memories.crypto import CredentialsUnreadable
from memories.forms import (
    MemoryFilterForm,
    MemoryForm,
    RevertForm,
    VerifySelectionForm,
    VersionForm,
)
from memories.models import (
    VERSIONED_FIELDS,
    AuditEvent,
    Memory,
    MemoryVersion,
    Priority,
    Source,
)
from memories.quotas import QuotaExceeded
from memories.recall import display_content
from memories.search import QuerySyntaxError, parse_query, search_query
from memories.services import (
    MemoryConflict,
    VersionConflict,
    memory_delete,
    memory_restore,
    memory_revert,
    memory_set_verified,
    memory_store,
    memory_update,
    memory_verify_many,
)
from memories.stats import mind_stats
from minds.views import MindView

PAGE_SIZE = 25
VERSIONS_PAGE_SIZE = 25
QUEUE_PAGE_SIZE = 50
# A card shows this much of a memory (400 characters, 4 lines); longer ones unfold.
SHOWN_CHARACTERS = 400
SHOWN_LINES = 4
RECENTLY_VERIFIED = timedelta(hours=24)


REDACTED_IN_UI = "Credentials are hidden in lists — open the memory to reveal them."
UNREADABLE = ("[This credentials memory cannot be decrypted with the configured "
              "SYNAPSE_CREDENTIALS_KEYS.]")


def listed(memories) -> list[Memory]:
    """Memories as lists show them: what recall redacts is hidden here too."""
    rows = list(memories)
    for memory in rows:
        shown = display_content(memory)
        memory.shown_content = shown if shown == memory.content else REDACTED_IN_UI
        # More than a card shows at once: the queue puts the whole text behind <details>.
        memory.shown_long = (len(memory.shown_content) > SHOWN_CHARACTERS
                             or memory.shown_content.count("\n") >= SHOWN_LINES)
    return rows


class MemoryPageView(MindView):
    """A page of one mind that may act on one of its memories."""

    def memories(self):
        return Memory.objects.for_mind(self.mind).without_vectors()

    def get_memory(self, memory_id: str) -> Memory:
        """A memory of this mind, in the trash or not; any other id is a 404."""
        memory = self.memories().select_related("verified_by").filter(pk=memory_id).first()
        if memory is None:
            raise Http404("No such memory.")
        return memory

    def back(self, fallback: str):
        """Redirect to the page the form came from (same site only), else ``fallback``."""
        target = self.request.POST.get("next", "")
        if target and url_has_allowed_host_and_scheme(
                target, allowed_hosts={self.request.get_host()},
                require_https=self.request.is_secure()):
            return redirect(target)
        return redirect(fallback)


class MemoryBrowserView(MemoryPageView):
    """Current memories of a mind: full-text search, filters, pagination."""

    tab = "memories"

    def get(self, request, mind_id):
        form = MemoryFilterForm(request.GET)
        form.is_valid()
        filters = form.cleaned_data  # the valid ones: a bad value drops only its own filter
        memories = self.memories().current()
        if filters.get("category"):
            memories = memories.filter(category=filters["category"])
        if filters.get("priority"):
            memories = memories.filter(priority=filters["priority"])
        if filters.get("tag"):
            memories = memories.filter(tags__contains=[filters["tag"]])
        if filters.get("verified"):
            memories = memories.filter(verified=filters["verified"] == "yes")
        query, syntax_error = filters.get("q", ""), ""
        if query:
            try:
                tsquery = search_query(parse_query(query))
                memories = (memories.matching(query)
                            .annotate(rank=SearchRank(F("search_vector"), tsquery))
                            .order_by("-rank", "-updated_at", "id"))
            except QuerySyntaxError as error:
                syntax_error, memories = str(error), memories.none()
        else:
            memories = memories.order_by("-updated_at", "id")
        page = Paginator(memories, PAGE_SIZE).get_page(request.GET.get("page"))
        page.object_list = listed(page.object_list)
        active = {name: value for name, value in filters.items() if value}
        params = request.GET.copy()
        params.pop("page", None)
        return self.render("memories/browser.html", {
            "form": form, "page": page, "filtered": bool(active), "query": query,
            "filter_count": len(set(active) - {"q"}),
            "syntax_error": syntax_error,
            "total": self.memories().current().count() if active else page.paginator.count,
            "page_query": params.urlencode(),
        })


class MemoryCreateView(MemoryPageView):
    """A human writes a memory (stored as source=user, verified)."""

    tab = "memories"

    def get(self, request, mind_id, form=None):
        return self.render("memories/memory_form.html", {
            "form": form or MemoryForm(), "creating": True,
        }, status=400 if form is not None else 200)

    def post(self, request, mind_id):
        form = MemoryForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        data = form.cleaned_data
        try:
            result = memory_store(mind=self.mind, actor=request.user, category=data["category"],
                                  key=data["key"] or None, content=data["content"],
                                  tags=data["tags"], priority=data["priority"],
                                  confidence=data["confidence"], expires_at=data["expires_at"],
                                  expires_given=True)
        except QuotaExceeded as refused:
            form.add_error(None, str(refused))
            return self.get(request, mind_id, form=form)
        verb = {"stored": "Stored", "updated": "Updated the existing",
                "unchanged": "Nothing new in"}[result.status]
        messages.success(request, f"{verb} memory {result.memory.category}/{result.memory.key}.")
        return redirect("ui:memory", mind_id=self.mind.id, memory_id=result.memory.id)


class QueueView(MemoryPageView):
    """The verification queue: unverified memories in recall, oldest first."""

    tab = "queue"

    def get(self, request, mind_id, form=None, status: int = 400):
        pending = self.memories().awaiting_verification().order_by("created_at", "id")
        page = Paginator(pending, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
        page.object_list = listed(page.object_list)
        # Just verified agent memories stay in reach, so a hasty verify can be undone here.
        recent = (self.memories().current().filter(
            verified=True, verified_at__gte=timezone.now() - RECENTLY_VERIFIED)
            .exclude(source=Source.USER).order_by("-verified_at")[:5])
        return self.render("memories/queue.html", {
            "page": page, "form": form, "recently_verified": listed(recent),
        }, status=status if form is not None else 200)


class BulkVerifyView(QueueView):
    """Verify a selection, each memory at the version the page showed; all or nothing."""

    def post(self, request, mind_id):
        form = VerifySelectionForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        seen = form.cleaned_data["ids"]
        try:
            memory_verify_many(mind=self.mind, user=request.user, seen=seen)
        except VersionConflict as conflict:
            form.add_error("ids", conflict.naming_each())
            return self.get(request, mind_id, form=form, status=409)
        verified = len(seen)
        messages.success(request, f"Verified {verified} memor{'y' if verified == 1 else 'ies'}.")
        return self.back(reverse("ui:queue", kwargs={"mind_id": self.mind.id}))


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
    """(field, before, after) for every versioned field other than content that differs."""
    changes = []
    for name in VERSIONED_FIELDS:
        if name == "content":
            continue
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            changes.append((name, _shown(before), _shown(after)))
    return changes


def _shown(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(value) or "—"
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return str(value)


ACTIVITY_LIMIT = 20
# Audit actions as the memory page words them.
ACTIONS = {"store": "stored it", "update": "edited it", "verify": "verified it",
           "unverify": "unverified it", "delete": "moved it to the trash",
           "bulk_delete": "moved it to the trash", "restore": "restored it",
           "revert": "reverted it", "sync": "synced it", "import": "imported it",
           "compact": "compacted it", "uncompact": "undid its compaction"}


class MemoryDetailView(MemoryPageView):
    """One memory: metadata, plaintext content, versions and a diff between two of them."""

    tab = "memories"

    def get(self, request, mind_id, memory_id):
        memory = self.get_memory(memory_id)
        # A page of the history, newest first; the diff reads only the two versions it shows.
        page = Paginator(memory.versions.order_by("-version"),
                         VERSIONS_PAGE_SIZE).get_page(request.GET.get("page"))
        newest = memory.versions.order_by("-version").values_list("version", flat=True).first()
        to_version = _int(request.GET.get("to"), newest or 0)
        from_version = _int(request.GET.get("from"), to_version - 1)
        by_number = {version.version: version for version in
                     memory.versions.filter(version__in=[from_version, to_version])}
        diff = None
        if from_version in by_number and to_version in by_number and from_version != to_version:
            old, new = by_number[from_version], by_number[to_version]
            diff = {"old": old, "new": new, "fields": field_changes(old, new)}
            try:
                diff["lines"] = content_diff(_revealed(old), _revealed(new))
            except DiffTooCostly:
                # Too long or repetitive to match within the budget: both texts, unmatched.
                diff["side_by_side"] = (_revealed(old), _revealed(new))
        now = timezone.now()
        activity = (AuditEvent.objects.filter(mind=self.mind, memory_id=memory.id)
                    .order_by("-created_at", "-id")[:ACTIVITY_LIMIT])
        params = request.GET.copy()
        params.pop("page", None)
        return self.render("memories/memory_detail.html", {
            "activity": [(event, ACTIONS.get(event.action, event.action.replace("_", " ")))
                         for event in activity],
            "memory": memory, "content": _revealed(memory), "versions": page.object_list,
            "page": page, "page_query": params.urlencode(), "page_anchor": "versions",
            "newest_version": newest, "diff": diff,
            "from_version": from_version, "to_version": to_version,
            "expired": memory.expires_at is not None and memory.expires_at <= now,
            "superseded_by": (self.memories().filter(pk=memory.superseded_by_id).first()
                              if memory.superseded_by_id else None),
        })


def _revealed(memory: Memory | MemoryVersion) -> str:
    """The plaintext the owner asked to see (credentials decrypted), or why it cannot be."""
    try:
        return memory.plaintext_content()
    except CredentialsUnreadable:
        return UNREADABLE


def _int(raw, default: int) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default


class MemoryEditView(MemoryPageView):
    tab = "memories"

    def get(self, request, mind_id, memory_id, form=None):
        memory = self.get_memory(memory_id)
        if memory.deleted_at is not None:
            messages.error(request, "This memory is in the trash; restore it to edit it.")
            return redirect("ui:memory", mind_id=self.mind.id, memory_id=memory.id)
        form = form or MemoryForm(initial={
            **{name: getattr(memory, name) for name in
               ("category", "key", "tags", "priority", "confidence", "expires_at")},
            "content": _revealed(memory)})
        return self.render("memories/memory_form.html", {
            "form": form, "memory": memory, "next": request.GET.get("next", ""),
        }, status=400 if form.errors else 200)

    def post(self, request, mind_id, memory_id):
        memory = self.get_memory(memory_id)
        if memory.deleted_at is not None:
            return self.get(request, mind_id, memory_id)
        form = MemoryForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, memory_id, form=form)
        data = dict(form.cleaned_data)
        data["key"] = data["key"] or memory.key
        try:
            memory, changed = memory_update(memory=memory, actor=request.user, **data)
        except MemoryConflict as conflict:
            form.add_error("key", str(conflict))
            return self.get(request, mind_id, memory_id, form=form)
        except QuotaExceeded as refused:
            form.add_error(None, str(refused))
            return self.get(request, mind_id, memory_id, form=form)
        if changed:
            messages.success(request, f"Saved version {memory.version}.")
        else:
            messages.info(request, "Nothing changed.")
        return self.back(reverse("ui:memory", kwargs={"mind_id": self.mind.id,
                                                      "memory_id": memory.id}))


class MemoryActionView(MemoryPageView):
    """POST-only actions on one memory: verify, unverify, delete, restore, revert."""

    def post(self, request, mind_id, memory_id, action):
        memory = self.get_memory(memory_id)
        here = reverse("ui:memory", kwargs={"mind_id": self.mind.id, "memory_id": memory.id})
        label = f"{memory.category}/{memory.key}"
        if action == "verify":
            return self._verify(memory, label, here)
        if action == "unverify":
            memory_set_verified(memory=memory, user=request.user, verified=False)
            messages.success(request, f"Unverified {label}.")
        elif action == "delete":
            memory_delete(memory=memory, actor=request.user)
            messages.success(request, f"Moved {label} to the trash.")
        elif action == "restore":
            try:
                memory_restore(memory=memory, actor=request.user)
            except MemoryConflict:
                messages.error(request, self._reused_message(memory, label),
                               extra_tags="conflict")
                return self.back(here)
            messages.success(request, f"Restored {label}.")
        elif action == "revert":
            return self._revert(memory, here)
        else:
            raise Http404("No such action.")
        return self.back(here)

    def _reused_message(self, memory: Memory, label: str) -> str:
        taken = (self.memories().alive().exclude(pk=memory.pk)
                 .filter(category=memory.category, key=memory.key).first())
        message = (f"Cannot restore {label}: the key was reused by another memory while this "
                   "one was in the trash. Rename or delete that one first")
        if taken is None:
            return message + "."
        return format_html('{}: <a href="{}">{}</a>.', message,
                           reverse("ui:memory", kwargs={"mind_id": self.mind.id,
                                                        "memory_id": taken.id}),
                           f"{taken.category}/{taken.key}")

    def _verify(self, memory: Memory, label: str, here: str):
        # The page sends the version it showed; an edit since then is not verified blind.
        form = VersionForm(self.request.POST)
        if not form.is_valid():
            messages.error(self.request, f"Not verified: reload {label} and verify the "
                                         "version you read.", extra_tags="conflict")
            return self.back(here)
        try:
            memory_set_verified(memory=memory, user=self.request.user, verified=True,
                                version=form.cleaned_data["version"])
        except VersionConflict as conflict:
            messages.error(self.request, f"Not verified: {conflict}", extra_tags="conflict")
            return self.back(here)
        messages.success(self.request, f"Verified {label} (version "
                                       f"{form.cleaned_data['version']}).")
        return self.back(here)

    def _revert(self, memory: Memory, here: str):
        form = RevertForm(self.request.POST)
        if not form.is_valid():
            messages.error(self.request, "Choose a version to revert to.")
            return redirect(here)
        version = form.cleaned_data["version"]
        try:
            reverted = memory_revert(memory=memory, actor=self.request.user, version=version)
        except MemoryVersion.DoesNotExist:
            messages.error(self.request, f"There is no version {version}.")
        except (MemoryConflict, QuotaExceeded) as refused:
            messages.error(self.request, str(refused))
        else:
            messages.success(self.request, f"Reverted to version {version}; that is now "
                                           f"version {reverted.version}.")
        return redirect(here)


class TrashView(MemoryPageView):
    tab = "trash"

    def get(self, request, mind_id):
        trashed = self.memories().in_trash().order_by("-deleted_at", "id")
        page = Paginator(trashed, PAGE_SIZE).get_page(request.GET.get("page"))
        page.object_list = listed(page.object_list)
        return self.render("memories/trash.html", {
            "page": page, "retention_days": settings.SYNAPSE["TRASH_RETENTION_DAYS"]})


# -- Statistics: charts drawn as SVG on the server ---------------------------------------

BAR_CHART_WIDTH = 440
BAR_HEIGHT = 28
LABEL_WIDTH = 96
TIMELINE_DAYS = 30
# The timeline is drawn twice, for wide and for narrow screens (CSS shows one), so its
# text keeps a readable size instead of shrinking with the picture.
TIMELINE_SIZES = {"wide": (960, 240), "narrow": (360, 200)}


def bar_chart(counts: dict[str, int]) -> dict:
    """Geometry of a horizontal bar chart: one row per label, in the given order."""
    top = max(counts.values(), default=0) or 1
    track = BAR_CHART_WIDTH - LABEL_WIDTH - 40
    bars = []
    for row, (label, value) in enumerate(counts.items()):
        width = round(track * value / top, 1)
        bars.append({"label": label, "value": value, "y": row * BAR_HEIGHT,
                     "width": max(width, 2 if value else 0), "value_x": LABEL_WIDTH + width + 6})
    return {"bars": bars, "height": len(bars) * BAR_HEIGHT, "width": BAR_CHART_WIDTH,
            "label_width": LABEL_WIDTH, "label_x": LABEL_WIDTH - 10, "track": track}


def daily_totals(daily: dict, start, days: int, before: int) -> list[tuple]:
    """(day, memories at the end of it, added that day) for ``days`` days from ``start``."""
    running, points = before, []
    for offset in range(days):
        day = start + timedelta(days=offset)
        running += daily.get(day, 0)
        points.append((day, running, daily.get(day, 0)))
    return points


def timeline_chart(points: list[tuple], width: int, height: int) -> dict:
    """Geometry of a line chart of the daily totals, with an area under the line."""
    left, bottom, top_pad, right_pad = 40, 26, 12, 12
    plot_w, plot_h = width - left - right_pad, height - bottom - top_pad
    scale = _nice_ceiling(max((total for _day, total, _added in points), default=0))
    step = plot_w / max(len(points) - 1, 1)

    def y_of(value: int) -> float:
        return round(top_pad + plot_h - plot_h * value / scale, 1)

    coords = [(round(left + index * step, 1), y_of(total))
              for index, (_day, total, _added) in enumerate(points)]
    line = " ".join(f"{x},{y}" for x, y in coords)
    last = len(points) - 1
    return {
        "width": width, "height": height, "left": left, "right": width - right_pad,
        "line": line, "area": f"{left},{y_of(0)} {line} {coords[-1][0]},{y_of(0)}",
        "ticks": [{"y": y_of(value), "label": value} for value in (0, scale // 2, scale)],
        "labels": [{"x": coords[index][0], "label": points[index][0].strftime("%b %-d"),
                    "anchor": anchor}
                   for index, anchor in ((0, "start"), (last // 2, "middle"), (last, "end"))],
        "dots": [{"x": x, "y": y, "day": day, "total": total, "added": added}
                 for (x, y), (day, total, added) in zip(coords, points, strict=True) if added],
        "label_y": height - 6,
    }


def _nice_ceiling(value: int) -> int:
    """The smallest of 2, 4, 10, 20, 40, 100… at or above ``value`` (even, so halves are whole)."""
    ceiling = 2
    while ceiling < value:
        ceiling = ceiling * 5 // 2 if str(ceiling).startswith("4") else ceiling * 2
    return ceiling


class StatsView(MemoryPageView):
    tab = "stats"

    def get(self, request, mind_id):
        now = timezone.now()
        stats = mind_stats(mind=self.mind)
        current = self.memories().current()
        start = (now - timedelta(days=TIMELINE_DAYS - 1)).date()
        daily = dict(current.filter(created_at__date__gte=start)
                     .annotate(day=TruncDate("created_at")).values_list("day")
                     .annotate(n=Count("id")))
        before = current.filter(created_at__date__lt=start).count()
        points = daily_totals(daily, start, TIMELINE_DAYS, before)
        return self.render("memories/stats.html", {
            "totals": {name: stats[name] for name in ("total", "verified", "expired")},
            "unverified": stats["unverified"],
            "trash": stats["in_trash"],
            "by_category": bar_chart(stats["by_category"]),
            "by_priority": bar_chart({p: stats["by_priority"][p]
                                      for p in reversed(Priority.values)}),
            "timelines": {size: timeline_chart(points, width, height)
                          for size, (width, height) in TIMELINE_SIZES.items()},
            "added": sum(added for _day, _total, added in points),
        })
