"""Password reset by e-mail and password change: one place for the web UI and the API.

A reset mails a one-time link (Django's token: it stops working once the password changes,
and after PASSWORD_RESET_TIMEOUT) to every active account with the address; the answer is
the same whether or not one has it. A new password, by reset or by change, ends every other
sign-in of the person: their other browser sessions (Django checks each session against
the password hash) and every JWT access and refresh token (simplejwt's CHECK_REVOKE_TOKEN;
minds.api.serializers.RefreshSerializer). Mind Keys and agents' connections are the mind's
credentials, not the person's, and keep working (docs/security.md, "Passwords").
"""

import hashlib
import math
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import password_validation
from django.contrib.auth.forms import PasswordResetForm
from django.http import QueryDict
from rest_framework.settings import api_settings

from minds.mail import mail_configured
from synapse.origin import public_origin

__all__ = ["mail_configured", "password_change", "password_reset_send", "reset_wait"]

SUBJECT_TEMPLATE = "registration/password_reset_subject.txt"
EMAIL_TEMPLATE = "registration/password_reset_email.txt"


def reset_wait(request, email: str) -> int | None:
    """Seconds before another reset e-mail may be asked for from this client address, or
    for this e-mail address; None to send it now. Each request spends both budgets
    (``SYNAPSE_RATE_PASSWORD_RESET``), so neither many addresses from one client nor one
    mailbox from many clients can be flooded."""
    from synapse.throttling import ScopeRateThrottle, spend

    attempt = SimpleNamespace(META=request.META, headers=request.headers, method="POST",
                              user=None, query_params=QueryDict())
    route = SimpleNamespace(throttle_scope="password_reset")
    throttle = ScopeRateThrottle()
    if not throttle.allow_request(attempt, route):
        return throttle.wait()
    rate = api_settings.DEFAULT_THROTTLE_RATES.get("password_reset")
    if rate is None:
        return None
    mailbox = hashlib.sha256(email.strip().lower().encode()).hexdigest()[:32]
    seconds = spend(f"password_reset:mailbox:{mailbox}", rate)
    return None if seconds is None else max(1, math.ceil(seconds))


def password_reset_send(request, email: str) -> None:
    """Mail a reset link to each active account with ``email`` (case-insensitive), built
    on this server's public origin; nothing when there is none."""
    form = PasswordResetForm({"email": email})
    if not form.is_valid():
        return
    form.save(request=request, subject_template_name=SUBJECT_TEMPLATE,
              email_template_name=EMAIL_TEMPLATE,
              extra_email_context={"origin": public_origin(request),
                                   "timeout_minutes": settings.PASSWORD_RESET_TIMEOUT // 60})


def password_change(*, user, new_password: str) -> None:
    """Set ``user``'s password (validated by the caller): every JWT and every other session
    of theirs ends with the old one (the module docstring)."""
    user.set_password(new_password)
    user.save(update_fields=["password"])
    password_validation.password_changed(new_password, user)
