"""Random public identifiers: ``m_…`` minds, ``mem_…`` memories, ``mkid_…`` keys,
``oc_…`` OAuth connections, ``invid_…`` invitations."""

import secrets
import string

ALPHABET = string.ascii_letters + string.digits


def random_token(length: int) -> str:
    """A cryptographically random base62 string."""
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def new_mind_id() -> str:
    return "m_" + random_token(16)


def new_memory_id() -> str:
    return "mem_" + random_token(20)


def new_key_id() -> str:
    return "mkid_" + random_token(12)


def new_connection_id() -> str:
    return "oc_" + random_token(16)


def new_invitation_id() -> str:
    return "invid_" + random_token(16)
