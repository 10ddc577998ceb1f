"""minds.services called directly: account deletion, mind creation, the counted minds list."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from memories.models import Memory
from minds.models import Mind, MindKey
from minds.services import (
    account_delete,
    key_issue,
    key_revoke,
    mind_create,
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

    minds = {mind.pk: mind for mind in minds_with_counts(owner=alice)}

    assert set(minds) == {alice_mind.pk, empty.pk}
    counted = minds[alice_mind.pk]
    current = Memory.objects.for_mind(alice_mind).current()
    assert counted.memory_count == current.count() == 3
    assert counted.unverified_count == current.unexpired().filter(verified=False).count() == 2
    assert counted.key_count == 1
    assert (minds[empty.pk].memory_count, minds[empty.pk].unverified_count,
            minds[empty.pk].key_count) == (0, 0, 0)
