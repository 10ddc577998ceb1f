"""Web UI for memories: browser (by path and type), memory page with diffs and timeline
neighbours, editing, actions, episode timelines, trash, stats.

The verification queue is memories.queue_views."""

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.postgres.search import SearchRank
from django.core.paginator import Paginator
from django.db.models import CharField, Count, F, Func, Value
from django.db.models.functions import Substr, TruncDate
from django.http import Http404, QueryDict
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from memories.audit import by_member, written_by_member
from memories.charts import TIMELINE_DAYS, TIMELINE_SIZES, bar_chart, daily_totals, timeline_chart
from memories.crypto import CredentialsUnreadable
from memories.diff import DiffTooCostly, content_diff, field_changes
from memories.filters import MemoryFilter
from memories.forms import (
    MemoryFilterForm,
    MemoryForm,
    PlaceFilterForm,
    ResetForm,
    RevertForm,
    TimelineForm,
    VersionForm,
)
from memories.models import (
    AuditEvent,
    Memory,
    MemoryType,
    MemoryVersion,
    Priority,
)
from memories.paths import path_prefixes
from memories.query import QuerySyntaxError, parse_query, search_query
from memories.quotas import QuotaExceeded
from memories.recall import display_content
from memories.services import (
    MemoryConflict,
    OccurredAtNotEpisodic,
    VersionConflict,
    memory_delete,
    memory_reset,
    memory_restore,
    memory_revert,
    memory_set_verified,
    memory_store,
    memory_update,
)
from memories.stats import mind_stats
from memories.timeline import neighbours, timeline, timeline_page
from minds.access import Action
from minds.models import Membership
from minds.views import MindView
from synapse.provenance import CLAIM_FILTERS, claim_filters

PAGE_SIZE = 25
VERSIONS_PAGE_SIZE = 25
# A card shows this much of a memory (400 characters, 4 lines); longer ones unfold.
SHOWN_CHARACTERS = 400
SHOWN_LINES = 4


# Paths directly below the current one listed at most; episodes on a timeline page, and
# before an episode when the timeline opens at it; neighbours on an episode's page.
CHILD_PATHS_SHOWN = 100
TIMELINE_PAGE_SIZE = 25
TIMELINE_CONTEXT = 5
NEIGHBOURS = 3
NOT_EPISODIC = ("Only episodic memories happen at a moment: choose the type episodic, or "
                "leave “Occurred at” empty.")


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


def child_paths(memories, path: str, query) -> list[dict]:
    """The paths directly below ``path`` that hold any of ``memories`` (at that path or
    further down), each with how many and the link ``query(path)``: one grouped query
    over the path column, whatever the number of memories or paths."""
    prefix = f"{path}/" if path else ""
    below = memories.filter(path__startswith=prefix) if path else memories.exclude(path="")
    segment = Func(Substr("path", len(prefix) + 1), Value("/"), Value(1),
                   function="split_part", output_field=CharField())
    rows = (below.order_by().annotate(child=segment).values("child")
            .annotate(count=Count("id")).order_by("child")[:CHILD_PATHS_SHOWN])
    return [{"name": row["child"], "count": row["count"],
             "query": query(prefix + row["child"])} for row in rows]


def crumbs(path: str, query, root: str) -> list[dict]:
    """``path`` as a breadcrumb: the root (labelled ``root``), then each segment, each with
    the link ``query(the path up to it)``; the last one is the current path."""
    return [{"label": prefix.rpartition("/")[2] or root, "path": prefix,
             "query": query(prefix)} for prefix in path_prefixes(path)]


