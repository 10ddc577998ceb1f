"""Web UI forms for minds, Mind Keys, members and invitations, OAuth consent, and the
rate-limited sign-in forms (UI, admin)."""

from types import SimpleNamespace

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import validate_email
from django.http import QueryDict
from django.utils import timezone
from oauth2_provider.forms import AllowForm

from minds.access import Action, minds_for
from minds.models import Mind, MindKey, OAuthConnection, Role
from minds.services import clean_key_paths
from synapse.text import validate_single_line


class MindForm(forms.Form):
    name = forms.CharField(max_length=200, strip=True, validators=[validate_single_line],
                           widget=forms.TextInput(attrs={"placeholder": "e.g. Michael's Mind"}))


class MindSettingsForm(forms.Form):
    name = forms.CharField(max_length=200, strip=True, validators=[validate_single_line])
    unverified_in_recall = forms.ChoiceField(
        label="Unverified memories in recall", choices=Mind.UnverifiedInRecall.choices,
        widget=forms.RadioSelect)
    search_language = forms.ChoiceField(
        label="Search language", choices=Mind._meta.get_field("search_language").choices,
        help_text="Keyword search stems words in this language and ignores accents; changing "
                  "it re-indexes this mind's memories in the background.")
    agents_may_reset = forms.BooleanField(
        required=False, label="Let agents reset a scope",
        help_text="Write Mind Keys may then purge every memory under a path for good "
                  "(POST /memory/reset), within their paths. You always may.")


class MindDeleteForm(forms.Form):
    """Deleting a mind asks for its name, typed out, as confirmation."""

    confirm_name = forms.CharField(label="Type the mind's name to confirm", strip=False)

    def __init__(self, *args, mind: Mind, **kwargs):
        super().__init__(*args, **kwargs)
        self.mind = mind

    def clean_confirm_name(self) -> str:
        typed = self.cleaned_data["confirm_name"]
        if typed != self.mind.name:
            raise forms.ValidationError("That is not this mind's name; nothing was deleted.")
        return typed


class AccountDeleteForm(forms.Form):
    """Deleting one's account asks for the username, typed out, and the password."""

    confirm_username = forms.CharField(label="Type your username to confirm", strip=False,
                                       max_length=150)
    password = forms.CharField(label="Your password", strip=False, max_length=512,
                               widget=forms.PasswordInput(
                                   attrs={"autocomplete": "current-password"}))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_confirm_username(self) -> str:
        typed = self.cleaned_data["confirm_username"]
        if typed != self.user.get_username():
            raise forms.ValidationError("That is not your username; nothing was deleted.")
        return typed

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            raise forms.ValidationError("That is not your password; nothing was deleted.")
        return password


class KeyForm(forms.Form):
    name = forms.CharField(max_length=200, strip=True, validators=[validate_single_line],
                           widget=forms.TextInput(attrs={"placeholder": "e.g. laptop agent"}))
    scope = forms.ChoiceField(choices=MindKey.Scope.choices, initial=MindKey.Scope.WRITE)
    expires_at = forms.DateTimeField(
        required=False, label="Expires (optional, UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"])
    paths = forms.CharField(
        required=False, label="Paths (optional)",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "e.g. projects/memory-os"}),
        help_text="Limit the key to these paths and everything below them: one per line or "
                  "comma-separated. Empty: the whole mind.")

    def clean_paths(self) -> list[str]:
        return _entered_paths(self.cleaned_data["paths"])

    def clean_expires_at(self):
        expires_at = self.cleaned_data["expires_at"]
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return expires_at


def _entered_paths(text: str) -> list[str]:
    """Path prefixes as typed: one per line or comma-separated, normalised like a key's."""
    entered = text.replace(",", "\n").splitlines()
    return clean_key_paths([line for line in entered if line.strip()])


