"""What a scope reset leaves behind: tombstones without text (docs/api.md, "Scope reset").

A reset tombstone keeps the memory's id and a keyed hash of its (category, key), so that
sync can refuse a peer's copy of a purged memory (same id, or same category and key under
a new id) without this instance keeping the key itself."""

from django.utils.crypto import salted_hmac

from minds.models import Mind


def key_hash(mind: Mind | str, category: str, key: str) -> str:
    """HMAC-SHA256 of (category, key), keyed by SECRET_KEY and the mind: the same pair
    hashes differently in every mind and cannot be tested without the server's secret."""
    mind_id = mind if isinstance(mind, str) else mind.pk
    return salted_hmac(f"synapse.reset-tombstone:{mind_id}", f"{category}\x00{key}",
                       algorithm="sha256").hexdigest()
