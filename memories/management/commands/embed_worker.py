"""``manage.py embed_worker``: embed marked memories, re-index minds whose text-search
language changed (memories.text_search) and rebuild queued episode contexts
(memories.context), in batches until stopped; send the queued password-reset mail
(minds.passwords) and, every hour, delete OAuth clients nobody approved (minds.oauth). At
a lower CPU priority and with a bounded number of model threads, so it never starves the
web workers of its machine (docs/scaling.md, "The embedding worker")."""

import logging
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from memories.context import rebuild_contexts
from memories.embeddings import (
    embed_batch,
    get_model,
    limit_worker_cpu,
    mark_stale,
    note_worker_alive,
)
from memories.text_search import reindex_memories
from minds.oauth import prune_unused_clients
from minds.passwords import send_queued_resets

logger = logging.getLogger("synapse.embeddings")
# How often the worker deletes OAuth clients nobody approved (minds.oauth).
PRUNE_SECONDS = 3600


class Command(BaseCommand):
    help = ("Embed memories marked as needing an embedding and rebuild queued episode "
            "contexts; several workers may run at once.")

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int,
                            default=settings.SYNAPSE["EMBED_CLAIM_SIZE"],
                            help="memories claimed and embedded per transaction")
        parser.add_argument("--idle-sleep", type=float, default=1.0,
                            help="seconds to wait when nothing is pending")
        parser.add_argument("--once", action="store_true",
                            help="embed until nothing is pending, then exit")

    def handle(self, *args, batch_size, idle_sleep, once, **options):
        self._stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        niceness, threads = limit_worker_cpu()
        get_model()
        logger.info("embedding worker at niceness %d with %d model threads, %d per claim",
                    niceness, threads, batch_size)
        total, next_sweep, next_prune = 0, 0.0, 0.0
        while not self._stopping:
            close_old_connections()
            try:
                note_worker_alive(seconds=max(30.0, 3 * idle_sleep))
                if time.monotonic() >= next_sweep:
                    # Memories embedded by another model join the claimable queue.
                    stale = mark_stale()
                    next_sweep = time.monotonic() + settings.SYNAPSE["EMBED_SWEEP_SECONDS"]
                    if stale:
                        logger.info("%d memories embedded by another model queued", stale)
                if time.monotonic() >= next_prune:
                    # OAuth clients registered anonymously that nobody approved in a day.
                    pruned = prune_unused_clients()
                    next_prune = time.monotonic() + PRUNE_SECONDS
                    if pruned:
                        logger.info("%d unused OAuth clients deleted", pruned)
                # Re-indexing and contexts first: one statement for many memories, far
                # cheaper than the model, so an episode's neighbours are searchable before
                # its vector is (a re-index queues the contexts it changes).
                reindexed = reindex_memories()
                contexts = rebuild_contexts()
                done = embed_batch(limit=batch_size)
                mailed = send_queued_resets()
            except DatabaseError as error:
                if once:
                    raise
                # The database may be restarting; try again shortly instead of dying.
                logger.warning("embedding batch failed: %s", error.__class__.__name__)
                time.sleep(idle_sleep)
                continue
            total += done
            if done:
                logger.info("embedded %d memories (%d since start)", done, total)
            if reindexed:
                logger.info("re-indexed %d memories in their mind's new language", reindexed)
            if contexts:
                logger.info("rebuilt %d episode contexts", contexts)
            if not done and not contexts and not reindexed and not mailed:
                if once:
                    break
                time.sleep(idle_sleep)
        self.stdout.write(f"embedded {total} memories")

    def _stop(self, signum, frame):
        self._stopping = True
