"""Password reset by e-mail and password change: one place for the web UI and the API.

A reset mails a one-time link (Django's token: it stops working once the password changes,
and after PASSWORD_RESET_TIMEOUT) to every active account with the address; the answer is
the same, and takes the same time, whether or not one has it: the request only queues the
mail (one INSERT … SELECT, which adds a row or none) and never talks to SMTP. The embedding
worker (``manage.py embed_worker``), or ``manage.py send_queued_mail``, sends what is
queued (``send_queued_resets``): it re-checks the account (still active, same address,
a usable password), builds the link on synapse.origin.link_origin, mails it and deletes the
row. A failed send is logged without the link and retried RESET_MAX_ATTEMPTS times in all,
a minute apart and then twice as long each time, then dropped; a row older than
PASSWORD_RESET_TIMEOUT is dropped unsent (ask again).

A new password, by reset or by change, ends every other sign-in of the person: their other
browser sessions (Django checks each session against the password hash) and every JWT
access and refresh token (simplejwt's CHECK_REVOKE_TOKEN;
minds.api.serializers.RefreshSerializer). Mind Keys and agents' connections are the mind's
credentials, not the person's, and keep working (docs/security.md, "Passwords").
"""

import hashlib
import logging
from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.contrib.auth import password_validation
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.tokens import default_token_generator
from django.core.mail import EmailMultiAlternatives
from django.db import connection, transaction
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from rest_framework.throttling import BaseThrottle

from minds.mail import mail_configured
from minds.models import QueuedResetMail
from synapse.origin import link_origin

__all__ = ["mail_configured", "password_change", "password_reset_send", "reset_wait",
           "send_queued_resets"]

logger = logging.getLogger("synapse.passwords")

SUBJECT_TEMPLATE = "registration/password_reset_subject.txt"
EMAIL_TEMPLATE = "registration/password_reset_email.txt"
# A failed send is tried again this many times in all, RESET_RETRY_SECONDS after the first
# failure and twice as long after each next one (1, 2, 4, 8 minutes), then dropped.
RESET_MAX_ATTEMPTS = 5
RESET_RETRY_SECONDS = 60
# Queued mails sent per call of send_queued_resets (the worker calls it once per loop).
RESET_DRAIN_LIMIT = 100


def reset_wait(request, email: str) -> int | None:
    """Seconds before another reset e-mail may be asked for from this client address, or
    for this e-mail address; None to send it now. Each request spends both budgets
    (``SYNAPSE_RATE_PASSWORD_RESET``), so neither many addresses from one client nor one
    mailbox from many clients can be flooded."""
    from synapse.throttling import wait_for

    # The address's budget is the one ScopeRateThrottle keys an anonymous request on.
    wait = wait_for("password_reset", f"ip:{BaseThrottle().get_ident(request)}")
    if wait is not None:
        return wait
    mailbox = hashlib.sha256(email.strip().lower().encode()).hexdigest()[:32]
    return wait_for("password_reset", f"mailbox:{mailbox}")


# One statement whether or not an account has the address: it adds a row or none
# (auth_user: AUTH_USER_MODEL is Django's own; QueuedResetMail.user is unique).
_QUEUE_RESET = """
    INSERT INTO minds_queuedresetmail (user_id, email, origin, created_at, attempts, send_after)
    SELECT id, %(email)s, %(origin)s, %(now)s, 0, %(now)s FROM auth_user
    WHERE UPPER(email) = UPPER(%(email)s) AND is_active
    ON CONFLICT (user_id) DO NOTHING
"""


def password_reset_send(request, email: str) -> None:
    """Queue a reset mail for each active account with ``email`` (case-insensitive; the
    worker checks it again): one statement, whether or not there is one, and no SMTP. In
    development the row records the origin the request was made on (the link's origin
    there: synapse.origin.link_origin); in production none (SYNAPSE_PUBLIC_URL)."""
    origin = "" if settings.PRODUCTION else link_origin(request)
    now = timezone.now()
    with connection.cursor() as cursor:
        # One queued mail per account: asking again while one waits adds nothing.
        cursor.execute(_QUEUE_RESET, {"email": email.strip(), "origin": origin, "now": now})


