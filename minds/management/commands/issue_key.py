"""``manage.py issue_key MIND_ID``: issue a Mind Key and print it, the only time it is shown."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from minds.models import Mind, MindKey
from minds.services import key_issue
from synapse.text import single_line_argument
from synapse.timestamps import parse_timestamp


class Command(BaseCommand):
    help = "Issue a Mind Key for a mind and print it (the only time it is shown)."

    def add_arguments(self, parser):
        parser.add_argument("mind_id")
        parser.add_argument("--name", default="cli", type=single_line_argument)
        parser.add_argument("--scope", choices=[s.value for s in MindKey.Scope], default="write")
        parser.add_argument("--expires-at", help="RFC 3339 timestamp or epoch seconds")
        parser.add_argument("--path", action="append", default=[], dest="paths",
                            help="Limit the key to this path prefix (repeatable); none: the "
                                 "whole mind")

    def handle(self, *args, mind_id, name, scope, expires_at, paths, **options):
        mind = Mind.objects.filter(pk=mind_id).first()
        if mind is None:
            raise CommandError(f"No mind {mind_id!r}.")
        try:
            expires = parse_timestamp(expires_at) if expires_at else None
        except ValueError as error:
            raise CommandError(str(error)) from error
        try:
            key, plaintext = key_issue(mind=mind, name=name, scope=scope, expires_at=expires,
                                       paths=paths)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        self.stderr.write(f"key id {key.id}, scope {key.scope}; "
                          "store it now, it is not shown again")
        self.stdout.write(plaintext)
