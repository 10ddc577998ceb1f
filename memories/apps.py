"""App config of ``memories``: the memories of each mind, with their services, search and API."""

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
