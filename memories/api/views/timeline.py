"""Timeline actions: a page of one path's episodes in the order they happened, and the
episodes around one."""

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.response import Response

from memories import timeline as timelines
from memories.api.schema import ERRORS
from memories.api.serializers.memory import MemorySerializer
from memories.api.serializers.timeline import (
    NeighboursQuery,
    NeighboursSerializer,
    TimelinePageSerializer,
    TimelineQuery,
)
from synapse.api import MIND_PARAMETER


class NotEpisodic(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "This memory is not episodic: only episodes are on a timeline."
    default_code = "not_episodic"


class TimelineActions:
    """timeline, neighbours."""

    @extend_schema(operation_id="memory_timeline", parameters=[MIND_PARAMETER, TimelineQuery],
                   responses={200: TimelinePageSerializer, **ERRORS}, tags=["memory"])
    @action(detail=False, methods=["get"], query_serializer=TimelineQuery)
    def timeline(self, request):
        """The episodic memories of exactly one path (the root when ``path`` is left out;
        sub-paths have their own timelines), in the order they happened: by
        ``occurred_at``, then the order written. ``after`` or ``before`` (an episode of
        this timeline, ``mem_…``, or a time) pages through it; an id that is not an
        episode of this timeline is a 404."""
        query = self.query
        episodes = timelines.timeline(self.mind, query["path"]).without_vectors()
        anchors = {}
        for side in ("after", "before"):
            anchor = query.get(side)
            if isinstance(anchor, str):
                anchor = episodes.filter(pk=anchor).first()
                if anchor is None:
                    raise exceptions.NotFound(f"No such episode on the timeline of "
                                              f"{query['path'] or 'the root'}.")
            anchors[side] = anchor
        page = timelines.timeline_page(episodes, limit=query["limit"], **anchors)
        return Response({"path": query["path"], "count": len(page.memories),
                         "has_more": page.has_more,
                         "results": MemorySerializer(page.memories, many=True).data})

    @extend_schema(operation_id="memory_neighbours", parameters=[MIND_PARAMETER,
                                                                 NeighboursQuery],
                   responses={200: NeighboursSerializer, **ERRORS}, tags=["memory"])
    @action(detail=True, methods=["get"], query_serializer=NeighboursQuery)
    def neighbours(self, request, memory_id: str):
        """The ``n`` episodes just before and just after this one on its path's timeline,
        whoever wrote them. A memory that is not episodic is a 400 ``not_episodic``."""
        memory = self.get_object()
        try:
            before, after = timelines.neighbours(memory, self.query["n"])
        except timelines.NotAnEpisode as error:
            raise NotEpisodic(str(error)) from error
        return Response({"memory": memory.id,
                         "before": MemorySerializer(before, many=True).data,
                         "after": MemorySerializer(after, many=True).data})
