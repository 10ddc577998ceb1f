"""pytest plugin (``-p tests.plugin``): each test session runs on a throwaway PostgreSQL."""

import os
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

# Names the folder this plugin made, so a worker tells it apart from a SYNAPSE_DATA_DIR
# the user happened to set.
_SHARED = "SYNAPSE_TEST_THROWAWAY_DIR"

# Loaded before Django reads its settings: with DATABASE_URL unset, SYNAPSE_DATA_DIR points
# at a fresh temporary folder, whose cluster the first connection starts (subprocesses of
# the tests inherit it) and the end of the session deletes. With DATABASE_URL set, that
# server is used and nothing here happens.
# Under pytest-xdist each worker imports this module again with the controller's
# environment and gets a cluster of its own in a subfolder (<folder>/gw0, …), not one
# shared cluster: the diff cursor is PostgreSQL's oldest running transaction, which is
# cluster-wide, so another worker's open test transaction would hold back the cursors the
# sync tests check. Only the controller deletes the folders, after its workers ended.
_THROWAWAY = None
if not os.environ.get("DATABASE_URL"):
    _WORKER = os.environ.get("PYTEST_XDIST_WORKER")
    if _WORKER and os.environ.get(_SHARED):
        os.environ["SYNAPSE_DATA_DIR"] = str(Path(os.environ[_SHARED]) / _WORKER)
    else:
        _THROWAWAY = tempfile.mkdtemp(prefix="synapse-test-")
        os.environ["SYNAPSE_DATA_DIR"] = os.environ[_SHARED] = _THROWAWAY
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_unconfigure(config):
    if _THROWAWAY:
        from synapse import embedded_db

        for worker_folder in Path(_THROWAWAY).glob("gw*"):
            embedded_db.destroy(worker_folder)
        embedded_db.destroy(_THROWAWAY)


# Fixtures too costly to build once per worker: the tests using one share a worker under
# `--dist loadgroup` (a Chromium per module, a migrated cluster of server processes; the
# PgBouncer and many-web-nodes tests share one of their own).
_SHARED_FIXTURES = ("browser", "live_cluster", "scale_cluster")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture in _SHARED_FIXTURES:
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(fixture))


class _GroupIds:
    @pytest.hookimpl(trylast=True)  # after xdist named the groups
    def pytest_collection_modifyitems(self, config, items):
        """pytest-xdist 3.8 names an item's group by setting ``item._nodeid``, which
        pytest 9 no longer reads (the id lives in ``item._id``): without this,
        ``--dist loadgroup`` spreads a group over every worker."""
        from _pytest.nodeid import coerce_node_id

        for item in items:
            named = getattr(item, "_nodeid", None)
            if named and named != item.nodeid:
                item._id = coerce_node_id(named)


@pytest.hookimpl(trylast=True)  # after pytest-django has configured Django
def pytest_configure(config):
    config.pluginmanager.register(_GroupIds(), "synapse-xdist-group-ids")
    """Passwords hashed with 1,000 PBKDF2 iterations instead of 1,000,000: each test user
    cost ~1 s of CPU otherwise. The iteration count travels inside the hash, so a server
    process with the production hashers still verifies these passwords."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["tests.plugin.FastPBKDF2PasswordHasher"]


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
