"""Web UI for minds: the minds list, members and invitations, Mind Keys, connected apps,
settings; and the mind scoping every page uses."""

from datetime import timedelta
from types import SimpleNamespace

from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.functional import cached_property
from django.views import View

from memories.export import export_account
from memories.models import Memory
from minds import invitations
from minds.access import Action, RoleRefused, allows, member_mind
from minds.forms import (
    AccountDeleteForm,
    InvitationSignupForm,
    InviteForm,
    KeyForm,
    MemberRoleForm,
    MindDeleteForm,
    MindForm,
    MindSettingsForm,
    PasswordResetRequestForm,
    SignInForm,
    invite_wait,
    refuse_if_limited,
)
from minds.models import Invitation, Membership, Mind, Role
from minds.passwords import mail_configured, password_reset_send, reset_wait
from minds.services import (
    LastOwner,
    account_delete,
    account_minds,
    connection_revoke,
    key_issue,
    key_revoke,
    member_remove,
    member_set_role,
    mind_create,
    mind_delete,
    mind_update,
    minds_with_counts,
)
from synapse.agent_config import KEY_PLACEHOLDER, MCP_PATH, MIND_KEY, hosts, with_key
from synapse.origin import link_origin, public_origin, public_url
from synapse.throttling import ScopeRateThrottle


class SignInView(auth_views.LoginView):
    """Session sign-in, rate-limited like ``POST /auth/login`` and on the same counters, so
    the browser form is no way around the API's limit on password guessing."""

    form_class = SignInForm
    redirect_authenticated_user = True

    def form_invalid(self, form):
        return refuse_if_limited(super().form_invalid(form), form)


class SignedInView(LoginRequiredMixin, View):
    """A page for a signed-in human; a missing object is an HTML 404 page.

    (The project's handler404 answers JSON for the API, so UI pages render their own.)
    """

    def dispatch(self, request, *args, **kwargs):
        try:
            return super().dispatch(request, *args, **kwargs)
        except Http404:
            return render(request, "not_found.html", status=404)
        except RoleRefused as refused:
            return render(request, "forbidden.html", {"reason": str(refused)}, status=403)


class MindView(SignedInView):
    """A page about one mind the signed-in human is a member of (anyone else's is a 404),
    if their role allows what the page does (a 403 page otherwise; minds.access).

    ``mind_action`` says what that is: an Action for every method, or a dict by method;
    unset, reading for GET and writing for POST. The mind carries the person's ``role``,
    and the templates get ``may_write`` / ``may_manage`` to show only the controls the role
    may use."""

    tab = ""
    mind_action: Action | dict[str, Action] | None = None

    def required_action(self) -> Action:
        declared = self.mind_action
        if isinstance(declared, dict):
            declared = declared.get(self.request.method)
        if declared is not None:
            return declared
        return Action.READ if self.request.method in ("GET", "HEAD") else Action.WRITE

    @cached_property
    def mind(self) -> Mind:
        return member_mind(self.request.user, self.kwargs["mind_id"], self.required_action())

    def render(self, template: str, context: dict | None = None, status: int = 200):
        queue = Memory.objects.for_mind(self.mind).awaiting_verification().count()
        now = timezone.now()
        return render(self.request, template,
                      {"mind": self.mind, "tab": self.tab, "queue_count": queue,
                       "may_write": allows(self.mind.role, Action.WRITE),
                       "may_manage": allows(self.mind.role, Action.MANAGE),
                       "now": now, "just_now": now - timedelta(minutes=1),
                       **(context or {})}, status=status)


class MindListView(SignedInView):
    """The signed-in human's minds (owned and shared) with their role and counts, the
    invitations waiting for them, and a form to create a mind."""

    def get(self, request, form: MindForm | None = None):
        minds = minds_with_counts(member=request.user).order_by("name", "created_at")
        return render(request, "minds/mind_list.html",
                      {"minds": minds, "form": form or MindForm(),
                       "invitations": invitations.for_user(request.user)},
                      status=400 if form is not None else 200)

    def post(self, request):
        form = MindForm(request.POST)
        if not form.is_valid():
            return self.get(request, form=form)
        mind = mind_create(owner=request.user, name=form.cleaned_data["name"])
        messages.success(request, f"Created {mind.name}. Give an agent a key to start "
                                  "filling it.")
        return redirect("ui:keys", mind_id=mind.id)


