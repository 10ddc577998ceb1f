"""The server's public origin: the OAuth resource its tokens are for, and the base of the
URLs it hands agents (the MCP URL, metadata documents, ready-made configurations)."""

from django.conf import settings


def public_origin(request) -> str:
    """``SYNAPSE_PUBLIC_URL`` when set, else the request's own scheme and Host (which
    Django has already checked against ALLOWED_HOSTS), without a trailing slash."""
    if settings.PUBLIC_URL:
        return settings.PUBLIC_URL
    return f"{request.scheme}://{request.get_host()}"


def public_url(request, path: str) -> str:
    """An absolute URL of this server for ``path`` (which starts with ``/``)."""
    return public_origin(request) + path
