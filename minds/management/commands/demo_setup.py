"""Create the demo user, mind and Mind Key once; later runs change nothing."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from minds.services import key_issue, mind_create
from synapse.private_files import write_private_file

DEMO_USER = "demo"
DEMO_MIND = "Demo Mind"


# What the demo user may do in the admin, on its own minds only (minds.admin): staff, never
# a superuser unless asked, since a superuser sees and acts on every mind of the server.
DEMO_PERMISSIONS = [
    ("minds", "mind", ("view", "add", "change", "delete")),
    ("minds", "mindkey", ("view", "add", "change")),
    ("memories", "memory", ("view", "change")),
    ("memories", "auditevent", ("view",)),
    ("memories", "memoryversion", ("view",)),
]


def grant_demo_permissions(user) -> None:
    from django.contrib.auth.models import Permission

    for app_label, model, actions in DEMO_PERMISSIONS:
        user.user_permissions.add(*Permission.objects.filter(
            content_type__app_label=app_label,
            codename__in=[f"{action}_{model}" for action in actions]))


class Command(BaseCommand):
    help = "Create a demo user, mind and key (printed once) unless they exist."

    def add_arguments(self, parser):
        parser.add_argument("--superuser", action="store_true",
                            help="Make the demo user a superuser (sees every mind in the "
                                 "admin). By default it is staff for its own minds only.")

    def handle(self, *args, **options):
        credentials_file = settings.DATA_DIR / "demo-credentials.txt"
        users = get_user_model().objects
        with transaction.atomic():
            if users.filter(username=DEMO_USER).exists():
                self.stdout.write(f"Demo user exists. Its credentials were printed on the first "
                                  f"run and saved in {credentials_file} (mode 0600).")
                return
            password = secrets.token_urlsafe(12)
            user = users.create_user(DEMO_USER, password=password, is_staff=True,
                                     is_superuser=options["superuser"])
            grant_demo_permissions(user)
            mind = mind_create(owner=user, name=DEMO_MIND)
            _key, plaintext = key_issue(mind=mind, name="demo agent", created_by=user)
        text = (f"Demo user:     {DEMO_USER}\nPassword:      {password}\n"
                f"Mind:          {mind.name} ({mind.id})\nMind Key:      {plaintext}\n")
        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
        write_private_file(credentials_file, text, replace=True)
        self.stdout.write("\n" + text + f"(saved in {credentials_file}; the key is not stored "
                          "anywhere else)\n")
