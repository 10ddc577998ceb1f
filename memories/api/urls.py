"""Memory routes, at the root (``/memory…``) as existing Synapse clients expect."""

from django.urls import path, register_converter

from memories.api import (
    insight_views,
    lifecycle_views,
    search_views,
    verification_views,
    views,
)


class MemoryIdConverter:
    regex = r"mem_[A-Za-z0-9]{1,36}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(MemoryIdConverter, "memory_id")

urlpatterns = [
    # Core (memories.api.views)
    path("memory", views.MemoryCollectionView.as_view(), name="memory-collection"),
    path("memory/recall", views.RecallView.as_view(), name="memory-recall"),
    path("memory/health", views.HealthView.as_view(), name="memory-health"),
    path("memory/<memory_id:memory_id>", views.MemoryDetailView.as_view(), name="memory-detail"),
    # Search and embeddings (memories.api.search_views)
    path("memory/search", search_views.SearchView.as_view(), name="memory-search"),
    path("memory/semantic-search", search_views.SemanticSearchView.as_view(),
         name="memory-semantic-search"),
    path("memory/by-tag", search_views.ByTagView.as_view(), name="memory-by-tag"),
    path("memory/related/<memory_id:memory_id>", search_views.RelatedView.as_view(),
         name="memory-related"),
    path("memory/<memory_id:memory_id>/related", search_views.RelatedAliasView.as_view(),
         name="memory-related-alias"),
    path("memory/embed-batch", search_views.EmbedBatchView.as_view(), name="memory-embed-batch"),
    path("memory/embed-batch-status", search_views.EmbedBatchStatusView.as_view(),
         name="memory-embed-batch-status"),
    # Verification (memories.api.verification_views)
    path("memory/unverified", verification_views.UnverifiedView.as_view(),
         name="memory-unverified"),
    path("memory/bulk-verify", verification_views.BulkVerifyView.as_view(),
         name="memory-bulk-verify"),
    path("memory/<memory_id:memory_id>/verify", verification_views.VerifyView.as_view(),
         name="memory-verify"),
    path("memory/<memory_id:memory_id>/unverify", verification_views.UnverifyView.as_view(),
         name="memory-unverify"),
    # Lifecycle: versions, trash, sync, bulk, export/import, insight (memories.api.lifecycle_views)
    path("memory/<memory_id:memory_id>/versions", lifecycle_views.MemoryVersionsView.as_view(),
         name="memory-versions"),
    path("memory/<memory_id:memory_id>/revert", lifecycle_views.MemoryRevertView.as_view(),
         name="memory-revert"),
    path("memory/trash", lifecycle_views.TrashView.as_view(), name="memory-trash"),
    path("memory/<memory_id:memory_id>/restore", lifecycle_views.MemoryRestoreView.as_view(),
         name="memory-restore"),
    path("memory/expiring", lifecycle_views.ExpiringView.as_view(), name="memory-expiring"),
    path("memory/diff", lifecycle_views.DiffView.as_view(), name="memory-diff"),
    path("memory/sync", lifecycle_views.SyncView.as_view(), name="memory-sync"),
    path("memory/bulk-delete", lifecycle_views.BulkDeleteView.as_view(),
         name="memory-bulk-delete"),
    path("memory/mind-export", lifecycle_views.ExportView.as_view(), name="memory-export"),
    path("mind/export", lifecycle_views.MindExportView.as_view(), name="mind-export"),
    path("memory/mind-import", lifecycle_views.ImportView.as_view(), name="memory-import"),
    path("memory/audit", lifecycle_views.AuditView.as_view(), name="memory-audit"),
    path("memory/stats", lifecycle_views.StatsView.as_view(), name="memory-stats"),
    # Insight: contradictions and compaction (memories.api.insight_views)
    path("memory/contradictions", insight_views.ContradictionsView.as_view(),
         name="memory-contradictions"),
    path("memory/compact", insight_views.CompactView.as_view(), name="memory-compact"),
    path("memory/<memory_id:memory_id>/uncompact", insight_views.UncompactView.as_view(),
         name="memory-uncompact"),
]
