"""``manage.py prune_oauth_clients``: delete OAuth clients registered more than a day ago
that no person ever approved (the embedding worker also does it every hour)."""

from django.core.management.base import BaseCommand

from minds.oauth import prune_unused_clients


class Command(BaseCommand):
    help = ("Delete OAuth clients registered through /oauth/register more than a day ago "
            "that no person ever approved.")

    def handle(self, *args, **options):
        self.stdout.write(f"{prune_unused_clients()} unused OAuth clients deleted")