class KeyIssuingView(MindView):
    """A page with the key form (Keys, Connect an agent): a valid post issues a Mind Key
    and renders the page with it; ``get`` takes the form, the key and its plaintext."""

    mind_action = Action.MANAGE

    def post(self, request, mind_id):
        form = KeyForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        key, plaintext = key_issue(mind=self.mind, created_by=request.user, **form.cleaned_data)
        # Rendered in this response, never stored or redirected: the plaintext exists once.
        return self.get(request, mind_id, new_key=key, plaintext=plaintext)


class KeysView(KeyIssuingView):
    """Mind Keys: the list, a form to issue one (shown once), revoke."""

    tab = "keys"

    def get(self, request, mind_id, form: KeyForm | None = None, new_key=None,
            plaintext: str = ""):
        keys = self.mind.keys.select_related("created_by").order_by("revoked_at", "-created_at")
        return self.render("minds/keys.html", {
            "keys": keys, "form": form or KeyForm(), "new_key": new_key,
            "plaintext": plaintext, "api_base": request.build_absolute_uri("/").rstrip("/"),
        }, status=400 if form is not None and form.errors else 200)


class ConnectView(KeyIssuingView):
    """Connect an agent: each host's configuration with this server's URL; for key-based
    runners a form that creates a Mind Key and fills it into the snippets of this one
    response (never stored, never shown again)."""

    tab = "connect"

    def get(self, request, mind_id, form: KeyForm | None = None, new_key=None,
            plaintext: str = ""):
        configured = hosts(public_origin(request))
        if plaintext:
            configured = with_key(configured, plaintext)
        return self.render("minds/connect.html", {
            "hosts": configured, "mcp_url": public_url(request, MCP_PATH),
            "form": form or KeyForm(initial={"name": "agent"}), "new_key": new_key,
            "plaintext": plaintext, "placeholder": KEY_PLACEHOLDER, "mind_key": MIND_KEY,
        }, status=400 if form is not None and form.errors else 200)


class KeyRevokeView(MindView):
    mind_action = Action.MANAGE

    def post(self, request, mind_id, key_id):
        key = get_object_or_404(self.mind.keys, pk=key_id)
        if key.is_revoked:
            messages.info(request, f"{key.name} (…{key.last4}) was already revoked.")
        else:
            key_revoke(key=key, actor=request.user)
            messages.success(request, f"Revoked {key.name} (…{key.last4}). Its next request "
                                      "will be refused.")
        return redirect("ui:keys", mind_id=self.mind.id)


class ConnectionsView(MindView):
    """Connected apps: the OAuth connections of this mind (what the owner approved on the
    consent page), with what each may do, when it was last used, the agent instance ids
    it sent, and Revoke. Under the Keys tab (both are how agents get in), linked from
    the Keys page: a phone has no room for another tab."""

    mind_action = Action.MANAGE

    tab = "keys"

    def get(self, request, mind_id):
        connections = (self.mind.connections.select_related("application", "approved_by")
                       .order_by("revoked_at", "-created_at"))
        return self.render("minds/connections.html", {"connections": connections})


class ConnectionRevokeView(MindView):
    mind_action = Action.MANAGE

    def post(self, request, mind_id, connection_id):
        connection = get_object_or_404(self.mind.connections.select_related("application"),
                                       pk=connection_id)
        if connection.is_revoked:
            messages.info(request, f"{connection.client_name} was already revoked.")
        else:
            connection_revoke(connection=connection, actor=request.user)
            messages.success(request, f"Revoked {connection.client_name}. Its next request "
                                      "will be refused.")
        return redirect("ui:connections", mind_id=self.mind.id)


class MindSettingsView(MindView):
    """Rename, recall policy for unverified memories, search language, and deleting the
    mind."""

    mind_action = Action.MANAGE

    tab = "settings"

    def get(self, request, mind_id, form=None, delete_form=None):
        form = form or MindSettingsForm(initial={
            "name": self.mind.name, "unverified_in_recall": self.mind.unverified_in_recall,
            "search_language": self.mind.search_language,
            "agents_may_reset": self.mind.agents_may_reset})
        invalid = bool((form and form.errors) or (delete_form and delete_form.errors))
        return self.render("minds/settings.html", {
            "form": form, "delete_form": delete_form or MindDeleteForm(mind=self.mind),
        }, status=400 if invalid else 200)

    def post(self, request, mind_id):
        form = MindSettingsForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, form=form)
        changed = {name: value for name, value in form.cleaned_data.items()
                   if getattr(self.mind, name) != value}
        if changed:
            mind_update(mind=self.mind, actor=request.user, **changed)
            messages.success(request, "Settings saved.")
        else:
            messages.info(request, "Nothing changed.")
        return redirect("ui:settings", mind_id=self.mind.id)


