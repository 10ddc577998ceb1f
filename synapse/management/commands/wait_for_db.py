"""``manage.py wait_for_db``: block until the database accepts connections (containers)."""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from synapse import embedded_db


class Command(BaseCommand):
    help = "Wait until the database accepts connections, up to --timeout seconds."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=120.0)

    def handle(self, *args, timeout, **options):
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection.ensure_connection()
                self.stdout.write("database is up")
                return
            except embedded_db.EmbeddedDatabaseError as error:
                # Waiting does not help (e.g. a data folder of another major version).
                raise CommandError(str(error)) from None
            except OperationalError as error:
                if time.monotonic() > deadline:
                    raise CommandError(f"database not reachable after {timeout:.0f}s: "
                                       f"{error.__class__.__name__}") from error
                connection.close()
                time.sleep(1)
