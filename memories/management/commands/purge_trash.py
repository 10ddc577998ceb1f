"""``manage.py purge_trash``: delete for good what has stayed in the trash too long."""

from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from memories.models import Memory
from memories.services import memory_purge_trash


class Command(BaseCommand):
    help = ("Purge memories that have been in the trash longer than the retention period "
            "(SYNAPSE_TRASH_RETENTION_DAYS, default 30). Each leaves a tombstone for sync.")

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=None,
                            help="Retention in days (default: the setting).")
        parser.add_argument("--dry-run", action="store_true",
                            help="Count what would be purged; change nothing.")

    def handle(self, *args, days=None, dry_run=False, **options):
        days = settings.SYNAPSE["TRASH_RETENTION_DAYS"] if days is None else days
        if days < 0:
            raise CommandError("--days cannot be negative.")
        cutoff = timezone.now() - timedelta(days=days)
        if dry_run:
            count = Memory.objects.in_trash().filter(deleted_at__lt=cutoff).count()
            self.stdout.write(f"{count} memories would be purged (in the trash for more "
                              f"than {days} days).")
            return
        count = memory_purge_trash(older_than=cutoff)
        self.stdout.write(f"Purged {count} memories (in the trash for more than {days} days).")
