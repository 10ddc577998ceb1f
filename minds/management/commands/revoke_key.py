"""``manage.py revoke_key KEY_ID``: revoke a Mind Key; requests made with it fail from then on."""

from django.core.management.base import BaseCommand, CommandError

from minds.models import MindKey
from minds.services import key_revoke


class Command(BaseCommand):
    help = "Revoke a Mind Key by its id (mkid_…); requests made with it fail from now on."

    def add_arguments(self, parser):
        parser.add_argument("key_id")

    def handle(self, *args, key_id, **options):
        key = MindKey.objects.select_related("mind").filter(pk=key_id).first()
        if key is None:
            raise CommandError(f"No key {key_id!r}.")
        key_revoke(key=key)
        self.stdout.write(f"revoked {key.id} ({key.name}, …{key.last4})")
