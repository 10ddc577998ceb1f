"""pytest plugin: the test session runs on a throwaway embedded PostgreSQL.

Loaded with ``-p tests.plugin`` (pyproject), so this module runs before Django's settings
are read: with DATABASE_URL unset it points SYNAPSE_DATA_DIR at a fresh temporary folder,
whose cluster the first connection starts and the end of the session deletes. With
DATABASE_URL set, that server is used and nothing here happens. Subprocesses started by
tests inherit the variable and share the cluster.
"""

import os
import tempfile

_THROWAWAY = None
if not os.environ.get("DATABASE_URL"):
    _THROWAWAY = tempfile.mkdtemp(prefix="synapse-test-")
    os.environ["SYNAPSE_DATA_DIR"] = _THROWAWAY
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_unconfigure(config):
    if _THROWAWAY:
        from synapse import embedded_db

        embedded_db.destroy(_THROWAWAY)
