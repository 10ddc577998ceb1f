"""Episode context: the second search document of an episode (docs/search.md).

A turn of a conversation ("That sounds great, when?") often means nothing alone. Each
current episode gets ``context_vector``: the words of the CONTEXT_WINDOW episodes on each
side of it on its timeline (memories.timeline), stemmed in its mind's language, and its own
date, at weight C — below its
own key, tags (A) and content (B). Hybrid search and ``recall?q=`` rank with both
documents (memories.search); plain keyword search keeps to the memory's own words. The
vector stays on the memory itself: embedding the window measured worse (bench/retrieval.py).

``context_ids`` keeps that window's ids in timeline order, the episode included, so
search can pass a share of a turn's score to the turns next to it.

A trigger (migration 0010) queues an episode and its neighbours in ContextQueue on every
write that changes an episode's words or place; :func:`rebuild_contexts`, run by the
embedding worker beside the embeddings, empties it. A context is never stale for longer
than the worker's lag.
"""

from django.db import connection, transaction

from memories.models import ContextQueue

# The episodes on each side of one that form its context (migration 0010 queues the same
# window). ±2 measured best on LoCoMo; ±6 or the whole session hurt (docs/search.md).
CONTEXT_WINDOW = 2

# One statement rebuilds the context of every claimed memory still on a timeline, and
# clears it on the others (trashed, superseded, purged, no longer episodic). Neighbours are
# two range scans of the memory_timeline index each; credentials never lend their words.
REBUILD_SQL = f"""
WITH target AS (
    SELECT m.id, m.mind_id, m.path, m.occurred_at, m.seq, m.search_config,
           (m.memory_type = 'episodic' AND m.deleted_at IS NULL AND m.superseded_at IS NULL
            AND m.category <> 'credentials') AS on_timeline
    FROM memories_memory m
    WHERE m.id = ANY(%(ids)s)
    ORDER BY m.id
    FOR UPDATE OF m SKIP LOCKED
),
window_rows AS (
    SELECT t.id AS target_id, w.id, w.words, w.occurred_at, w.seq
    FROM target t
    CROSS JOIN LATERAL (
        (SELECT n.id, CASE WHEN n.category = 'credentials' THEN NULL ELSE n.content END
                AS words, n.occurred_at, n.seq
         FROM memories_memory n
         WHERE n.mind_id = t.mind_id AND n.path = t.path AND n.memory_type = 'episodic'
           AND n.deleted_at IS NULL AND n.superseded_at IS NULL
           AND (n.occurred_at, n.seq) < (t.occurred_at, t.seq)
         ORDER BY n.occurred_at DESC, n.seq DESC LIMIT {CONTEXT_WINDOW})
        UNION ALL
        (SELECT n.id, CASE WHEN n.category = 'credentials' THEN NULL ELSE n.content END,
                n.occurred_at, n.seq
         FROM memories_memory n
         WHERE n.mind_id = t.mind_id AND n.path = t.path AND n.memory_type = 'episodic'
           AND n.deleted_at IS NULL AND n.superseded_at IS NULL
           AND (n.occurred_at, n.seq) > (t.occurred_at, t.seq)
         ORDER BY n.occurred_at, n.seq LIMIT {CONTEXT_WINDOW})
        UNION ALL
        SELECT t.id, NULL, t.occurred_at, t.seq
    ) w
    WHERE t.on_timeline
),
context AS (
    SELECT t.id,
           setweight(to_tsvector(t.search_config::regconfig, coalesce(string_agg(
               w.words, ' ' ORDER BY w.occurred_at, w.seq), '')), 'C')
           || setweight(to_tsvector('simple'::regconfig,
                                    to_char(t.occurred_at AT TIME ZONE 'UTC',
                                            'FMDD FMMonth YYYY FMDay')), 'C') AS vector,
           array_agg(w.id ORDER BY w.occurred_at, w.seq) AS ids
    FROM target t
    JOIN window_rows w ON w.target_id = t.id
    GROUP BY t.id, t.occurred_at, t.search_config
)
UPDATE memories_memory m
SET context_vector = context.vector, context_ids = coalesce(context.ids, '{{}}')
FROM target LEFT JOIN context ON context.id = target.id
WHERE m.id = target.id
RETURNING m.id
"""  # noqa: S608 - only the constant CONTEXT_WINDOW is formatted in


def rebuild_now(cursor, ids: list[str]) -> set[str]:
    """Rebuild (or clear) the contexts of ``ids`` in one statement; the ids done (one
    that another transaction holds locked is skipped, one that is gone is not there)."""
    cursor.execute(REBUILD_SQL, {"ids": ids})
    return {row[0] for row in cursor.fetchall()}


def rebuild_contexts(*, limit: int = 500) -> int:
    """Take up to ``limit`` queued memories, rebuild (or clear) their contexts in one
    statement, and return how many queue rows were done.

    Queue rows are claimed with SKIP LOCKED, so several workers never take the same row;
    a memory locked by a writer is skipped and queued again (its writer's trigger queues
    it anyway when the write changes its window)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM memories_contextqueue WHERE id IN (SELECT id FROM "
            "memories_contextqueue ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) "
            "RETURNING memory_id", [limit])
        claimed = [row[0] for row in cursor.fetchall()]
        if not claimed:
            return 0
        ids = sorted(set(claimed))
        done = rebuild_now(cursor, ids)
        # Locked by a writer right now, or not found because it was purged: a purged
        # memory needs nothing; a locked one goes back in the queue.
        skipped = [memory_id for memory_id in ids if memory_id not in done]
        if skipped:
            cursor.execute("SELECT id FROM memories_memory WHERE id = ANY(%s)", [skipped])
            ContextQueue.objects.bulk_create(
                [ContextQueue(memory_id=row[0]) for row in cursor.fetchall()])
    return len(claimed)


def rebuild_all_contexts(*, rounds: int = 10_000) -> int:
    """Empty the queue (tests, benchmarks); at most ``rounds`` batches."""
    total = 0
    for _round in range(rounds):
        done = rebuild_contexts()
        if not done:
            break
        total += done
    return total


def context_pending() -> int:
    """How many queue rows wait for the worker."""
    return ContextQueue.objects.count()
