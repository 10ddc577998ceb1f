"""Serializers of the memory API, one module per concern (memory, search, verification,
lifecycle, transfer, insight), as the viewset's mixins in memories.api.views are split."""
