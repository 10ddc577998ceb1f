"""pytest plugin: the test session runs on a throwaway embedded PostgreSQL.

Loaded with ``-p tests.plugin`` (pyproject), so this module runs before Django's settings
are read: with DATABASE_URL unset it points SYNAPSE_DATA_DIR at a fresh temporary folder,
whose cluster the first connection starts and the end of the session deletes. With
DATABASE_URL set, that server is used and nothing here happens. Subprocesses started by
tests inherit the variable and share the cluster.

Under pytest-xdist (``make test`` runs ``-n``) the controller makes the folder and each
worker, which imports this plugin again with the controller's environment, reuses it:
one cluster, started by whichever worker connects first (embedded_db.ensure_running holds
a file lock), with one test database per worker (``test_synapse_gw0``, … by
pytest-django). Only the process that made the folder deletes it, after the workers end.
"""

import os
import tempfile

import pytest

# Names the folder this plugin made, so a worker tells it apart from a SYNAPSE_DATA_DIR
# the user happened to set.
_SHARED = "SYNAPSE_TEST_THROWAWAY_DIR"

_THROWAWAY = None
if not os.environ.get("DATABASE_URL"):
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_SHARED):
        os.environ["SYNAPSE_DATA_DIR"] = os.environ[_SHARED]
    else:
        _THROWAWAY = tempfile.mkdtemp(prefix="synapse-test-")
        os.environ["SYNAPSE_DATA_DIR"] = os.environ[_SHARED] = _THROWAWAY
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_unconfigure(config):
    if _THROWAWAY:
        from synapse import embedded_db

        embedded_db.destroy(_THROWAWAY)


# Fixtures too costly to build once per worker: the tests using one share a worker under
# `--dist loadgroup` (a Chromium per module, a migrated cluster of server processes).
_SHARED_FIXTURES = ("browser", "live_cluster")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture in _SHARED_FIXTURES:
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(fixture))
