"""``manage.py embedded_db start|stop|status``: control the embedded PostgreSQL by hand."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from synapse import embedded_db


class Command(BaseCommand):
    help = "Start, stop or show the embedded PostgreSQL (used when DATABASE_URL is unset)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args, action, **options):
        data_dir = settings.DATABASES["default"].get("EMBEDDED_DATA_DIR")
        if not data_dir:
            raise CommandError("DATABASE_URL is set: there is no embedded PostgreSQL.")
        if action == "start":
            try:
                cluster = embedded_db.ensure_running(data_dir)
            except embedded_db.EmbeddedDatabaseError as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f"running: {cluster.pgdata} (socket {cluster.socket_dir})")
        elif action == "stop":
            stopped = embedded_db.stop(data_dir)
            self.stdout.write("stopped" if stopped else "not running")
        else:
            cluster = embedded_db.Cluster(embedded_db.Path(data_dir))
            running = embedded_db.is_running(cluster)
            self.stdout.write(f"{'running' if running else 'stopped'}: {cluster.pgdata} "
                              f"(socket {cluster.socket_dir})")
