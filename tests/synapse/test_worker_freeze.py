"""A gunicorn worker freezes what it has loaded before its first request
(synapse/gunicorn_conf.py, ``post_worker_init``; docs/scaling.md, "The web workers'
model"), so its full garbage collections walk only what requests create."""

import gc

import pytest


@pytest.fixture
def unfrozen():
    assert gc.get_freeze_count() == 0  # nothing in the test process is frozen before
    yield
    gc.unfreeze()


def test_a_worker_freezes_its_application_and_views_before_serving(unfrozen):
    from synapse import gunicorn_conf

    tracked = len(gc.get_objects())
    gunicorn_conf.post_worker_init(worker=None)
    assert gc.get_freeze_count() >= tracked // 2
    # What a full collection walks now: only objects made after the freeze.
    assert len(gc.get_objects()) < tracked // 10
