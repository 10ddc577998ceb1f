from django.apps import AppConfig


class SynapseConfig(AppConfig):
    name = "synapse"