class ConsentForm(AllowForm):
    """The OAuth consent page (/oauth/authorize): DOT's hidden fields (the client's
    request), and what the human picks: one of their minds, read or read and write (only
    when the client asked for writing), and optional path prefixes."""

    mind = forms.ChoiceField(label="Mind", widget=forms.RadioSelect)
    access = forms.ChoiceField(label="Access", widget=forms.RadioSelect)
    paths = forms.CharField(
        required=False, label="Paths (optional)",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "e.g. projects/memory-os"}),
        help_text="Limit the app to these paths and everything below them: one per line "
                  "or comma-separated. Empty: the whole mind.")

    def __init__(self, *args, user, requested_scopes: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        # Connecting an app hands it agent access: minds the person may manage (owners).
        self.minds = {mind.id: mind for mind in minds_for(user, Action.MANAGE).order_by(
            "name", "created_at")}
        self.fields["mind"].choices = [(mind.id, mind.name) for mind in self.minds.values()]
        if len(self.minds) == 1:
            self.fields["mind"].initial = next(iter(self.minds))
        choices = [(OAuthConnection.READ, "Read only: recall and search")]
        if OAuthConnection.WRITE in requested_scopes:
            choices.insert(0, (OAuthConnection.WRITE, "Read and write: also store, change "
                                                      "and forget memories"))
        self.fields["access"].choices = choices
        self.fields["access"].initial = choices[0][0]

    def clean_mind(self) -> Mind:
        return self.minds[self.cleaned_data["mind"]]

    def clean_paths(self) -> list[str]:
        return _entered_paths(self.cleaned_data["paths"])


def sign_in_wait(request) -> int | None:
    """Seconds before this password attempt may be checked, or None to check it now.

    The attempt spends the budgets of ``POST /auth/login`` (per client address, and per
    username from that address), so the web sign-in and the admin's are no way around the
    API's limit on password guessing."""
    from synapse.throttling import LoginAttemptThrottle, ScopeRateThrottle

    # What the API throttles read of a login request: the client address, the username.
    attempt = SimpleNamespace(META=request.META, headers=request.headers, method="POST",
                              user=None, query_params=QueryDict(),
                              data={"username": request.POST.get("username", "")})
    login_route = SimpleNamespace(throttle_scope="login")
    waits = [throttle.wait() for throttle in (ScopeRateThrottle(), LoginAttemptThrottle())
             if not throttle.allow_request(attempt, login_route)]
    return max(waits) if waits else None


class RateLimitedSignIn:
    """For an AuthenticationForm: a refused attempt is an error before any password is
    checked; ``retry_after`` then holds the seconds to wait (see ``refuse_if_limited``)."""

    retry_after: int | None = None

    def clean(self):
        self.retry_after = sign_in_wait(self.request)
        if self.retry_after is not None:
            raise forms.ValidationError(f"Too many sign-in attempts. Try again in "
                                        f"{self.retry_after} seconds.", code="throttled")
        return super().clean()


def refuse_if_limited(response, form):
    """A sign-in page answering a rate-limited attempt becomes a 429 with Retry-After."""
    seconds = getattr(form, "retry_after", None)
    if seconds is not None:
        response.status_code = 429
        response["Retry-After"] = str(seconds)
    return response


class SignInForm(RateLimitedSignIn, AuthenticationForm):
    """The web UI's sign-in (/ui/login)."""


class AdminSignInForm(RateLimitedSignIn, AdminAuthenticationForm):
    """The admin's sign-in (/admin/login/)."""


class PasswordResetRequestForm(forms.Form):
    """The address a reset link is mailed to (/ui/password-reset)."""

    email = forms.EmailField(max_length=254, label="E-mail address",
                             widget=forms.EmailInput(attrs={"autocomplete": "email",
                                                            "autofocus": True}))


# -- Members and invitations --------------------------------------------------------------

ROLE_HELP = ("Owner: everything, members and keys included. Editor: review, correct, verify "
             "and trash memories. Viewer: read only.")


class InviteForm(forms.Form):
    """Invite a username or an e-mail address (told apart by the ``@``) with a role."""

    invitee = forms.CharField(max_length=254, strip=True, label="Username or e-mail address",
                              widget=forms.TextInput(attrs={"placeholder": "e.g. dana or "
                                                            "dana@example.com"}))
    role = forms.ChoiceField(choices=Role.choices, initial=Role.EDITOR, help_text=ROLE_HELP)

    def clean_invitee(self) -> dict:
        value = self.cleaned_data["invitee"]
        if "@" in value:
            validate_email(value)
            return {"email": value}
        return {"username": value}


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


def invite_wait(request) -> int | None:
    """Seconds before this person may invite again, or None: the budget of ``POST
    /minds/{id}/invitations`` (scope ``invite``, per user), so the page is no way around
    it."""
    from synapse.throttling import ScopeRateThrottle

    attempt = SimpleNamespace(META=request.META, headers=request.headers, method="POST",
                              user=request.user, query_params=QueryDict())
    throttle = ScopeRateThrottle()
    if throttle.allow_request(attempt, SimpleNamespace(throttle_scope="invite")):
        return None
    return throttle.wait()


class InvitationSignupForm(forms.Form):
    """Create an account from an invitation's link: its e-mail address is the invitation's."""

    username = forms.CharField(max_length=150, strip=True,
                               widget=forms.TextInput(attrs={"autocomplete": "username"}))
    password1 = forms.CharField(label="Password", strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete":
                                                                  "new-password"}))
    password2 = forms.CharField(label="Password again", strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete":
                                                                  "new-password"}))

    def __init__(self, *args, email: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.email = email

    def clean_username(self) -> str:
        value = self.cleaned_data["username"]
        for validator in get_user_model()._meta.get_field("username").validators:
            validator(value)
        return value

    def clean(self):
        cleaned = super().clean()
        first, second = cleaned.get("password1"), cleaned.get("password2")
        if first and second and first != second:
            self.add_error("password2", "The two passwords differ.")
        elif first and cleaned.get("username"):
            candidate = get_user_model()(username=cleaned["username"], email=self.email)
            try:
                password_validation.validate_password(first, user=candidate)
            except forms.ValidationError as error:
                self.add_error("password1", error)
        return cleaned
