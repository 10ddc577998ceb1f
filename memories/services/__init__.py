"""Every write to memories: keyword-only, one transaction each, audited (one module per concern).

Callers import from here; the invariants every write keeps: docs/internals.md.
"""

from memories.services.bulk import (
    CredentialsNotRotated,
    credentials_rotate,
    memory_bulk_delete,
    memory_purge_trash,
)
from memories.services.compaction import CompactedCluster, memory_compact, memory_uncompact
from memories.services.memory import (
    CredentialsContentRequired,
    IdempotencyConflict,
    IdempotentAnswer,
    MemoryConflict,
    OccurredAtNotEpisodic,
    StoreResult,
    agent_source,
    memory_delete,
    memory_restore,
    memory_revert,
    memory_store,
    memory_store_once,
    memory_update,
    recorded_by,
)
from memories.services.reset import ResetNotAllowed, RootReset, memory_reset
from memories.services.transfer import ImportRejected, SyncResult, memory_sync, mind_import
from memories.services.verification import (
    VersionConflict,
    memory_set_verified,
    memory_trash_many,
    memory_unverify_many,
    memory_verify_many,
)

__all__ = [
    "CompactedCluster", "CredentialsContentRequired", "CredentialsNotRotated",
    "IdempotencyConflict", "IdempotentAnswer", "ImportRejected", "MemoryConflict",
    "OccurredAtNotEpisodic", "ResetNotAllowed", "RootReset", "StoreResult", "SyncResult",
    "VersionConflict", "agent_source",
    "credentials_rotate",
    "memory_bulk_delete", "memory_compact", "memory_delete", "memory_purge_trash",
    "memory_reset",
    "memory_restore", "memory_revert", "memory_set_verified", "memory_store",
    "memory_store_once", "memory_sync", "memory_trash_many", "memory_uncompact",
    "memory_unverify_many", "memory_update", "memory_verify_many", "mind_import",
    "recorded_by",
]
