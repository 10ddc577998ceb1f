"""The memory API: one MemoryViewSet, composed of one mixin of actions per concern."""

from rest_framework import exceptions

from memories.api.views.core import CoreActions
from memories.api.views.insight import InsightActions
from memories.api.views.lifecycle import LifecycleActions
from memories.api.views.search import SearchActions
from memories.api.views.timeline import TimelineActions
from memories.api.views.transfer import TransferActions
from memories.api.views.verification import VerificationActions
from memories.filters import MemoryFilter
from memories.models import Memory, memory_of_mind
from synapse.api import MindScopedViewSet

MEMORY_ID_PATTERN = r"mem_[A-Za-z0-9]{1,36}"


# The mixins, one module each in this package (routes are in memories.api.urls, serializers
# in memories.api.serializers, same split):
# - ``core``: list, store (create), get (retrieve), update, delete (destroy), recall, health
# - ``search``: search, semantic-search, by-tag, related, embed-batch, embed-batch-status
# - ``timeline``: timeline, neighbours
# - ``verification``: unverified, verify, unverify, bulk-verify, bulk-unverify, bulk-trash
# - ``lifecycle``: versions, revert, trash, restore, expiring, bulk-delete
# - ``transfer``: diff, sync, mind-export, mind-import
# - ``insight``: audit, stats, contradictions, compact, uncompact
class MemoryViewSet(CoreActions, SearchActions, TimelineActions, VerificationActions,
                    LifecycleActions, TransferActions, InsightActions, MindScopedViewSet):
    """The memories of the request's mind (``/memory…``)."""

    # The model, for the schema; rows only ever come from get_queryset().
    queryset = Memory.objects.none()
    filterset_class = MemoryFilter
    lookup_url_kwarg = "memory_id"
    lookup_value_regex = MEMORY_ID_PATTERN
    lookup_value_converter = "memory_id"  # registered with this pattern in memories.api.urls

    def get_queryset(self):
        """Every memory of this mind (in the trash too); each action narrows it."""
        return Memory.objects.for_mind(self.mind)

    def get_object(self, *, in_trash_too: bool = False, vectors: bool = True) -> Memory:
        """The memory named in the path, of this mind and (unless ``in_trash_too``) not in
        the trash; anything else is a 404. ``vectors=False`` leaves the embedding and the
        search vectors unread (parsing the embedding costs more than the query) for
        actions that only show the memory."""
        memory = memory_of_mind(self.mind, self.kwargs[self.lookup_url_kwarg],
                                in_trash_too=in_trash_too, vectors=vectors)
        if memory is None:
            raise exceptions.NotFound("No such memory.")
        return memory

    def implied_mind(self, owned):
        """A human's request without ``?mind=`` on an action with ``mind_from_object``
        (verify, unverify): the mind of the memory in the path, when it is one of
        ``owned``; anyone else's memory is a 404, as a missing one."""
        mind = owned.filter(memories__pk=self.kwargs[self.lookup_url_kwarg]).first()
        if mind is None:
            raise exceptions.NotFound("No such memory.")
        return mind
