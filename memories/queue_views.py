"""Web UI for the verification queue: a mind's unverified memories (by path and type), and
verifying, unverifying or trashing a selection."""

from datetime import timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from memories.filters import MemoryFilter
from memories.forms import PlaceFilterForm, VerifySelectionForm
from memories.models import AuditEvent, MemoryVersion, Source
from memories.services import (
    VersionConflict,
    memory_trash_many,
    memory_unverify_many,
    memory_verify_many,
)
from memories.views import MemoryPageView, listed, with_params

QUEUE_PAGE_SIZE = 50
RECENTLY_VERIFIED = timedelta(hours=24)
# Who wrote the version a card shows, and who verified it (the last verify event: a deleted
# account's pseudonym too), as subqueries of the page's one query.
WRITTEN_BY = Subquery(MemoryVersion.objects.filter(
    memory=OuterRef("pk"), version=OuterRef("version")).values("recorded_by")[:1])
VERIFIED_BY = Subquery(AuditEvent.objects.filter(
    mind=OuterRef("mind"), memory_id=OuterRef("pk"), action="verify")
    .order_by("-created_at", "-id").values("actor_label")[:1])


class QueueView(MemoryPageView):
    """The verification queue: unverified memories in recall, oldest first, optionally
    under a path and of one type (the query string; a bulk form posts it along)."""

    tab = "queue"

    def get(self, request, mind_id, form=None, status: int = 400):
        places = PlaceFilterForm(request.GET)
        places.is_valid()  # an invalid path drops the filter, with its error on the page
        place = {name: places.cleaned_data.get(name) for name in ("memory_type", "path")}
        pending = (MemoryFilter(queryset=self.memories().awaiting_verification(), data=place)
                   .qs.annotate(written_by=WRITTEN_BY).order_by("created_at", "id"))
        page = Paginator(pending, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
        page.object_list = listed(page.object_list)
        # Just verified agent memories stay in reach, so a hasty verify can be undone here.
        recent = (MemoryFilter(queryset=self.memories().current(), data=place).qs.filter(
            verified=True, verified_at__gte=timezone.now() - RECENTLY_VERIFIED)
            .exclude(source=Source.USER)
            .annotate(written_by=WRITTEN_BY, verified_by_label=VERIFIED_BY)
            .order_by("-verified_at")[:5])
        return self.render("memories/queue.html", {
            "page": page, "form": form, "recently_verified": listed(recent),
            "places": places, "filtered": any(place.values()),
            "filter_query": with_params(request.GET), "page_query": with_params(request.GET),
        }, status=status if form is not None else 200)


class BulkReviewView(QueueView):
    """Review a selection of the queue, each memory at the version the page showed; all or
    nothing (the service refuses the whole selection when one memory changed, left, or is
    another mind's)."""

    prefix: str | None = None  # of the selection's checkboxes (``<prefix>-ids``)
    done = "Reviewed {count} memor{ies}."

    def review(self, seen: dict[str, int]) -> None:
        raise NotImplementedError

    def selection(self, request):
        return VerifySelectionForm(request.POST, prefix=self.prefix)

    def post(self, request, mind_id):
        form = self.selection(request)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        seen = form.cleaned_data["ids"]
        try:
            self.review(seen)
        except VersionConflict as conflict:
            form.add_error("ids", conflict.naming_each())
            return self.get(request, mind_id, form=form, status=409)
        messages.success(request, self.done.format(count=len(seen),
                                                   ies="y" if len(seen) == 1 else "ies"))
        return self.back(reverse("ui:queue", kwargs={"mind_id": self.mind.id}))


class BulkVerifyView(BulkReviewView):
    done = "Verified {count} memor{ies}."

    def review(self, seen):
        memory_verify_many(mind=self.mind, user=self.request.user, seen=seen)


class BulkUnverifyView(BulkReviewView):
    """Unverify a selection of the recently verified (their checkboxes are ``recent-ids``):
    they return to the queue."""

    prefix = "recent"
    done = "Unverified {count} memor{ies}; they are back in the queue."

    def review(self, seen):
        memory_unverify_many(mind=self.mind, user=self.request.user, seen=seen)


class BulkTrashView(BulkReviewView):
    """Move a selection to the trash: first a page with what is selected, whole; its button
    trashes each memory at the version the queue showed (restorable from the trash)."""

    done = "Moved {count} memor{ies} to the trash."

    def review(self, seen):
        memory_trash_many(mind=self.mind, user=self.request.user, seen=seen)

    def post(self, request, mind_id):
        if request.POST.get("confirmed") == "yes":
            return super().post(request, mind_id)
        form = self.selection(request)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        seen = form.cleaned_data["ids"]
        selected = listed(self.memories().alive().filter(pk__in=list(seen))
                          .order_by("created_at", "id"))
        for memory in selected:
            memory.seen_version = seen[memory.id]
        back = request.POST.get("next", "")
        if not (back and url_has_allowed_host_and_scheme(
                back, allowed_hosts={request.get_host()}, require_https=request.is_secure())):
            back = reverse("ui:queue", kwargs={"mind_id": self.mind.id})
        return self.render("memories/queue_trash.html", {
            "selected": selected, "seen": seen, "missing": len(seen) - len(selected),
            "back": back, "filter_query": with_params(request.GET)})
