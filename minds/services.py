"""Every write to minds and Mind Keys."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from minds.keys import generate_key
from minds.models import Mind, MindKey


@transaction.atomic
def mind_create(*, owner, name: str) -> Mind:
    return Mind.objects.create(owner=owner, name=name)


@transaction.atomic
def mind_update(*, mind: Mind, actor=None, **fields) -> Mind:
    """Rename a mind or change its settings (name, unverified_in_recall)."""
    for name, value in fields.items():
        setattr(mind, name, value)
    mind.save(update_fields=[*fields, "updated_at"])
    return mind


@transaction.atomic
def mind_delete(*, mind: Mind, actor=None) -> None:
    """Delete a mind with every memory, version, key and audit event of it."""
    mind.delete()


@transaction.atomic
def key_issue(*, mind: Mind, name: str, scope: str = MindKey.Scope.WRITE,
              expires_at: datetime | None = None, created_by=None) -> tuple[MindKey, str]:
    """Create a Mind Key; returns the row and the plaintext, which is never stored."""
    from memories.audit import record_event

    new = generate_key()
    key = MindKey.objects.create(mind=mind, name=name, scope=scope, expires_at=expires_at,
                                 lookup=new.lookup, hashed_secret=new.hashed, last4=new.last4,
                                 created_by=created_by)
    record_event(mind=mind, actor=created_by, action="key_issue",
                 details={"key_id": key.id, "name": name, "scope": scope, "last4": key.last4})
    return key, new.plaintext


@transaction.atomic
def key_revoke(*, key: MindKey, actor=None) -> MindKey:
    """Revoke a key; the next request made with it gets a 401."""
    from memories.audit import record_event

    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        record_event(mind=key.mind, actor=actor, action="key_revoke",
                     details={"key_id": key.id, "name": key.name, "last4": key.last4})
    return key