def with_params(params, **changes) -> str:
    """The query string ``params`` (a QueryDict) with ``changes`` (a blank value drops the
    parameter) and without ``page``."""
    params = params.copy()
    params.pop("page", None)
    for name, value in changes.items():
        if value:
            params[name] = value
        else:
            params.pop(name, None)
    return params.urlencode()


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
        path = filters.get("path", "")  # an invalid path drops the filter, with its error
        memories = MemoryFilter(queryset=self.memories().current(), data={
            "category": filters.get("category"), "priority": filters.get("priority"),
            "tag": filters.get("tag"), "memory_type": filters.get("memory_type"),
            "path": path,
            "verified": {"yes": True, "no": False}.get(filters.get("verified"))}).qs
        query, syntax_error, tsquery = filters.get("q", ""), "", None
        if query:
            try:
                tsquery = search_query(parse_query(query, self.mind.search_config))
                memories = memories.matching(query, self.mind.search_config)
            except QuerySyntaxError as error:
                syntax_error, memories = str(error), memories.none()

        def at(place: str) -> str:
            return with_params(request.GET, path=place)

        children = child_paths(memories, path, at)
        if tsquery is not None:
            memories = (memories.annotate(rank=SearchRank(F("search_vector"), tsquery))
                        .order_by("-rank", "-updated_at", "id"))
        else:
            memories = memories.order_by("-updated_at", "id")
        page = Paginator(memories, PAGE_SIZE).get_page(request.GET.get("page"))
        page.object_list = listed(page.object_list)
        active = {name: value for name, value in filters.items() if value}
        return self.render("memories/browser.html", {
            "form": form, "page": page, "filtered": bool(active), "query": query,
            "filter_count": len(set(active) - {"q"}),
            "syntax_error": syntax_error,
            "total": self.memories().current().count() if active else page.paginator.count,
            "page_query": with_params(request.GET),
            "path": path, "children": children,
            "crumbs": crumbs(path, at, "All paths") if path or children else [],
            "new_query": with_params(QueryDict(), path=path,
                                     memory_type=filters.get("memory_type")),
        })


class MemoryCreateView(MemoryPageView):
    """A human writes a memory (stored as source=user, verified)."""

    mind_action = Action.WRITE

    tab = "memories"

    def get(self, request, mind_id, form=None):
        if form is None:
            # "New memory" from a path of the browser starts there (and with its type).
            place = PlaceFilterForm(request.GET)
            place.is_valid()
            form = MemoryForm(initial={name: place.cleaned_data[name]
                                       for name in ("path", "memory_type")
                                       if place.cleaned_data.get(name)})
            return self.render("memories/memory_form.html", {"form": form, "creating": True})
        return self.render("memories/memory_form.html", {
            "form": form, "creating": True}, status=400)

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
                                  expires_given=True, memory_type=data["memory_type"] or None,
                                  path=data["path"], occurred_at=data["occurred_at"])
        except OccurredAtNotEpisodic:
            form.add_error("occurred_at", NOT_EPISODIC)
            return self.get(request, mind_id, form=form)
        except QuotaExceeded as refused:
            form.add_error(None, str(refused))
            return self.get(request, mind_id, form=form)
        verb = {"stored": "Stored", "updated": "Updated the existing",
                "unchanged": "Nothing new in"}[result.status]
        messages.success(request, f"{verb} memory {result.memory.category}/{result.memory.key}.")
        return redirect("ui:memory", mind_id=self.mind.id, memory_id=result.memory.id)


ACTIVITY_LIMIT = 20
# Audit actions as the memory page words them.
ACTIONS = {"store": "stored it", "update": "edited it", "verify": "verified it",
           "unverify": "unverified it", "delete": "moved it to the trash",
           "bulk_delete": "moved it to the trash", "restore": "restored it",
           "revert": "reverted it", "sync": "synced it", "import": "imported it",
           "compact": "compacted it", "uncompact": "undid its compaction"}


def claim_filter(request) -> tuple[dict, dict]:
    """The ?agent= and ?instance= filters of the memory page's versions and activity and of
    the mind's activity page (as the API's): the field lookups, and the template's
    context of the filter form (memories/_claim_filter.html)."""
    claimed = claim_filters(request.GET)
    return claimed, {"claim_filter": {param: request.GET.get(param, "").strip()
                                      for param in CLAIM_FILTERS},
                     "claim_filtered": bool(claimed)}


def member_filter(request, mind) -> tuple[int | None, dict]:
    """The ?member= filter (a user id) of the mind's activity page and the memory page's
    versions and activity (as the API's ``member``): the id, or None for anyone (a value
    that is no id filters nothing), and the template's context: the mind's members for
    its select (one query)."""
    raw = request.GET.get("member", "").strip()
    member = int(raw) if raw.isdigit() and len(raw) < 12 else None
    members = list(Membership.objects.filter(mind=mind).select_related("user")
                   .order_by("user__username"))
    return member, {"members": members, "member_filter": member}


