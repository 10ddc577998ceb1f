"""The server's public origin: the OAuth resource its tokens are for, and the base of the
URLs it hands agents (the MCP URL, metadata documents, ready-made configurations) and
people (password-reset and invitation links: ``link_origin``)."""

from django.conf import settings


def request_origin(request) -> str:
    """The request's own scheme and Host (which Django has already checked against
    ALLOWED_HOSTS), without a trailing slash."""
    return f"{request.scheme}://{request.get_host()}"


def public_origin(request) -> str:
    """``SYNAPSE_PUBLIC_URL`` when set, else the request's own origin."""
    if settings.PUBLIC_URL:
        return settings.PUBLIC_URL
    return request_origin(request)


def public_url(request, path: str) -> str:
    """An absolute URL of this server for ``path`` (which starts with ``/``)."""
    return public_origin(request) + path


def link_origin(request=None, *, recorded: str = "") -> str:
    """The origin the links handed to people are built on (password-reset mail, invitation
    mail, the invitation link in the API answer and on the Members page): a link carries a
    secret, so it must never point where a stranger's Host header says.

    - ``SYNAPSE_PUBLIC_URL`` when set;
    - in production without it, ``""``: the link is a path on this server (production
      refuses to start with EMAIL_HOST and no SYNAPSE_PUBLIC_URL, so such a link is never
      mailed);
    - in development, the request's own origin (``make run`` works on any address), or,
      for a link built after the request (a queued reset mail: minds.passwords), the
      origin ``recorded`` from the request it was asked on.
    """
    if settings.PUBLIC_URL:
        return settings.PUBLIC_URL
    if settings.PRODUCTION:
        return ""
    return request_origin(request) if request is not None else recorded