class MindDeleteView(MindSettingsView):
    def post(self, request, mind_id):
        delete_form = MindDeleteForm(request.POST, mind=self.mind)
        if not delete_form.is_valid():
            return self.get(request, mind_id, delete_form=delete_form)
        name = self.mind.name
        mind_delete(mind=self.mind, actor=request.user)
        messages.success(request, f"Deleted {name} with all its memories and keys.")
        return redirect(reverse("ui:minds"))


# -- Members and invitations (minds.services, minds.invitations) -----------------------------

class MembersView(MindView):
    """Who is on the mind and with which role (any member); owners also change roles,
    remove members, invite (the new link shown once) and revoke open invitations."""

    tab = "members"
    mind_action = {"GET": Action.READ, "POST": Action.MANAGE}

    def get(self, request, mind_id, form: InviteForm | None = None, invited=None,
            status: int = 200):
        members = Membership.objects.filter(mind=self.mind).select_related("user")
        pending = ()
        if allows(self.mind.role, Action.MANAGE):
            pending = (Invitation.objects.open().filter(mind=self.mind)
                       .select_related("user", "invited_by").order_by("-created_at", "-id"))
        owners = sum(1 for member in members if member.role == "owner")
        return self.render("minds/members.html", {
            "members": members, "invitations": pending, "form": form or InviteForm(),
            "invited": invited, "role_form": MemberRoleForm(), "owner_count": owners,
        }, status=status)

    def post(self, request, mind_id):
        """Invite."""
        form = InviteForm(request.POST)
        if not form.is_valid():
            return self.get(request, mind_id, form=form, status=400)
        form.retry_after = invite_wait(request)
        if form.retry_after is not None:
            form.add_error(None, f"Too many invitations. Try again in {form.retry_after} "
                                 "seconds.")
            return refuse_if_limited(self.get(request, mind_id, form=form), form)
        try:
            invited = invitations.invite(mind=self.mind, actor=request.user,
                                         role=form.cleaned_data["role"],
                                         origin=link_origin(request),
                                         **form.cleaned_data["invitee"])
        except invitations.InvitationRefused as refused:
            form.add_error("invitee", str(refused))
            return self.get(request, mind_id, form=form, status=400)
        # Rendered in this response, never stored: the link exists once.
        return self.get(request, mind_id, invited=invited)


class MemberRoleView(MindView):
    mind_action = Action.MANAGE

    def post(self, request, mind_id, user_id):
        membership = get_object_or_404(Membership.objects.select_related("user"),
                                       mind=self.mind, user_id=user_id)
        form = MemberRoleForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Choose owner, editor or viewer.")
            return redirect("ui:members", mind_id=self.mind.id)
        try:
            member_set_role(membership=membership, role=form.cleaned_data["role"],
                            actor=request.user)
        except LastOwner as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, f"{membership.user.get_username()} is now "
                                      f"{form.cleaned_data['role']}.")
        return redirect("ui:members", mind_id=self.mind.id)


class MemberRemoveView(MindView):
    mind_action = Action.MANAGE

    def post(self, request, mind_id, user_id):
        membership = get_object_or_404(Membership.objects.select_related("user"),
                                       mind=self.mind, user_id=user_id)
        try:
            member_remove(membership=membership, actor=request.user)
        except LastOwner as refused:
            messages.error(request, str(refused))
            return redirect("ui:members", mind_id=self.mind.id)
        if user_id == request.user.pk:
            messages.success(request, f"You left {self.mind.name}.")
            return redirect("ui:minds")
        messages.success(request, f"Removed {membership.user.get_username()} from "
                                  f"{self.mind.name}.")
        return redirect("ui:members", mind_id=self.mind.id)


