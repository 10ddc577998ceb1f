#!/bin/sh
# Container entry point: wait for the database, then run one role.
#   web     migrate, then serve with gunicorn (synapse/gunicorn_conf.py)
#   worker  wait until migrations are applied, then run the embedding worker
#   other   run the command as given (e.g. `python manage.py createsuperuser`)
set -eu
cd /app

role="${1:-web}"
case "$role" in
  web)
    python manage.py wait_for_db --timeout "${SYNAPSE_DB_WAIT:-120}"
    python manage.py migrate --noinput
    exec gunicorn -c synapse/gunicorn_conf.py
    ;;
  worker)
    python manage.py wait_for_db --timeout "${SYNAPSE_DB_WAIT:-120}"
    until python manage.py migrate --check >/dev/null 2>&1; do
      echo "waiting for the web service to apply migrations"; sleep 3
    done
    exec python manage.py embed_worker
    ;;
  *)
    exec "$@"
    ;;
esac
