"""Whether this server sends e-mail (password reset links, invitations)."""

from django.conf import settings


def mail_configured() -> bool:
    """Whether this server may mail a link: through SMTP (EMAIL_HOST), or on the console in
    development. Never in production without SMTP: the link would be a secret written to a
    log."""
    return bool(settings.EMAIL_HOST) or not settings.PRODUCTION
