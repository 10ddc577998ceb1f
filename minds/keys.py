"""Mind Key secrets: generate, hash, and check in constant time."""

import hashlib
import hmac
from dataclasses import dataclass

from synapse.ids import ALPHABET, random_token

# A key reads ``mk_`` + a 12-character lookup prefix + a 40-character secret (base62).
KEY_PREFIX = "mk_"
LOOKUP_LENGTH = 12
SECRET_LENGTH = 40


@dataclass(frozen=True)
class NewKey:
    """A fresh key: the plaintext (shown once) and what is stored of it.

    Only the lookup prefix, a SHA-256 of the whole key and its last four characters are
    stored."""

    plaintext: str
    lookup: str
    hashed: str
    last4: str


def hash_key(plaintext: str) -> str:
    # The secret is 238 random bits, so a fast hash is as good as a slow one here and keeps
    # authentication cheap on every request.
    return hashlib.sha256(plaintext.encode()).hexdigest()


def generate_key() -> NewKey:
    lookup = random_token(LOOKUP_LENGTH)
    plaintext = KEY_PREFIX + lookup + random_token(SECRET_LENGTH)
    return NewKey(plaintext=plaintext, lookup=lookup, hashed=hash_key(plaintext),
                  last4=plaintext[-4:])


def parse_lookup(plaintext: str) -> str | None:
    """The lookup prefix of a well-formed key, or None."""
    if not plaintext.startswith(KEY_PREFIX):
        return None
    body = plaintext[len(KEY_PREFIX):]
    if len(body) != LOOKUP_LENGTH + SECRET_LENGTH or any(c not in ALPHABET for c in body):
        return None
    return body[:LOOKUP_LENGTH]


def key_matches(plaintext: str, hashed: str) -> bool:
    return hmac.compare_digest(hash_key(plaintext), hashed)
