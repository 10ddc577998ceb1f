"""``manage.py send_queued_mail``: send the queued password-reset mail now, without the
embedding worker (which sends it on each of its loops): e.g. under ``manage.py runserver``
alone, or from cron where no worker runs (minds.passwords, docs/human-api.md)."""

from django.core.management.base import BaseCommand

from minds.passwords import send_queued_resets


class Command(BaseCommand):
    help = ("Send the queued password-reset mail that is due (what the embedding worker "
            "does on each loop), then exit.")

    def handle(self, *args, **options):
        sent = dropped = deferred = 0
        while True:
            drained = send_queued_resets()
            sent, dropped = sent + drained.sent, dropped + drained.dropped
            deferred += drained.deferred
            if drained.deferred or not (drained.sent or drained.dropped):
                break
        self.stdout.write(f"sent {sent} password-reset mail{'' if sent == 1 else 's'}"
                          f" ({dropped} dropped, {deferred} to try again later)")