class LeaveView(MindView):
    """Leave a mind (any role): one action from the minds list; the last owner cannot."""

    mind_action = Action.READ

    def post(self, request, mind_id):
        membership = Membership.objects.get(mind=self.mind, user=request.user)
        try:
            member_remove(membership=membership, actor=request.user)
        except LastOwner:
            messages.error(request, f"You are the only owner of {self.mind.name}, so you "
                                    "cannot leave it: make another member an owner first "
                                    "(Members), or delete the mind (Settings).")
        else:
            messages.success(request, f"You left {self.mind.name}.")
        return redirect("ui:minds")


class InvitationRevokeView(MindView):
    mind_action = Action.MANAGE

    def post(self, request, mind_id, invitation_id):
        invitation = get_object_or_404(self.mind.invitations.select_related("user"),
                                       pk=invitation_id)
        invitations.revoke(invitation=invitation, actor=request.user)
        messages.success(request, f"Revoked the invitation of {invitation.invitee}: its "
                                  "link no longer works.")
        return redirect("ui:members", mind_id=self.mind.id)


class InvitationAnswerView(SignedInView):
    """Accept or decline, from the minds list, an invitation to the signed-in account."""

    answer = "accept"

    def post(self, request, invitation_id):
        invitation = get_object_or_404(
            Invitation.objects.select_related("mind", "user").filter(user=request.user),
            pk=invitation_id)
        return answer_invitation(request, invitation, self.answer, with_token=False)


def answer_invitation(request, invitation: Invitation, answer: str, *, with_token: bool):
    """Accept (then to the mind) or decline (then to the minds list) as the signed-in
    person; a refusal is a message on the minds list."""
    try:
        if answer == "accept":
            invitations.accept(invitation=invitation, user=request.user, with_token=with_token)
        else:
            invitations.decline(invitation=invitation, user=request.user,
                                with_token=with_token)
    except invitations.InvitationRefused as refused:
        messages.error(request, str(refused))
        return redirect("ui:minds")
    if answer == "accept":
        messages.success(request, f"You joined {invitation.mind.name} as {invitation.role}.")
        return redirect("ui:browser", mind_id=invitation.mind_id)
    messages.info(request, f"You declined the invitation to {invitation.mind.name}.")
    return redirect("ui:minds")


class InvitationLinkView(View):
    """An invitation's link (``/ui/invitations/<token>``): the mind, the role and who
    invited. Signed in: Accept / Decline (minds.invitations says who may). Not signed in:
    sign in, or, for an invitation to an e-mail address, create an account with it (open
    registration need not be), which accepts it. Unknown, used, revoked or expired: a page
    saying so."""

    template_name = "minds/invitation.html"

    def page(self, request, invitation, *, form=None, reason: str = "", status: int = 200):
        signed_in = request.user.is_authenticated
        refusal = None
        if invitation is not None and signed_in and not reason:
            refusal = invitations.may_answer(invitation, request.user, with_token=True)
        if form is None and invitation is not None and not invitation.user_id:
            form = InvitationSignupForm(email=invitation.email)
        return render(request, self.template_name, {
            "invitation": invitation, "reason": reason, "refusal": refusal, "form": form,
            "signed_in": signed_in, "link": request.path,
        }, status=status)

    def lookup(self, token: str):
        invitation = invitations.by_token(token)
        if invitation is None:
            return None, ("This invitation link is not valid: check that it was copied "
                          "whole, or ask for a new one."), 404
        reason = invitations.closed_reason(invitation)
        return invitation, reason or "", 410 if reason else 200

    def get(self, request, token):
        invitation, reason, status = self.lookup(token)
        return self.page(request, invitation, reason=reason, status=status)

    def post(self, request, token):
        invitation, reason, status = self.lookup(token)
        if reason:
            return self.page(request, invitation, reason=reason, status=status)
        answer = request.POST.get("answer")
        if answer == "decline" and not request.user.is_authenticated:
            invitations.decline(invitation=invitation, with_token=True)
            return self.page(request, invitation, reason="You declined this invitation.")
        if answer in ("accept", "decline") and request.user.is_authenticated:
            return answer_invitation(request, invitation, answer, with_token=True)
        if answer == "signup" and not request.user.is_authenticated and not invitation.user_id:
            return self.signup(request, invitation)
        return self.page(request, invitation, status=400)

    def signup(self, request, invitation):
        form = InvitationSignupForm(request.POST, email=invitation.email)
        if not form.is_valid():
            return self.page(request, invitation, form=form, status=400)
        try:
            user, _membership = invitations.register_and_accept(
                invitation=invitation, username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"])
        except invitations.InvitationRefused as refused:
            form.add_error("username" if isinstance(refused, invitations.UsernameTaken)
                           else None, str(refused))
            return self.page(request, invitation, form=form, status=400)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}: you joined "
                                  f"{invitation.mind.name} as {invitation.role}.")
        return redirect("ui:browser", mind_id=invitation.mind_id)