class Drained(NamedTuple):
    """What one ``send_queued_resets`` did: mails sent, rows dropped unsent, sends failed
    and put off."""

    sent: int = 0
    dropped: int = 0
    deferred: int = 0

    def __bool__(self) -> bool:
        """Whether a row was sent or dropped (the worker's loop: there may be more)."""
        return bool(self.sent or self.dropped)


def send_queued_resets(limit: int = RESET_DRAIN_LIMIT) -> Drained:
    """Send the queued reset mails that are due, at most ``limit``; each row is locked while
    it is sent (SKIP LOCKED: several workers share the queue) and deleted once sent or
    dropped. Stops at the first failed send (the SMTP server is likely down: the next call
    tries again)."""
    sent = dropped = deferred = 0
    for _ in range(limit):
        with transaction.atomic():
            row = (QueuedResetMail.objects.select_for_update(skip_locked=True)
                   .filter(send_after__lte=timezone.now()).order_by("send_after", "id")
                   .first())
            if row is None:
                break
            outcome = _send_queued(row)
        sent += outcome == "sent"
        dropped += outcome == "dropped"
        if outcome == "deferred":
            deferred += 1
            break
    if sent:
        logger.info("sent %d password-reset mails", sent)
    return Drained(sent, dropped, deferred)


def _send_queued(row: QueuedResetMail) -> str:
    """Send one queued mail (locked by the caller): "sent", "dropped" or "deferred"."""
    user = next((user for user in PasswordResetForm().get_users(row.email)
                 if user.pk == row.user_id), None)
    origin = link_origin(recorded=row.origin)
    reason = None
    if user is None:
        reason = "the account is inactive, has no password or another address now"
    elif row.created_at < timezone.now() - timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT):
        reason = "asked for longer ago than PASSWORD_RESET_TIMEOUT"
    elif not mail_configured():
        reason = "this server sends no mail (EMAIL_HOST is not set)"
    elif not origin:
        reason = "SYNAPSE_PUBLIC_URL is not set (the link's origin in production)"
    if reason is not None:
        (logger.info if user is None else logger.warning)(
            "password-reset mail for user %d dropped: %s", row.user_id, reason)
        row.delete()
        return "dropped"
    context = {"user": user, "origin": origin,
               "uid": urlsafe_base64_encode(force_bytes(user.pk)),
               "token": default_token_generator.make_token(user),
               "timeout_minutes": settings.PASSWORD_RESET_TIMEOUT // 60}
    # Not PasswordResetForm.send_mail: it logs and swallows a failed send, and the retries
    # below need to see it.
    subject = "".join(render_to_string(SUBJECT_TEMPLATE, context).splitlines())
    message = EmailMultiAlternatives(subject, render_to_string(EMAIL_TEMPLATE, context),
                                     settings.DEFAULT_FROM_EMAIL, [user.email])
    try:
        message.send()
    except Exception as error:  # noqa: BLE001 (SMTP errors are many; never the link)
        row.attempts += 1
        if row.attempts >= RESET_MAX_ATTEMPTS:
            logger.warning("password-reset mail for user %d dropped after %d attempts: %s",
                           row.user_id, row.attempts, error.__class__.__name__)
            row.delete()
            return "dropped"
        logger.warning("password-reset mail for user %d not sent (attempt %d of %d): %s",
                       row.user_id, row.attempts, RESET_MAX_ATTEMPTS,
                       error.__class__.__name__)
        row.send_after = timezone.now() + timedelta(
            seconds=RESET_RETRY_SECONDS * 2 ** (row.attempts - 1))
        row.save(update_fields=["attempts", "send_after"])
        return "deferred"
    row.delete()
    return "sent"


def password_change(*, user, new_password: str) -> None:
    """Set ``user``'s password (validated by the caller): every JWT and every other session
    of theirs ends with the old one (the module docstring)."""
    user.set_password(new_password)
    user.save(update_fields=["password"])
    password_validation.password_changed(new_password, user)
