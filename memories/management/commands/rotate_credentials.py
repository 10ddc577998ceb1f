"""``manage.py rotate_credentials``: re-encrypt every credentials memory with the newest key."""

from django.core.management.base import BaseCommand, CommandError

from memories.services import CredentialsNotRotated, credentials_rotate


class Command(BaseCommand):
    help = ("Re-encrypt the content of every credentials memory and version (all minds, trash "
            "included) with the newest key of SYNAPSE_CREDENTIALS_KEYS. Run it after putting a "
            "new key first; remove an old key only after this finished.")

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size, **options):
        try:
            counts = credentials_rotate(batch_size=batch_size)
        except CredentialsNotRotated as error:
            raise CommandError(
                f"{error}: no key in SYNAPSE_CREDENTIALS_KEYS opens it. Put back the key it "
                "was encrypted with (after the new one) and run again; nothing after this row "
                "was rotated.") from None
        self.stdout.write(f"re-encrypted {counts['memories']} memories and "
                          f"{counts['versions']} versions with the newest key")
