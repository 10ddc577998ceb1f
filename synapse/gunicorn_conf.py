"""gunicorn settings for Synapse (``gunicorn -c synapse/gunicorn_conf.py``).

Access lines carry the path without the query string, so a ``?key=mk_…`` never reaches
them; Django's LOGGING (with the redaction filter) also handles gunicorn's loggers.
"""

import multiprocessing
import os

bind = os.environ.get("SYNAPSE_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", max(2, multiprocessing.cpu_count())))
threads = int(os.environ.get("SYNAPSE_THREADS", "4"))
worker_class = "gthread"
timeout = 60
graceful_timeout = 20
accesslog = "-"
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'
wsgi_app = "synapse.wsgi:application"
