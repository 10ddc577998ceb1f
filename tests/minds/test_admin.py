"""Django admin for staff: the index and changelists, users, minds and keys (shown once,
revoke)."""

import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model

from memories.models import AuditEvent, Memory
from minds.keys import hash_key
from minds.models import Mind, MindKey
from tests.conftest import action, key_client, messages_of, session_client

pytestmark = pytest.mark.django_db


def test_the_admin_index_lists_users_minds_keys_memories_and_audit_events(staff):
    body = staff.get("/admin/").content.decode()
    for url in ("/admin/auth/user/", "/admin/minds/mind/", "/admin/minds/mindkey/",
                "/admin/memories/memory/", "/admin/memories/auditevent/"):
        assert url in body


@pytest.mark.parametrize("url", ["/admin/auth/user/", "/admin/minds/mind/",
                                 "/admin/minds/mindkey/", "/admin/memories/memory/",
                                 "/admin/memories/auditevent/"])
def test_every_changelist_renders_with_data(staff, remember, url):
    memory = remember(content="Listed in the admin")
    response = staff.get(url)
    assert response.status_code == 200
    listed = {"/admin/auth/user/": lambda row: row.username,
              "/admin/minds/mind/": lambda row: row.name,
              "/admin/minds/mindkey/": lambda row: row.name,
              "/admin/memories/memory/": lambda row: row.id,
              "/admin/memories/auditevent/": lambda row: (row.action, row.memory_id)}[url]
    rows = {listed(row) for row in response.context["cl"].result_list}
    expected = {"/admin/auth/user/": {"root", "alice"},
                "/admin/minds/mind/": {"Alice's Mind"},
                "/admin/minds/mindkey/": {"alice agent"},
                "/admin/memories/memory/": {memory.id},
                "/admin/memories/auditevent/": {("store", memory.id)}}[url]
    assert expected <= rows  # the audit log holds the mind's and key's events too


def test_a_user_who_is_not_staff_is_sent_to_the_login_page(alice):
    client = session_client(alice)
    response = client.get("/admin/minds/mindkey/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


# -- minds --------------------------------------------------------------------------------

def test_adding_a_mind_in_the_admin_goes_through_the_service(staff, alice):
    response = staff.post("/admin/minds/mind/add/", {"owner": alice.pk, "name": "From admin",
                                                     "unverified_in_recall": "hidden",
                                                     "search_language": "english"})
    assert response.status_code == 302
    mind = Mind.objects.get(name="From admin")
    assert (list(mind.owners()), mind.unverified_in_recall) == ([alice], "hidden")
    assert mind.id.startswith("m_")


def test_changing_a_mind_in_the_admin_is_audited(staff, alice_mind):
    response = staff.post(f"/admin/minds/mind/{quote(alice_mind.pk)}/change/",
                          {"name": "Renamed", "unverified_in_recall": "marked",
                           "search_language": "english"})
    assert response.status_code == 302
    alice_mind.refresh_from_db()
    assert alice_mind.name == "Renamed"
    event = AuditEvent.objects.get(action="mind_update")
    assert (event.actor_label, event.details["after"]) == ("root", {"name": "Renamed"})


def test_deleting_a_mind_in_the_admin_removes_everything_of_it(staff, alice_mind, remember):
    remember(content="goes with the mind")
    confirm = staff.get(f"/admin/minds/mind/{quote(alice_mind.pk)}/delete/")
    assert confirm.status_code == 200
    assert "with everything in it" in confirm.content.decode()
    response = staff.post(f"/admin/minds/mind/{quote(alice_mind.pk)}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Mind.objects.filter(pk=alice_mind.pk).exists()
    assert not Memory.objects.filter(mind_id=alice_mind.pk).exists()
    assert not MindKey.objects.filter(mind_id=alice_mind.pk).exists()


def test_deleting_a_user_in_the_admin_deletes_their_minds(staff, alice, alice_mind, remember):
    remember(content="alice's")
    response = staff.post(f"/admin/auth/user/{quote(alice.pk)}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not get_user_model().objects.filter(pk=alice.pk).exists()
    assert not Memory.objects.exists()


# -- keys ---------------------------------------------------------------------------------

def test_adding_a_key_shows_the_plaintext_once_and_stores_only_its_hash(staff, alice_mind):
    response = staff.post("/admin/minds/mindkey/add/", {"mind": alice_mind.pk,
                                                        "name": "from admin",
                                                        "scope": "read"}, follow=True)
    assert response.status_code == 200
    shown = re.findall(r"mk_[A-Za-z0-9]{52}", " ".join(messages_of(response)))
    assert len(shown) == 1
    plaintext = shown[0]
    key = MindKey.objects.get(name="from admin")
    assert (key.mind, key.scope, key.hashed_secret) == (alice_mind, "read", hash_key(plaintext))
    assert key.created_by == staff.user
    assert key_client(plaintext).get("/memory").status_code == 200
    # Never again: not on the key's page, not in the list.
    for url in (f"/admin/minds/mindkey/{quote(key.pk)}/change/", "/admin/minds/mindkey/"):
        assert plaintext not in staff.get(url).content.decode()
    assert key.hashed_secret not in staff.get(f"/admin/minds/mindkey/{quote(key.pk)}/change/"
                                              ).content.decode()


def test_adding_a_key_with_an_expiry_in_the_past_is_refused(staff, alice_mind):
    response = staff.post("/admin/minds/mindkey/add/", {
        "mind": alice_mind.pk, "name": "stale", "scope": "write",
        "expires_at_0": "2001-01-01", "expires_at_1": "00:00:00"})
    assert response.status_code == 200
    assert "The expiry must be in the future." in response.content.decode()
    assert not MindKey.objects.filter(name="stale").exists()


def test_the_revoke_action_revokes_through_the_service(staff, alice_key, agent):
    key, _plaintext = alice_key
    response = action(staff, "/admin/minds/mindkey/", "revoke_keys", [key.pk])
    assert "Revoked 1 key(s)" in " ".join(messages_of(response))
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert agent.get("/memory").status_code == 401
    event = AuditEvent.objects.get(action="key_revoke")
    assert event.actor_label == "root"


def test_a_key_can_be_renamed_until_revoked_then_it_is_read_only(staff, alice_key):
    key, _plaintext = alice_key
    url = f"/admin/minds/mindkey/{quote(key.pk)}/change/"
    response = staff.post(url, {"name": "renamed", "scope": "read"})
    assert response.status_code == 302
    key.refresh_from_db()
    assert (key.name, key.scope) == ("renamed", "read")
    assert AuditEvent.objects.get(action="key_update").details["scope"] == "read"
    action(staff, "/admin/minds/mindkey/", "revoke_keys", [key.pk])
    page = staff.get(url).content.decode()
    assert 'name="name"' not in page and 'name="_save"' not in page
    assert staff.post(url, {"name": "after revoke", "scope": "write"}).status_code == 403
    key.refresh_from_db()
    assert (key.name, key.scope) == ("renamed", "read")


def test_keys_cannot_be_deleted_in_the_admin_only_revoked(staff, alice_key):
    key, _plaintext = alice_key
    assert staff.post(f"/admin/minds/mindkey/{quote(key.pk)}/delete/", {"post": "yes"}
                      ).status_code == 403
    assert MindKey.objects.filter(pk=key.pk).exists()
