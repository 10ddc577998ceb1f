"""Django admin for staff: memories (read-only; verify and unverify through the service) and
the audit log (read-only)."""

from django.contrib import admin, messages
from django.utils.text import Truncator

from memories.models import AuditEvent, Memory
from memories.recall import display_content
from memories.services import memory_set_verified
from minds.admin import OwnMindsOnly


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


class MemoryAdmin(OwnMindsOnly, admin.ModelAdmin):
    """Read-only: memories change through the API, the web UI and the services, which keep
    versions, the audit log and embeddings in step. Staff verify and unverify with the
    actions. Credentials content is never shown here."""

    list_display = ["key", "category", "priority", "source", "verified", "mind", "preview",
                    "version", "updated_at", "deleted_at"]
    list_filter = ["category", "priority", "verified", "source", StateFilter]
    list_select_related = ["mind"]
    search_fields = ["key", "content", "id"]
    ordering = ["-updated_at"]
    actions = ["verify", "unverify"]
    fields = ["id", "mind", "category", "key", "shown_content", "tags", "priority", "source",
              "verified", "verified_by", "verified_at", "confidence", "expires_at", "version",
              "created_at", "updated_at", "deleted_at", "superseded_at", "superseded_by"]
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).defer("search_vector", "embedding")

    @admin.display(description="content")
    def preview(self, memory: Memory) -> str:
        return Truncator(display_content(memory)).chars(80)

    @admin.display(description="content")
    def shown_content(self, memory: Memory) -> str:
        return display_content(memory)

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
        self._set_verified(request, queryset, verified=True)

    @admin.action(description="Unverify selected memories", permissions=["verify"])
    def unverify(self, request, queryset):
        self._set_verified(request, queryset, verified=False)

    def _set_verified(self, request, queryset, *, verified: bool) -> None:
        changed = 0
        for memory in queryset.alive():
            if memory.verified != verified:
                memory_set_verified(memory=memory, user=request.user, verified=verified)
                changed += 1
        word = "Verified" if verified else "Unverified"
        self.message_user(request, f"{word} {changed} memory(ies).", messages.SUCCESS)


class AuditEventAdmin(OwnMindsOnly, admin.ModelAdmin):
    """The audit log, append-only: nobody adds, edits or deletes an event here."""

    list_display = ["created_at", "action", "actor_type", "actor_label", "mind", "memory_id"]
    list_filter = ["action", "actor_type"]
    list_select_related = ["mind"]
    search_fields = ["memory_id", "actor_label", "action", "mind__id", "mind__name"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


admin.site.register(Memory, MemoryAdmin)
admin.site.register(AuditEvent, AuditEventAdmin)