# -- Your account: its data, its export, its deletion ------------------------------------------

def limit_wait(request, scope: str) -> int | None:
    """Seconds until the signed-in person may do what spends the API's ``scope`` budget
    (the same counters as the API's routes), or None to go ahead now."""
    throttle = ScopeRateThrottle()
    if throttle.allow_request(request, SimpleNamespace(throttle_scope=scope)):
        return None
    return throttle.wait()


def too_many(request, seconds: int):
    response = render(request, "forbidden.html", {
        "reason": f"Too many attempts: try again in {seconds} seconds."}, status=429)
    response["Retry-After"] = str(seconds)
    return response


class AccountView(SignedInView):
    """The signed-in person's own data: the account, their minds and roles, exporting
    everything they own, and deleting the account (docs/teams.md, "Your data")."""

    def get(self, request, delete_form: AccountDeleteForm | None = None):
        minds = list(account_minds(user=request.user))
        return render(request, "minds/account.html", {
            "minds": minds,
            "owned_alone": [mind for mind in minds
                            if mind.role == Role.OWNER and mind.owner_count == 1],
            "delete_form": delete_form or AccountDeleteForm(user=request.user),
        }, status=400 if delete_form is not None else 200)


class AccountExportView(SignedInView):
    """Everything the person owns, streamed (GET /auth/export's document), rate-limited on
    the same ``export`` budget."""

    def get(self, request):
        wait = limit_wait(request, "export")
        if wait is not None:
            return too_many(request, wait)
        reveal = request.GET.get("include_credentials") == "on"
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response = StreamingHttpResponse(export_account(user=request.user, reveal=reveal),
                                         content_type="application/json")
        response["Content-Disposition"] = (
            f'attachment; filename="synapse-account-{request.user.pk}-{stamp}.json"')
        return response


class AccountDeleteView(AccountView):
    """Delete the account (typed username and password, a password attempt on the sign-in
    budget); the person is signed out."""

    def post(self, request):
        wait = limit_wait(request, "login")
        if wait is not None:
            return too_many(request, wait)
        form = AccountDeleteForm(request.POST, user=request.user)
        if not form.is_valid():
            return self.get(request, delete_form=form)
        account_delete(user=request.user, actor=request.user)
        logout(request)
        messages.success(request, "Your account is deleted.")
        return redirect("ui:login")


# -- Passwords: reset by e-mail, change (minds.passwords) --------------------------------------

class PasswordResetView(View):
    """Ask for a reset link by e-mail address: the same answer whether or not an account
    has it; rate-limited per client address and per address asked for."""

    template_name = "registration/password_reset_form.html"

    def get(self, request):
        return render(request, self.template_name, {"form": PasswordResetRequestForm(),
                                                    "available": mail_configured()})

    def post(self, request):
        form = PasswordResetRequestForm(request.POST)
        if not mail_configured():
            return render(request, self.template_name, {"form": form, "available": False},
                          status=503)
        if not form.is_valid():
            return render(request, self.template_name, {"form": form, "available": True},
                          status=400)
        email = form.cleaned_data["email"]
        form.retry_after = reset_wait(request, email)
        if form.retry_after is not None:
            form.add_error(None, f"Too many reset requests. Try again in {form.retry_after} "
                                 "seconds.")
            return refuse_if_limited(
                render(request, self.template_name, {"form": form, "available": True}), form)
        password_reset_send(request, email)
        return redirect("ui:password-reset-sent")


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """The link of the e-mail: choose a new password (Django's view and token); every other
    sign-in of the account ends (minds.passwords)."""

    success_url = reverse_lazy("ui:password-reset-complete")


class PasswordChangeView(auth_views.PasswordChangeView):
    """Change the signed-in person's password: this browser stays signed in, every other
    session and every JWT of theirs ends (minds.passwords)."""

    success_url = reverse_lazy("ui:password-change-done")
