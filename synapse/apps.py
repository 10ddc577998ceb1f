"""App configs of the project package: ``synapse`` itself and the rate-limited admin site."""

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class SynapseConfig(AppConfig):
    name = "synapse"


class SynapseAdminConfig(admin_apps.AdminConfig):
    """``django.contrib.admin`` with the project's site (synapse.admin), whose sign-in is
    rate-limited. Named in INSTALLED_APPS in place of ``django.contrib.admin``."""

    default = False  # not the "synapse" app's own config
    default_site = "synapse.admin.SynapseAdminSite"
