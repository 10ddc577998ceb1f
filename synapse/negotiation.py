"""Content negotiation. Its own module: DRF imports it while `rest_framework.views` is
still loading, so it cannot live beside the API views."""

from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation


class LenientContentNegotiation(DefaultContentNegotiation):
    """An `Accept` header no renderer satisfies gets the view's first renderer (JSON)
    instead of a 406: HTTP lets a server disregard Accept (RFC 9110 §12.5.1), agents' HTTP
    stacks send odd ones, and an answer the client can read beats a refusal."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except exceptions.NotAcceptable:
            return renderers[0], renderers[0].media_type
