"""``manage.py backup FILE``: the whole database in pg_dump's custom format (mode 0600)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from synapse.backup import BackupError, backup


class Command(BaseCommand):
    help = ("Back up the whole database to FILE (pg_dump custom format, mode 0600). "
            "Restore it with `manage.py restore FILE` into an empty database.")

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file, **options):
        connection.ensure_connection()  # starts the embedded cluster when it is the one
        try:
            size = backup(database=connection.settings_dict, path=file)
        except BackupError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"backed up {connection.settings_dict['NAME']} to {file} "
                          f"({size} bytes)")
        self.stdout.write("Keep the secrets with it: credentials memories can only be read "
                          "with the same SYNAPSE_CREDENTIALS_KEYS (or the data folder's "
                          "credentials_key file).")
