"""Migration minds 0006 (memberships) on a database filled by the code before it: each
mind's owner becomes its one member, with the owner role, and keeps every power (the API,
the keys they issued); backwards, the owner comes back.

The test changes the schema, so it runs alone (``serial``, after the parallel run: make
test), on committed rows (``transaction=True``), and leaves the database migrated to the
latest migration whatever happens (the ``finally``)."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from minds.models import Membership, Mind
from minds.services import key_issue
from tests.conftest import jwt_client, key_client, make_user

pytestmark = [pytest.mark.serial, pytest.mark.django_db(transaction=True)]

BEFORE = [("minds", "0005_oauth_connection")]
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def migrate(targets=None):
    """Migrate to ``targets`` (None: the latest of every app); the state's apps there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_each_owner_becomes_the_owner_member_of_their_minds_and_back():
    alice, bob = make_user("alice"), make_user("bob")
    try:
        old = migrate(BEFORE)
        OldMind = old.get_model("minds", "Mind")
        owners = {"Work": alice, "Home": alice, "Bob's": bob}
        for number, (name, user) in enumerate(owners.items()):
            OldMind.objects.create(id=f"m_migrated{number}", name=name, owner_id=user.pk,
                                   created_at=T0)
        migrate()
        assert {(m.mind.name, m.user.username, m.role, m.created_at) for m in
                Membership.objects.select_related("mind", "user")} == {
            ("Work", "alice", "owner", T0), ("Home", "alice", "owner", T0),
            ("Bob's", "bob", "owner", T0)}
        work = Mind.objects.get(name="Work")
        _key, plaintext = key_issue(mind=work, name="laptop", created_by=alice)
        assert key_client(plaintext).get("/memory").status_code == 200
        assert [mind["role"] for mind in jwt_client(alice).get("/minds").json()] == [
            "owner", "owner"]
        assert jwt_client(bob).get(f"/minds/{work.id}").status_code == 404

        old = migrate(BEFORE)
        assert dict(old.get_model("minds", "Mind").objects.values_list("name", "owner_id")) == {
            "Work": alice.pk, "Home": alice.pk, "Bob's": bob.pk}
    finally:
        migrate()
