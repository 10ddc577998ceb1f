"""App config of ``memories``: the memories of each mind, with their services, search and API."""

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"

    def preload_model(self) -> None:
        """Load what searches need now (the query encoder: memories.embeddings.preload),
        unless ``SYNAPSE_PRELOAD_MODEL`` is off (gunicorn's master calls this before forking
        its workers: synapse/gunicorn_conf.py)."""
        from django.conf import settings

        if settings.SYNAPSE["PRELOAD_MODEL"]:
            from memories.embeddings import preload

            preload()
