"""The agent API for memories: MemoryViewSet (views/), its serializers, filters and routes."""
