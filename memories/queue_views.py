"""Web UI for the verification queue: a mind's unverified memories, and verifying a selection."""

from datetime import timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.urls import reverse
from django.utils import timezone

from memories.forms import VerifySelectionForm
from memories.models import Source
from memories.services import VersionConflict, memory_verify_many
from memories.views import MemoryPageView, listed

QUEUE_PAGE_SIZE = 50
RECENTLY_VERIFIED = timedelta(hours=24)


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
