"""``manage.py create_mind NAME --owner USER``: create a mind and print its id."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from minds.services import mind_create
from synapse.text import single_line_argument


class Command(BaseCommand):
    help = "Create a mind owned by an existing user and print its id."

    def add_arguments(self, parser):
        parser.add_argument("name", type=single_line_argument)
        parser.add_argument("--owner", required=True, help="username of the owner")

    def handle(self, *args, name, owner, **options):
        user = get_user_model().objects.filter(username=owner).first()
        if user is None:
            raise CommandError(f"No user named {owner!r}.")
        mind = mind_create(owner=user, name=name)
        self.stdout.write(mind.id)
