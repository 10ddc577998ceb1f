"""App config of ``minds``: minds, Mind Keys and the OpenAPI auth extension."""

from django.apps import AppConfig


class MindsConfig(AppConfig):
    name = "minds"
    verbose_name = "Minds and keys"

    def ready(self):
        from minds import schema  # noqa: F401 - registers the OpenAPI auth extension
