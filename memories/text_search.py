"""A mind's text-search language: re-indexing its memories after the language changes.

Each memory row carries its mind's configuration (``Memory.search_config``, set by a
trigger on insert: migration 0011), and its ``search_vector`` is generated from it. When a
mind's language changes (minds.services.mind_update sets ``Mind.reindex_pending``), the
embedding worker calls :func:`reindex_memories` until nothing is left: each call moves up
to ``limit`` rows to the new configuration — which regenerates their search documents —
and queues the episodes among them for a context rebuild (memories.context). Until a row
is moved it keeps matching words stemmed the old way; docs/search.md, "Languages".
"""

from django.db import connection, transaction

from memories.models import ContextQueue

# Rows of minds waiting for a re-index, moved to their mind's configuration; rows a writer
# holds are skipped and taken by a later call.
_MOVE = """
WITH moved AS (
    SELECT m.id FROM memories_memory m JOIN minds_mind mind ON mind.id = m.mind_id
    WHERE mind.reindex_pending AND m.search_config <> 'synapse_' || mind.search_language
    LIMIT %s FOR UPDATE OF m SKIP LOCKED
)
UPDATE memories_memory m SET search_config = 'synapse_' || mind.search_language
FROM moved, minds_mind mind
WHERE m.id = moved.id AND mind.id = m.mind_id
RETURNING m.id, m.memory_type = 'episodic'
"""

# A mind is done when none of its rows is left in another configuration. The row lock
# this takes orders it after a language change being committed, which sets the flag again.
_DONE = """
UPDATE minds_mind mind SET reindex_pending = false
WHERE mind.reindex_pending AND NOT EXISTS (
    SELECT 1 FROM memories_memory m
    WHERE m.mind_id = mind.id AND m.search_config <> 'synapse_' || mind.search_language)
"""


def reindex_memories(*, limit: int = 500) -> int:
    """Move up to ``limit`` memories of minds whose language changed to the new
    configuration; return how many were moved."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_MOVE, [limit])
        moved = cursor.fetchall()
        ContextQueue.objects.bulk_create(
            [ContextQueue(memory_id=memory_id) for memory_id, episodic in moved if episodic])
        if len(moved) < limit:
            cursor.execute(_DONE)
    return len(moved)
