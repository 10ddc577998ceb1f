"""The project's URLs plus two routes that fail for real, for the error-body tests."""

from django.db import connection
from django.urls import path
from rest_framework.response import Response

from synapse.api import SynapseAPIView
from synapse.urls import handler404, handler500, urlpatterns  # noqa: F401 - re-exported


class BrokenQueryView(SynapseAPIView):
    """A DRF view whose SQL is wrong: a database error inside the API."""

    def get(self, request):
        with connection.cursor() as cursor:
            cursor.execute("SELECT secret_column FROM no_such_table WHERE mind = 'x'")
        return Response({})


def broken_plain_view(request):
    """A plain Django view that crashes: the path outside DRF's exception handler."""
    raise RuntimeError("internal detail: SELECT * FROM minds_mindkey")


urlpatterns = [
    path("broken/query", BrokenQueryView.as_view()),
    path("broken/plain", broken_plain_view),
    *urlpatterns,
]
