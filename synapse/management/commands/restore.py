"""``manage.py restore FILE``: load a ``manage.py backup`` archive into an empty database."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from synapse.backup import BackupError, restore


class Command(BaseCommand):
    help = ("Restore a `manage.py backup` archive into the (empty) database, in one "
            "transaction. With the embedded PostgreSQL, point SYNAPSE_DATA_DIR at a new folder.")

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file, **options):
        connection.ensure_connection()  # starts (or creates) the embedded cluster
        existing = connection.introspection.table_names()
        connection.close()
        try:
            restore(database=connection.settings_dict, path=file, existing_tables=existing)
        except BackupError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"restored {file} into {connection.settings_dict['NAME']}")
