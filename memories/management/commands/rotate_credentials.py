"""``manage.py rotate_credentials``: re-encrypt every credentials memory with the newest key."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from memories.crypto import CredentialsUnreadable, rotate_token
from memories.models import Category, Memory, MemoryVersion


class Command(BaseCommand):
    help = ("Re-encrypt the content of every credentials memory and version (all minds, trash "
            "included) with the newest key of SYNAPSE_CREDENTIALS_KEYS. Run it after putting a "
            "new key first; remove an old key only after this finished.")

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size, **options):
        counts = {}
        for model in (Memory, MemoryVersion):
            counts[model] = self._rotate(model, batch_size)
        self.stdout.write(f"re-encrypted {counts[Memory]} memories and "
                          f"{counts[MemoryVersion]} versions with the newest key")

    def _rotate(self, model, batch_size: int) -> int:
        """Batches in primary-key order, each in its own short transaction with its rows
        locked, so writers wait for at most one batch."""
        done, after = 0, None
        while True:
            with transaction.atomic():
                rows = model.objects.select_for_update().filter(category=Category.CREDENTIALS)
                if after is not None:
                    rows = rows.filter(pk__gt=after)
                batch = list(rows.order_by("pk").only("pk", "content")[:batch_size])
                if not batch:
                    return done
                for row in batch:
                    row.content = self._reencrypt(model, row)
                # Only the content column: timestamps and versions stay, this is no change.
                model.objects.bulk_update(batch, ["content"])
            done += len(batch)
            after = batch[-1].pk

    @staticmethod
    def _reencrypt(model, row) -> str:
        try:
            return rotate_token(row.content)
        except CredentialsUnreadable:
            raise CommandError(
                f"{model.__name__} {row.pk}: no key in SYNAPSE_CREDENTIALS_KEYS opens it. Put "
                "back the key it was encrypted with (after the new one) and run again; "
                "nothing after this row was rotated.") from None
