"""minds/services.py called directly: accounts, minds and Mind Keys, each write checked on
the rows read back (and its audit event where there is one)."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from memories.models import AuditEvent, Memory, MemoryVersion, QuotaCounter
from memories.quotas import SLOTS
from minds.keys import hash_key
from minds.models import Mind, MindKey
from minds.services import (
    account_delete,
    account_register,
    key_issue,
    key_revoke,
    key_update,
    mind_create,
    mind_delete,
    mind_update,
    minds_with_counts,
)

pytestmark = pytest.mark.django_db


def test_account_delete_removes_the_user_with_every_mind_and_what_is_in_it(
        alice, alice_mind, alice_key, remember, bob):
    remember(key="kept/nowhere", content="Gone with the account")
    second = mind_create(owner=alice, name="Second")

    account_delete(user=alice, actor=bob)

    assert not get_user_model().objects.filter(pk=alice.pk).exists()
    assert not Mind.objects.filter(pk__in=[alice_mind.pk, second.pk]).exists()
    assert not Memory.objects.filter(mind_id=alice_mind.pk).exists()
    assert not MindKey.objects.filter(pk=alice_key[0].pk).exists()


def test_account_delete_keeps_keys_the_user_issued_on_another_mind(alice, bob, bob_mind):
    key, _plaintext = key_issue(mind=bob_mind, name="issued by alice", created_by=alice)

    account_delete(user=alice)

    key.refresh_from_db()
    assert key.created_by is None and key.revoked_at is None
    assert Mind.objects.filter(pk=bob_mind.pk).exists()


def test_account_delete_is_one_transaction(alice, alice_mind, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise RuntimeError("the user row cannot go")

    monkeypatch.setattr(get_user_model(), "delete", refuse)

    with pytest.raises(RuntimeError):
        account_delete(user=alice)

    assert Mind.objects.filter(pk=alice_mind.pk).exists()


def test_mind_create_with_the_hidden_policy_records_it_as_a_change_by_the_actor(alice, bob):
    mind = mind_create(owner=alice, name="Strict", unverified_in_recall="hidden", actor=bob)

    assert Mind.objects.get(pk=mind.pk).unverified_in_recall == "hidden"
    event = mind.audit_events.get()
    assert (event.action, event.actor_id) == ("mind_update", str(bob.pk))
    assert event.details == {"before": {"unverified_in_recall": "marked"},
                             "after": {"unverified_in_recall": "hidden"}}


def test_mind_create_with_the_default_policy_records_nothing(alice):
    mind = mind_create(owner=alice, name="Plain")

    assert mind.unverified_in_recall == "marked"
    assert not mind.audit_events.exists()


def test_minds_with_counts_counts_current_memories_the_queue_and_usable_keys(
        alice, alice_mind, alice_key, remember, bob_mind):
    remember(key="a", content="Verified by nobody yet")
    remember(key="b", content="Already past", expires_at=timezone.now() - timedelta(days=1))
    remember(key="c", content="Replaced")
    remember(key="c", content="Replacement")
    revoked, _plaintext = key_issue(mind=alice_mind, name="old", created_by=alice)
    key_revoke(key=revoked)
    expired, _plaintext = key_issue(mind=alice_mind, name="lapsed", created_by=alice,
                                    expires_at=timezone.now() + timedelta(days=1))
    MindKey.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
    empty = mind_create(owner=alice, name="Empty")

    minds = {mind.pk: mind for mind in minds_with_counts(member=alice)}

    assert set(minds) == {alice_mind.pk, empty.pk}
    counted = minds[alice_mind.pk]
    current = Memory.objects.for_mind(alice_mind).current()
    assert counted.memory_count == current.count() == 3
    assert counted.unverified_count == current.unexpired().filter(verified=False).count() == 2
    assert counted.key_count == 1
    assert (minds[empty.pk].memory_count, minds[empty.pk].unverified_count,
            minds[empty.pk].key_count) == (0, 0, 0)



def events(mind, action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(mind=mind, action=action).order_by("id"))


def test_registering_makes_a_plain_account_and_a_taken_name_makes_none(alice):
    carol = account_register(username="carol", password="a long passphrase 9",
                             email="carol@example.com")
    row = get_user_model().objects.get(pk=carol.pk)
    assert row.check_password("a long passphrase 9")
    assert (row.email, row.is_staff, row.is_superuser) == ("carol@example.com", False, False)
    assert account_register(username="ALICE", password="whatever it is 1") is None
    assert get_user_model().objects.filter(username__iexact="alice").count() == 1


def test_a_new_mind_has_its_quota_counters(alice):
    mind = mind_create(owner=alice, name="Work")
    assert list(Mind.objects.get(pk=mind.pk).owners()) == [alice]
    assert QuotaCounter.objects.filter(mind=mind).count() == SLOTS


def test_a_mind_update_records_before_and_after_once(alice_mind, alice):
    mind_update(mind=alice_mind, actor=alice, name="Renamed", unverified_in_recall="hidden")
    mind_update(mind=alice_mind, actor=alice, name="Renamed")  # no change: no event
    row = Mind.objects.get(pk=alice_mind.pk)
    assert (row.name, row.unverified_in_recall) == ("Renamed", "hidden")
    [event] = events(alice_mind, "mind_update")
    assert event.details == {
        "before": {"name": "Alice's Mind", "unverified_in_recall": "marked"},
        "after": {"name": "Renamed", "unverified_in_recall": "hidden"}}


def test_a_mind_update_refuses_fields_it_does_not_own(alice_mind):
    with pytest.raises(TypeError, match="owner"):
        mind_update(mind=alice_mind, owner=None)


def test_deleting_a_mind_deletes_everything_of_it_and_nothing_else(alice_mind, alice_key,
                                                                    remember, bob_mind,
                                                                    bob_agent):
    remember(key="k", content="One")
    remember(key="k", content="Two")
    bob_agent.post("/memory", {"category": "fact", "content": "Bob's"}, format="json")
    mind_delete(mind=alice_mind)
    assert not Mind.objects.filter(pk=alice_mind.pk).exists()
    assert not Memory.objects.filter(mind_id=alice_mind.pk).exists()
    assert not MemoryVersion.objects.filter(memory__mind_id=alice_mind.pk).exists()
    assert not MindKey.objects.filter(mind_id=alice_mind.pk).exists()
    assert not AuditEvent.objects.filter(mind_id=alice_mind.pk).exists()
    assert Memory.objects.filter(mind=bob_mind).count() == 1


def test_an_issued_key_is_stored_as_a_hash_and_audited(alice_mind, alice):
    key, plaintext = key_issue(mind=alice_mind, name="laptop", scope="read", created_by=alice)
    row = MindKey.objects.get(pk=key.pk)
    assert row.hashed_secret == hash_key(plaintext) and plaintext not in row.hashed_secret
    assert (row.scope, row.last4, row.created_by) == ("read", plaintext[-4:], alice)
    [event] = events(alice_mind, "key_issue")
    assert event.details == {"key_id": key.id, "name": "laptop", "scope": "read",
                             "last4": plaintext[-4:]}
    assert plaintext not in str(event.details)


def test_a_key_update_is_audited_and_a_revoked_key_cannot_change(alice_key, alice):
    key = alice_key[0]
    expiry = timezone.now() + timedelta(days=30)
    key_update(key=key, actor=alice, name="renamed", expires_at=expiry)
    row = MindKey.objects.get(pk=key.pk)
    assert (row.name, row.expires_at) == ("renamed", expiry)
    [event] = events(key.mind, "key_update")
    assert event.details == {"key_id": key.id, "last4": key.last4, "name": "renamed",
                             "expires_at": expiry.isoformat()}
    key_revoke(key=key, actor=alice)
    with pytest.raises(ValueError, match="revoked"):
        key_update(key=key, actor=alice, name="again")
    assert MindKey.objects.get(pk=key.pk).name == "renamed"


def test_a_key_update_refuses_fields_it_does_not_own(alice_key):
    with pytest.raises(TypeError, match="lookup"):
        key_update(key=alice_key[0], lookup="x")


def test_revoking_twice_keeps_the_first_time_and_one_event(alice_key, alice):
    key = alice_key[0]
    first = key_revoke(key=key, actor=alice).revoked_at
    again = key_revoke(key=key, actor=alice).revoked_at
    assert first is not None and again == first
    assert MindKey.objects.get(pk=key.pk).revoked_at == first
    assert len(events(key.mind, "key_revoke")) == 1
