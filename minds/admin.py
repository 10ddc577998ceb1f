"""Django admin for staff: users, minds, Mind Keys and OAuth connections, every change through
minds.services."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.postgres.aggregates import StringAgg
from django.db.models import Count, Q
from django.utils import timezone

from minds.access import Action, minds_for
from minds.models import Membership, Mind, MindKey, OAuthConnection, Role
from minds.services import (
    KEY_SETTINGS,
    MIND_SETTINGS,
    account_delete,
    clean_key_paths,
    connection_revoke,
    key_issue,
    key_revoke,
    key_update,
    mind_create,
    mind_delete,
    mind_update,
)
from synapse.text import validate_single_line


class MemberMindsOnly:
    """For a ModelAdmin: staff who are not superusers see the minds they are members of and
    what is in them, nothing else (lists, pages, foreign-key choices), and change what
    their role allows (minds.access: the check of the API and the web UI); superusers act
    on every mind. ``mind_path`` leads from the model to its mind (empty: the model is
    Mind); ``view_action`` is what seeing a row takes, ``change_action`` what changing,
    deleting, adding it or running an action on it takes (an action runs on the selected
    rows whose mind allows it, no other)."""

    mind_path = "mind"
    view_action = Action.READ
    change_action = Action.MANAGE

    def _mind_lookup(self) -> str:
        return f"{self.mind_path}__in" if self.mind_path else "pk__in"

    def get_queryset(self, request):
        return self.allowed(request, super().get_queryset(request), self.view_action)

    def response_action(self, request, queryset):
        return super().response_action(
            request, self.allowed(request, queryset, self.change_action))

    def allowed(self, request, queryset, action: Action):
        """``queryset`` narrowed to the minds on which the signed-in human may ``action``."""
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{self._mind_lookup(): minds_for(request.user, action)
                                  .values("pk")})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if not request.user.is_superuser and db_field.related_model is Mind:
            kwargs["queryset"] = minds_for(request.user, self.change_action)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def may(self, request, obj, action: Action) -> bool:
        """Whether the signed-in human may ``action`` on ``obj`` (None: the list, narrowed
        by ``get_queryset``)."""
        if obj is None or request.user.is_superuser:
            return True
        mind_id = obj.pk
        if self.mind_path:
            *path, last = self.mind_path.split("__")
            for step in path:
                obj = getattr(obj, step)
            mind_id = getattr(obj, f"{last}_id")
        return minds_for(request.user, action).filter(pk=mind_id).exists()

    def has_view_permission(self, request, obj=None):
        return (super().has_view_permission(request, obj)
                and self.may(request, obj, self.view_action))

    def may_somewhere(self, request, action: Action) -> bool:
        """Whether the signed-in human may ``action`` on at least one mind."""
        return request.user.is_superuser or minds_for(request.user, action).exists()

    def has_add_permission(self, request):
        # A new mind is anyone's; a row in a mind needs a mind that allows changing it.
        return super().has_add_permission(request) and (
            not self.mind_path or self.may_somewhere(request, self.change_action))

    def get_actions(self, request):
        # Offered only to someone who may run them on some mind (an editor verifies, an
        # owner revokes keys); ``response_action`` still skips the rows they may not.
        if not self.may_somewhere(request, self.change_action):
            return {}
        return super().get_actions(request)

    def has_change_permission(self, request, obj=None):
        return (super().has_change_permission(request, obj)
                and self.may(request, obj, self.change_action))

    def has_delete_permission(self, request, obj=None):
        return (super().has_delete_permission(request, obj)
                and self.may(request, obj, self.change_action))


def _deletion_summary(minds) -> tuple[list[str], dict[str, int]]:
    """What deleting these minds removes, counted (Django would list every row)."""
    from memories.models import AuditEvent, Memory

    mind_ids = [mind.pk for mind in minds]
    counts = {
        "minds": len(mind_ids),
        "memories": Memory.objects.filter(mind_id__in=mind_ids).count(),
        "Mind Keys": MindKey.objects.filter(mind_id__in=mind_ids).count(),
        "audit events": AuditEvent.objects.filter(mind_id__in=mind_ids).count(),
    }
    lines = [f"{mind.name} ({mind.pk}), with everything in it" for mind in minds]
    return lines, counts


class SingleLineNameAdmin(admin.ModelAdmin):
    """The name field of its forms follows the one single-line rule (synapse.text)."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and db_field.name == "name":
            field.validators.append(validate_single_line)
        return field


class MindAddForm(forms.ModelForm):
    """A new mind names its first owner (superusers pick anyone; staff, themselves)."""

    owner = forms.ModelChoiceField(queryset=get_user_model().objects.none())

    class Meta:
        model = Mind
        fields = ["name", "unverified_in_recall", "search_language"]


