"""A mind's audit log: memory, mind, key and connection events (why it lives here:
docs/architecture.md)."""

from memories.models import AuditEvent
from minds.authentication import AgentPrincipal
from minds.models import Mind
from synapse.provenance import NO_PROVENANCE, Provenance


def describe_actor(actor) -> tuple[str, str, str]:
    """(type, id, label) of whoever acts: a Mind Key, an OAuth connection, a human, or the
    system (None)."""
    if isinstance(actor, AgentPrincipal) and actor.key is not None:
        return "key", actor.key.id, f"{actor.key.name} (…{actor.key.last4})"
    if isinstance(actor, AgentPrincipal):
        return "connection", actor.connection.id, f"connection {actor.connection.client_name}"
    if actor is None:
        return "system", "", "system"
    return "user", str(actor.pk), actor.get_username()


def by_member(member_id: int | None) -> dict:
    """The lookups of an audit event made by the member with this user id (``?member=``
    on GET /memory/audit and the Activity page); none, every event."""
    if member_id is None:
        return {}
    return {"actor_type": "user", "actor_id": str(member_id)}


def written_by_member(member_id: int | None) -> dict:
    """The lookups of a version written by the member with this user id (``?member=`` on
    GET /memory/{id}/versions and the memory page); none, every version."""
    if member_id is None:
        return {}
    return {"recorded_by_type": "user", "recorded_by_id": str(member_id)}


def record_event(*, mind: Mind, actor, action: str, memory_id: str = "",
                 details: dict | None = None,
                 provenance: Provenance = NO_PROVENANCE) -> AuditEvent:
    """Append one event. Callers never put secrets or credentials content in ``details``;
    ``provenance`` is what the request claimed about its agent (recorded, never trusted)."""
    actor_type, actor_id, label = describe_actor(actor)
    return AuditEvent.objects.create(mind=mind, actor_type=actor_type, actor_id=actor_id,
                                     actor_label=label, action=action, memory_id=memory_id,
                                     details=details or {}, **provenance.as_fields())