class ActivityView(MemoryPageView):
    """Every change of the mind, newest first (its audit events), filtered by the member
    who made it or by the agent or instance the writing request claimed, as
    ``GET /memory/audit?member=&agent=&instance=``."""

    tab = "activity"

    def get(self, request, mind_id):
        claimed, filter_form = claim_filter(request)
        member, member_form = member_filter(request, self.mind)
        events = (AuditEvent.objects.filter(mind=self.mind, **claimed, **by_member(member))
                  .order_by("-created_at", "-id"))
        page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
        # The page's memories in one query: purged ones (and any this request does not
        # reach) are named by id only.
        ids = {event.memory_id for event in page.object_list if event.memory_id}
        named = {memory.id: memory for memory in
                 self.memories().filter(pk__in=ids).only("id", "category", "key")}
        params = request.GET.copy()
        params.pop("page", None)
        return self.render("memories/activity.html", {
            "events": [(event, ACTIONS.get(event.action, event.action.replace("_", " ")),
                        named.get(event.memory_id)) for event in page.object_list],
            "page": page, "page_query": params.urlencode(), "page_anchor": "",
            **filter_form, **member_form})


class MemoryDetailView(MemoryPageView):
    """One memory: metadata, plaintext content, versions and a diff between two of them."""

    tab = "memories"

    def get(self, request, mind_id, memory_id):
        memory = self.get_memory(memory_id)
        # ?agent= and ?instance= keep the versions and activity whose request claimed them.
        claimed, filter_form = claim_filter(request)
        member, member_form = member_filter(request, self.mind)
        # A page of the history, newest first; the diff reads only the two versions it shows.
        page = Paginator(memory.versions.filter(**claimed, **written_by_member(member))
                         .order_by("-version"),
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
        activity = (AuditEvent.objects.filter(mind=self.mind, memory_id=memory.id, **claimed,
                                              **by_member(member))
                    .order_by("-created_at", "-id")[:ACTIVITY_LIMIT])
        params = request.GET.copy()
        params.pop("page", None)
        around = None
        if memory.memory_type == MemoryType.EPISODIC and memory.occurred_at is not None:
            earlier, later = neighbours(memory, NEIGHBOURS)
            around = {"earlier": earlier, "later": later,
                      "on_timeline": memory.deleted_at is None and memory.superseded_at is None}
        return self.render("memories/memory_detail.html", {
            "around": around,
            "activity": [(event, ACTIONS.get(event.action, event.action.replace("_", " ")))
                         for event in activity],
            "memory": memory, "content": _revealed(memory), "versions": page.object_list,
            "page": page, "page_query": params.urlencode(), "page_anchor": "versions",
            "newest_version": newest, "diff": diff,
            **filter_form, **member_form,
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


def _moved(posted: datetime | None, stored: datetime | None) -> bool:
    """Whether the editor's "Occurred at" asks for another moment than the stored one,
    which it showed to the second."""
    if posted is None:
        return False
    return stored is None or posted != stored.replace(microsecond=0)


def _int(raw, default: int) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return default


class MemoryEditView(MemoryPageView):
    mind_action = Action.WRITE
    tab = "memories"

    def get(self, request, mind_id, memory_id, form=None):
        memory = self.get_memory(memory_id)
        if memory.deleted_at is not None:
            messages.error(request, "This memory is in the trash; restore it to edit it.")
            return redirect("ui:memory", mind_id=self.mind.id, memory_id=memory.id)
        form = form or MemoryForm(initial={
            **{name: getattr(memory, name) for name in
               ("category", "key", "tags", "priority", "confidence", "expires_at",
                "memory_type", "path")},
            "occurred_at": memory.occurred_at or "", "content": _revealed(memory)})
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
        if not data["memory_type"]:
            del data["memory_type"]  # "default for the category": the type stays
        if not _moved(data["occurred_at"], memory.occurred_at):
            # Left as shown (to the second) or emptied: the moment stays, and goes away with
            # the episodic type if that changes.
            del data["occurred_at"]
        try:
            memory, changed = memory_update(memory=memory, actor=request.user, **data)
        except OccurredAtNotEpisodic:
            form.add_error("occurred_at", NOT_EPISODIC)
            return self.get(request, mind_id, memory_id, form=form)
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


class TimelineView(MemoryPageView):
    """The episodes of one path in the order they happened (sub-paths have their own
    timelines, listed): a page from the start, before or after an episode, at the end,
    or around one episode (``at``)."""

    tab = "memories"

    def get(self, request, mind_id):
        form = TimelineForm(request.GET)
        if not form.is_valid():
            return self.render("memories/timeline.html", {
                "form": form, "episodes": [], "path": "", "crumbs": [], "children": []},
                status=400)
        data = form.cleaned_data
        path = data["path"]
        episodes = timeline(self.mind, path).without_vectors()
        earlier = later = False  # more episodes before the first shown, after the last
        current = None
        if data["at"]:
            current = self._episode(episodes, data["at"])
            before = timeline_page(episodes, limit=TIMELINE_CONTEXT, before=current)
            after = timeline_page(episodes, limit=TIMELINE_PAGE_SIZE - TIMELINE_CONTEXT - 1,
                                  after=current)
            shown, earlier, later = ([*before.memories, current, *after.memories],
                                     before.has_more, after.has_more)
        elif data["after"]:
            page = timeline_page(episodes, limit=TIMELINE_PAGE_SIZE,
                                 after=self._episode(episodes, data["after"]))
            shown, earlier, later = page.memories, True, page.has_more
        elif data["before"]:
            page = timeline_page(episodes, limit=TIMELINE_PAGE_SIZE,
                                 before=self._episode(episodes, data["before"]))
            shown, earlier, later = page.memories, page.has_more, True
        elif data["end"]:
            page = timeline_page(episodes, limit=TIMELINE_PAGE_SIZE,
                                 before=datetime.max.replace(tzinfo=UTC))
            shown, earlier = page.memories, page.has_more
        else:
            page = timeline_page(episodes, limit=TIMELINE_PAGE_SIZE)
            shown, later = page.memories, page.has_more
        here = QueryDict(mutable=True)
        here["path"] = path

        def timeline_at(place: str) -> str:
            return with_params(QueryDict(), path=place)

        return self.render("memories/timeline.html", {
            "form": form, "path": path, "episodes": listed(shown),
            "current_id": current.id if current else "",
            "earlier_query": with_params(here, before=shown[0].id) if earlier and shown else "",
            "later_query": with_params(here, after=shown[-1].id) if later and shown else "",
            "start_query": with_params(here), "end_query": with_params(here, end="1"),
            "crumbs": crumbs(path, timeline_at, "Root"),
            "children": child_paths(Memory.objects.for_mind(self.mind).current().episodes(),
                                    path, timeline_at),
            "browse_query": with_params(QueryDict(), path=path),
        })

    @staticmethod
    def _episode(episodes, memory_id: str) -> Memory:
        episode = episodes.filter(pk=memory_id).first()
        if episode is None:
            raise Http404("No such episode on this timeline.")
        return episode


class TrashView(MemoryPageView):
    tab = "trash"

    def get(self, request, mind_id):
        trashed = self.memories().in_trash().order_by("-deleted_at", "id")
        page = Paginator(trashed, PAGE_SIZE).get_page(request.GET.get("page"))
        page.object_list = listed(page.object_list)
        return self.render("memories/trash.html", {
            "page": page, "retention_days": settings.SYNAPSE["TRASH_RETENTION_DAYS"]})


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


class ResetView(MemoryPageView):
    """Reset a scope: every memory under a path (optionally of one type or category)
    purged for good, with the path typed again; the counts shown afterwards."""

    mind_action = Action.MANAGE

    tab = "settings"

    def get(self, request, mind_id, form=None):
        return self.render("memories/reset.html", {"form": form or ResetForm()},
                           status=400 if form is not None else 200)

    def post(self, request, mind_id):
        form = ResetForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        data = form.cleaned_data
        counts = memory_reset(mind=self.mind, actor=request.user, path=data["path"],
                              memory_type=data["memory_type"] or None,
                              category=data["category"] or None)
        messages.success(request, (
            f"Reset {data['path']}: purged {counts['memories']} memories and "
            f"{counts['versions']} versions; {counts['tombstones']} tombstones keep sync from "
            f"bringing them back; {counts['audit_events_scrubbed']} audit entries scrubbed."))
        return redirect("ui:reset", mind_id=self.mind.id)
