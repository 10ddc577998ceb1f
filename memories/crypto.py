"""Encryption at rest of ``credentials`` content: the one place that seals and opens it."""

import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

CREDENTIALS = "credentials"
# Every Fernet token starts with the version byte 0x80 and a 64-bit timestamp whose top
# bytes stay zero until 2106: this prefix. The database checks it (migration 0004).
FERNET_PREFIX = "gAAAAA"


class CredentialsUnreadable(Exception):
    """A credentials token that no configured key opens (a key was removed too early)."""


@functools.lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def keyring() -> MultiFernet:
    """The configured keys, newest first (read at call time, so tests can override them).

    They come from ``settings.CREDENTIALS_KEYS`` (env ``SYNAPSE_CREDENTIALS_KEYS``): the
    newest encrypts, all of them decrypt, and ``manage.py rotate_credentials`` re-encrypts
    every token with the newest one (:func:`rotate_token`)."""
    return _fernet(tuple(settings.CREDENTIALS_KEYS))


def encrypt(plaintext: str) -> str:
    return keyring().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return keyring().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeEncodeError) as error:
        raise CredentialsUnreadable(
            "This credentials memory was encrypted with a key that is not in "
            "SYNAPSE_CREDENTIALS_KEYS.") from error


def seal_content(category: str, plaintext: str) -> str:
    """What to store in ``content`` for ``plaintext`` in ``category``.

    A ``credentials`` memory (and every version snapshot of one) stores a Fernet token in
    ``content``, never the plaintext; other categories store plaintext."""
    return encrypt(plaintext) if category == CREDENTIALS else plaintext


def open_content(category: str, stored: str) -> str:
    """The plaintext of a stored ``content`` (decrypted for credentials).

    Readers never touch ``content`` of a credentials row directly:

    - to show a memory to an agent or in a listing: ``memories.recall.display_content``
      (redacted);
    - to reveal the plaintext (``GET /memory/{id}``, or a human explicitly asking for it):
      ``memory.plaintext_content()`` (Memory and MemoryVersion), i.e. this function;
    - to write: pass plaintext to the services (memories/services/), which seal it.
    """
    return decrypt(stored) if category == CREDENTIALS else stored


def rotate_token(token: str) -> str:
    """The same plaintext under the newest key. Raises CredentialsUnreadable."""
    try:
        return keyring().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeEncodeError) as error:
        raise CredentialsUnreadable("A credentials token no configured key opens.") from error

