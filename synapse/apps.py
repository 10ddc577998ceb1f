"""App configs of the project package: ``synapse`` itself and the rate-limited admin site."""

import sys

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.db.models.signals import post_migrate


class SynapseConfig(AppConfig):
    name = "synapse"

    def ready(self):
        post_migrate.connect(store_pooled_role_timeout, sender=self)


def store_pooled_role_timeout(*, using: str, verbosity: int = 1, **kwargs) -> None:
    """After ``migrate`` behind PgBouncer (``DATABASE_POOLER=pgbouncer``): store the statement
    timeout on the database role (synapse.db.base.store_role_timeout). A role that may not
    is told what to ask its administrator for; migrate itself succeeded."""
    from django.db import DatabaseError, connections

    from synapse.db.base import store_role_timeout

    connection = connections[using]
    if not getattr(connection, "pooled", False):
        return
    try:
        statement = store_role_timeout(connection)
    except DatabaseError as error:
        sys.stderr.write(f"Could not store the statement timeout on the database role "
                         f"({error}): have an administrator run ALTER ROLE <this role> IN "
                         f"DATABASE <this database> SET statement_timeout = "
                         f"{connection.settings_dict['STATEMENT_TIMEOUT_MS']}\n")
        return
    if verbosity:
        sys.stdout.write(f"{statement} (then RECONNECT in PgBouncer's admin console)\n")


class SynapseAdminConfig(admin_apps.AdminConfig):
    """``django.contrib.admin`` with the project's site (synapse.admin), whose sign-in is
    rate-limited. Named in INSTALLED_APPS in place of ``django.contrib.admin``."""

    default = False  # not the "synapse" app's own config
    default_site = "synapse.admin.SynapseAdminSite"
