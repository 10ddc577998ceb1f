"""Memory routes, at the root (``/memory…``) as existing Synapse clients expect: the
MemoryViewSet on a router, plus the compatibility paths of two of its actions and the
citation path of a version."""

from django.urls import path, register_converter
from rest_framework.routers import SimpleRouter

from memories.api.views import MEMORY_ID_PATTERN, MemoryViewSet


class MemoryIdConverter:
    regex = MEMORY_ID_PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(MemoryIdConverter, "memory_id")

# Path syntax (not regex): the memory id is the memory_id converter, as in the extra paths.
router = SimpleRouter(trailing_slash=False, use_regex_path=False)
router.register("memory", MemoryViewSet, basename="memory")

urlpatterns = [
    *router.urls,
    # /memory/{id}/related answers as /memory/related/{id}; /mind/export as /memory/mind-export.
    path("memory/<memory_id:memory_id>/related",
         MemoryViewSet.route("get", "related", handler="related_alias"),
         name="memory-related-alias"),
    # A citation, mem_…@vN, is an address too: exactly that version.
    path("memory/<memory_id:memory_id>@v<int:version>",
         MemoryViewSet.route("get", "version_detail", handler="version_by_citation"),
         name="memory-citation"),
    path("mind/export", MemoryViewSet.route("get", "mind_export", handler="mind_export_alias"),
         name="mind-export"),
]
