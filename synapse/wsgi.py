"""WSGI entry point. Connects once at start so a database without pgvector stops the
process with a plain message instead of failing on the first request."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapse.settings")
application = get_wsgi_application()

from django.db import connection  # noqa: E402

connection.ensure_connection()
connection.close()