class MindAdmin(MemberMindsOnly, SingleLineNameAdmin):
    mind_path = ""
    list_display = ["name", "id", "owners", "unverified_in_recall", "search_language",
                    "agents_may_reset", "memory_count", "created_at"]
    list_filter = ["unverified_in_recall", "search_language", "agents_may_reset"]
    search_fields = ["name", "id", "memberships__user__username"]
    ordering = ["-created_at"]
    add_form = MindAddForm

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            live_memories=Count("memories", filter=Q(memories__deleted_at__isnull=True),
                                distinct=True),
            owner_names=StringAgg("memberships__user__username", ", ", distinct=True,
                                  filter=Q(memberships__role=Role.OWNER)))

    @admin.display(description="owners")
    def owners(self, mind: Mind) -> str:
        return mind.owner_names or ""

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        form = super().get_form(request, obj, **kwargs)
        if obj is None:
            users = get_user_model().objects.filter(is_active=True)
            if not request.user.is_superuser:
                users = users.filter(pk=request.user.pk)
            form.base_fields["owner"].queryset = users
            form.base_fields["owner"].initial = request.user.pk
        return form

    @admin.display(description="memories", ordering="live_memories")
    def memory_count(self, mind: Mind) -> int:
        return mind.live_memories

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and db_field.name == "search_language":
            field.help_text = ("Keyword search stems words in this language and ignores "
                               "accents; changing it re-indexes this mind's memories in the "
                               "background (the embedding worker).")
        return field

    def get_fields(self, request, obj=None):
        fields = ["name", "unverified_in_recall", "search_language"]
        # Set by mind_update when the language changes, cleared by the embedding worker.
        return (["owner", *fields] if obj is None
                else [*fields, "agents_may_reset", "reindex_pending", "members"])

    def get_readonly_fields(self, request, obj=None):
        return ["reindex_pending", "members"] if obj is not None else []

    @admin.display(description="members")
    def members(self, mind: Mind) -> str:
        # Read-only here: members change on the mind's Members page and through its API
        # (minds.services keeps the last owner and revokes a departing owner's keys).
        return ", ".join(f"{membership.user.get_username()} ({membership.role})"
                         for membership in mind.memberships.select_related("user"))

    def save_model(self, request, obj, form, change):
        if change:
            changes = {name: form.cleaned_data[name] for name in form.changed_data
                       if name in MIND_SETTINGS}
            mind_update(mind=Mind.objects.get(pk=obj.pk), actor=request.user, **changes)
            return
        created = mind_create(owner=form.cleaned_data["owner"], name=obj.name,
                              unverified_in_recall=obj.unverified_in_recall,
                              search_language=obj.search_language, actor=request.user)
        obj.pk = created.pk
        obj._state.adding = False

    def get_deleted_objects(self, objs, request):
        lines, counts = _deletion_summary(list(objs))
        perms_needed = set() if self.has_delete_permission(request) else {"mind"}
        return lines, counts, perms_needed, []

    def delete_model(self, request, obj):
        mind_delete(mind=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for mind in queryset:
            mind_delete(mind=mind, actor=request.user)


class RevokedFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [("usable", "usable"), ("expired", "expired"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "usable":
            return queryset.usable()
        if self.value() == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


class MindKeyAddForm(forms.ModelForm):
    class Meta:
        model = MindKey
        fields = ["mind", "name", "scope", "expires_at", "paths"]
        help_texts = {"paths": "Optional: limit the key to these path prefixes, "
                               "comma-separated (it sees only the memories at or below "
                               "them). Empty: the whole mind. Fixed once issued."}

    def clean_paths(self):
        return clean_key_paths(self.cleaned_data.get("paths") or [])

    def clean_expires_at(self):
        expires_at = self.cleaned_data.get("expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return expires_at


class MindKeyAdmin(MemberMindsOnly, SingleLineNameAdmin):
    """Keys are issued here (the plaintext is shown once, in a message) and revoked with the
    action; the secret's hash never appears, and a revoked key is read-only."""

    list_display = ["name", "ending", "mind", "scope", "reach", "created_at", "last_used_at",
                    "expires_at", "revoked_at"]
    list_filter = [RevokedFilter, "scope"]
    list_select_related = ["mind"]
    search_fields = ["name", "id", "last4", "mind__name", "mind__id"]
    ordering = ["-created_at"]
    actions = ["revoke_keys"]
    add_form = MindKeyAddForm
    # Keys are the owners' (minds.access): editors and viewers do not see them either.
    view_action = Action.MANAGE

    @admin.display(description="key ends with")
    def ending(self, key: MindKey) -> str:
        return f"mk_…{key.last4}"

    @admin.display(description="paths")
    def reach(self, key: MindKey) -> str:
        return ", ".join(key.paths) if key.paths else "whole mind"

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["mind", "name", "scope", "expires_at", "paths"]
        return ["id", "mind", "ending", "name", "scope", "reach", "expires_at", "created_by",
                "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        return ["id", "mind", "ending", "reach", "created_by", "created_at", "last_used_at",
                "revoked_at"]

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.revoked_at is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        # A key is revoked, never deleted: its row keeps the audit trail readable.
        return False

    def save_model(self, request, obj, form, change):
        if change:
            changes = {name: form.cleaned_data[name] for name in form.changed_data
                       if name in KEY_SETTINGS}
            key_update(key=obj, actor=request.user, **changes)
            return
        key, plaintext = key_issue(mind=obj.mind, name=obj.name, scope=obj.scope,
                                   expires_at=obj.expires_at, created_by=request.user,
                                   paths=obj.paths)
        obj.pk = key.pk
        obj._state.adding = False
        self.message_user(request, f"Mind Key for “{key.mind.name}”: {plaintext} — copy it "
                          "now; it is stored only as a hash and will not be shown again.",
                          messages.WARNING)

    def has_revoke_permission(self, request) -> bool:
        return super().has_change_permission(request)

    @admin.action(description="Revoke selected keys", permissions=["revoke"])
    def revoke_keys(self, request, queryset):
        revoked = 0
        for key in queryset.select_related("mind"):
            if key.revoked_at is None:
                key_revoke(key=key, actor=request.user)
                revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s); requests with them now get 401.",
                          messages.SUCCESS)


class SynapseUserAdmin(UserAdmin):
    """The stock user admin, for superusers only (staff who could edit accounts could make
    themselves superusers); deleting a user deletes their minds through the service."""

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def get_deleted_objects(self, objs, request):
        users = list(objs)
        # What account_delete deletes: the minds these users own with no other owner.
        owners_else = Membership.objects.filter(role=Role.OWNER).exclude(user__in=users)
        minds = list(Mind.objects.filter(memberships__user__in=users,
                                         memberships__role=Role.OWNER)
                     .exclude(pk__in=owners_else.values("mind")).distinct())
        lines, counts = _deletion_summary(minds)
        perms_needed = set() if self.has_delete_permission(request) else {"user"}
        return ([f"User {user.get_username()}" for user in users] + lines,
                {"users": len(users), **counts}, perms_needed, [])

    def delete_model(self, request, obj):
        account_delete(user=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for user in queryset:
            self.delete_model(request, user)


class OAuthConnectionAdmin(MemberMindsOnly, admin.ModelAdmin):
    """OAuth connections (what a mind's owner approved on the consent page): read-only,
    revoked with the action, never added here (only the consent page creates them) nor
    deleted (the row keeps the audit trail readable)."""

    list_display = ["id", "client", "mind", "scope_list", "reach", "created_at",
                    "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["mind", "application"]
    search_fields = ["id", "application__name", "application__client_id", "mind__name",
                     "mind__id"]
    ordering = ["-created_at"]
    actions = ["revoke_connections"]
    # The owners' too, as on the web UI's Connected apps page.
    view_action = Action.MANAGE
    fields = ["id", "mind", "client", "client_id", "scope_list", "reach", "resource",
              "approved_by", "created_at", "last_used_at", "instance_ids", "revoked_at"]
    readonly_fields = fields

    @admin.display(description="client")
    def client(self, connection: OAuthConnection) -> str:
        return connection.client_name

    @admin.display(description="client id")
    def client_id(self, connection: OAuthConnection) -> str:
        return connection.application.client_id

    @admin.display(description="scopes")
    def scope_list(self, connection: OAuthConnection) -> str:
        return " ".join(connection.scopes)

    @admin.display(description="paths")
    def reach(self, connection: OAuthConnection) -> str:
        return ", ".join(connection.paths) if connection.paths else "whole mind"

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_revoke_permission(self, request) -> bool:
        return super().has_change_permission(request)

    @admin.action(description="Revoke selected connections", permissions=["revoke"])
    def revoke_connections(self, request, queryset):
        revoked = 0
        for connection in queryset.select_related("mind", "application"):
            if connection.revoked_at is None:
                connection_revoke(connection=connection, actor=request.user)
                revoked += 1
        self.message_user(request, f"Revoked {revoked} connection(s); requests with their "
                          "tokens now get 401.", messages.SUCCESS)


admin.site.register(Mind, MindAdmin)
admin.site.register(MindKey, MindKeyAdmin)
admin.site.register(OAuthConnection, OAuthConnectionAdmin)
User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, SynapseUserAdmin)
