"""Django admin for staff: memories and their versions (read-only; verify and unverify
through the service) and the audit log (read-only)."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import transaction
from django.db.models import CharField, F, Func, Q, Value
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from memories.forms import VerifySelectionForm
from memories.models import AuditEvent, Memory, MemoryVersion
from memories.paths import InvalidPath, normalize_path
from memories.recall import display_content
from memories.services import VersionConflict, memory_set_verified, memory_verify_many
from minds.access import Action
from minds.admin import MemberMindsOnly


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("current", "current"), ("trash", "in the trash"), ("superseded", "superseded")]

    def queryset(self, request, queryset):
        if self.value() == "current":
            return queryset.current()
        if self.value() == "trash":
            return queryset.in_trash()
        if self.value() == "superseded":
            return queryset.filter(superseded_at__isnull=False)
        return queryset


class PathFilter(admin.SimpleListFilter):
    """A top-level path and everything below it (the choices: the first segments in use,
    one query); any deeper path works typed into the URL, ``?under=a/b``."""

    title = "path"
    parameter_name = "under"
    shown = 50

    def lookups(self, request, model_admin):
        first = Func(F("path"), Value("/"), Value(1), function="split_part",
                     output_field=CharField())
        tops = (model_admin.get_queryset(request).exclude(path="").order_by()
                .annotate(top=first).values_list("top", flat=True).distinct()
                .order_by("top")[:self.shown])
        return [("/", "root only")] + [(top, f"{top}/…") for top in tops]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value == "/":
            return queryset.filter(path="")
        try:
            path = normalize_path(value)
        except InvalidPath:
            return queryset.none()
        # Memories and their versions alike (MemoryQuerySet.under, for either model).
        return queryset.filter(Q(path=path) | Q(path__startswith=f"{path}/")) if path else queryset


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows nobody adds, edits or deletes here (versions, the audit log)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MemoryAdmin(MemberMindsOnly, admin.ModelAdmin):
    """Read-only: memories change through the API, the web UI and the services, which keep
    versions, the audit log and embeddings in step. Staff verify and unverify with the
    actions. Credentials content is never shown here."""

    list_display = ["key", "category", "memory_type", "path", "priority", "source",
                    "verified", "mind", "preview", "occurred_at", "version", "updated_at",
                    "deleted_at"]
    list_filter = ["category", "memory_type", PathFilter, "priority", "verified", "source",
                   StateFilter]
    list_select_related = ["mind"]
    search_fields = ["key", "content", "id", "path"]
    ordering = ["-updated_at"]
    actions = ["verify", "unverify"]
    change_action = Action.WRITE
    fields = ["id", "mind", "category", "key", "memory_type", "path", "occurred_at",
              "shown_content", "tags", "priority", "source", "verified", "verified_by",
              "verified_at", "confidence", "expires_at", "version", "versions", "created_at",
              "updated_at", "deleted_at", "superseded_at", "superseded_by"]
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).without_vectors()

    @admin.display(description="content")
    def preview(self, memory: Memory) -> str:
        return Truncator(display_content(memory)).chars(80)

    @admin.display(description="content")
    def shown_content(self, memory: Memory) -> str:
        return display_content(memory)

    @admin.display(description="history")
    def versions(self, memory: Memory) -> str:
        return format_html('<a href="{}?memory__exact={}">All {} versions</a>',
                           reverse("admin:memories_memoryversion_changelist"), memory.pk,
                           memory.version)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        # The list stays usable for the actions; a single memory opens read-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False

    def has_verify_permission(self, request) -> bool:
        return super().has_change_permission(request)

    @admin.action(description="Verify selected memories", permissions=["verify"])
    def verify(self, request, queryset):
        """First a page with the whole content of each selected memory; its confirm button
        verifies each at the version shown there (all or nothing)."""
        # Only memories of minds where this human may write (an editor or owner).
        queryset = self.allowed(request, queryset, Action.WRITE)
        if request.POST.get("post") != "yes":
            return self._confirm_verify(request, queryset)
        form = VerifySelectionForm(request.POST)
        if not form.is_valid():
            self.message_user(request, " ".join(form.errors["ids"]), messages.ERROR)
            return None
        seen = form.cleaned_data["ids"]
        selected = {memory.id: memory.mind for memory in
                    queryset.alive().select_related("mind").filter(pk__in=list(seen))}
        by_mind: dict = {}
        for memory_id, version in seen.items():
            by_mind.setdefault(selected.get(memory_id), {})[memory_id] = version
        try:
            with transaction.atomic():
                if None in by_mind:  # gone since the page, or outside what this user sees
                    raise VersionConflict("Some of the selected memories are gone.", stale=[
                        {"id": memory_id, "version": version, "current_version": None}
                        for memory_id, version in by_mind[None].items()])
                for mind, mind_seen in by_mind.items():
                    memory_verify_many(mind=mind, user=request.user, seen=mind_seen)
        except VersionConflict as conflict:
            self.message_user(request, "Nothing was verified: some of the selected memories "
                                       "changed since the confirmation page showed them. "
                                       f"Select them again. {conflict.naming_each()}",
                              messages.ERROR)
            return None
        self.message_user(request, f"Verified {len(seen)} memory(ies).", messages.SUCCESS)
        return None

    def _confirm_verify(self, request, queryset):
        memories = list(queryset.alive().select_related("mind").order_by("mind", "id"))
        for memory in memories:
            memory.shown_content = display_content(memory)
        return TemplateResponse(request, "admin/memories/memory/verify_confirmation.html", {
            **self.admin_site.each_context(request),
            "title": "Verify these memories?", "opts": self.model._meta,
            "memories": memories, "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        })

    @admin.action(description="Unverify selected memories", permissions=["verify"])
    def unverify(self, request, queryset):
        self._set_verified(request, queryset, verified=False)

    def _set_verified(self, request, queryset, *, verified: bool) -> None:
        changed = 0
        for memory in self.allowed(request, queryset, Action.WRITE).alive():
            if memory.verified != verified:
                memory_set_verified(memory=memory, user=request.user, verified=verified)
                changed += 1
        word = "Verified" if verified else "Unverified"
        self.message_user(request, f"{word} {changed} memory(ies).", messages.SUCCESS)


class MemoryVersionAdmin(MemberMindsOnly, ReadOnlyAdmin):
    """The versions of memories, as written: read-only, credentials never shown."""

    mind_path = "memory__mind"
    list_display = ["memory", "version", "category", "key", "memory_type", "path",
                    "occurred_at", "preview", "recorded_by", "agent", "created_at"]
    list_filter = ["memory_type", PathFilter, "category", "recorded_by_type"]
    list_select_related = ["memory"]
    search_fields = ["memory__id", "key", "path"]
    ordering = ["memory", "-version"]
    fields = ["memory", "version", "category", "key", "memory_type", "path", "occurred_at",
              "shown_content", "tags", "priority", "source", "confidence", "expires_at",
              "recorded_by_type", "recorded_by", "claimed_source", "claimed_actor",
              "agent", "agent_instance", "device", "parent", "reverted_from", "created_at"]
    readonly_fields = fields

    def get_queryset(self, request):
        return (super().get_queryset(request).select_related("memory")
                .defer("memory__search_vector", "memory__embedding"))

    @admin.display(description="content")
    def preview(self, version: MemoryVersion) -> str:
        return Truncator(self.shown_content(version)).chars(80)

    @admin.display(description="content")
    def shown_content(self, version: MemoryVersion) -> str:
        return "[credentials]" if version.is_credentials else version.content


class AuditEventAdmin(MemberMindsOnly, ReadOnlyAdmin):
    """The audit log, append-only: nobody adds, edits or deletes an event here."""

    list_display = ["created_at", "action", "actor_type", "actor_label", "agent", "mind",
                    "memory_id"]
    list_filter = ["action", "actor_type"]
    list_select_related = ["mind"]
    search_fields = ["memory_id", "actor_label", "action", "mind__id", "mind__name"]
    date_hierarchy = "created_at"


admin.site.register(Memory, MemoryAdmin)
admin.site.register(MemoryVersion, MemoryVersionAdmin)
admin.site.register(AuditEvent, AuditEventAdmin)
