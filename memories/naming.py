"""How a memory is named: its tags normalised and, when it has none, its key derived."""

import hashlib
import re

from django.utils.crypto import salted_hmac

from memories.models import Category


def normalize_tags(tags: list[str]) -> list[str]:
    """Lowercase, trimmed, de-duplicated, in first-seen order."""
    seen: list[str] = []
    for tag in tags:
        cleaned = tag.strip().lower()
        if cleaned and cleaned not in seen:
            seen.append(cleaned)
    return seen


def derive_key(content: str, category: str | None = None, path: str = "") -> str:
    """A stable key for a memory stored without one: first words plus a hash of the content
    and the path.

    The same content at the same path always derives the same key, so storing it again is
    ``unchanged``; at another path it is another memory. At the root the hash is the
    content's alone, as before paths existed, so keys derived then still match.
    Credentials get no words of the secret and a keyed hash (not a plain one, which a
    dictionary would reverse): ``credentials_<hmac>``.
    """
    hashed = f"{path}\n{content}" if path else content
    if category == Category.CREDENTIALS:
        digest = salted_hmac("synapse.credentials.derive_key", hashed,
                             algorithm="sha256").hexdigest()[:16]
        return f"credentials_{digest}"
    words = re.findall(r"\w+", content.lower())[:5]
    stem = "_".join(words)[:60] or "memory"
    digest = hashlib.sha256(hashed.encode()).hexdigest()[:10]
    return f"{stem}_{digest}"
