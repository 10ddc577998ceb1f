import pytest


@pytest.fixture(scope="session")
def scale_cluster():
    """A migrated throwaway cluster with a user, a mind and a Mind Key (tests.security.live),
    for the PgBouncer and many-web-nodes tests, which share it on one worker."""
    from tests.security.live import destroy_cluster, make_cluster

    cluster = make_cluster()
    yield cluster
    destroy_cluster(cluster)
