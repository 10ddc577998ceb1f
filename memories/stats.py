"""The counts of one mind's memories, as the API's stats and the web UI's stats page show them."""

from django.db.models import Count, Q
from django.utils import timezone

from memories.models import Category, Memory, MemoryTombstone, MemoryType, Priority, Source
from minds.models import Mind


def mind_stats(*, mind: Mind, path: str = "", memory_type: str | None = None) -> dict:
    """Totals of current memories (not in the trash, not superseded): verified, unverified,
    expired, by category, priority, source and type (every value, zeros included); plus
    the trash, the superseded and the purged (tombstones).

    ``path`` (normal form) narrows every count to that path and below, ``memory_type`` to
    one type. A purged memory leaves only its category and key, so with either of them
    ``purged`` is None: it cannot be told which tombstones they would count."""
    memories = Memory.objects.for_mind(mind).under(path)
    if memory_type:
        memories = memories.filter(memory_type=memory_type)
    now = timezone.now()
    current = Q(deleted_at__isnull=True, superseded_at__isnull=True)
    totals = memories.aggregate(
        total=Count("id", filter=current),
        verified=Count("id", filter=current & Q(verified=True)),
        expired=Count("id", filter=current & Q(expires_at__lte=now)),
        in_trash=Count("id", filter=Q(deleted_at__isnull=False)),
        superseded=Count("id", filter=Q(deleted_at__isnull=True, superseded_at__isnull=False)))
    groups = {}
    for name, choices in (("category", Category), ("priority", Priority), ("source", Source),
                          ("memory_type", MemoryType)):
        counts = dict(memories.current().order_by().values_list(name)
                      .annotate(n=Count("id")).values_list(name, "n"))
        groups[f"by_{name}"] = {value: counts.get(value, 0) for value in choices.values}
    narrowed = bool(path or memory_type)
    return {
        "total": totals["total"], "verified": totals["verified"],
        "unverified": totals["total"] - totals["verified"], **groups,
        "expired": totals["expired"], "in_trash": totals["in_trash"],
        "superseded": totals["superseded"],
        "purged": None if narrowed else MemoryTombstone.objects.for_mind(mind).count()}
