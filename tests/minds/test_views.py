"""The mind pages of the web UI through Django's test client: sign-in, the minds list,
keys, settings, and another user's mind as a 404."""

import pytest
from rest_framework.test import APIClient

from memories.models import Memory
from memories.services import memory_delete
from minds.models import Mind, MindKey
from minds.services import key_issue, key_revoke
from tests.conftest import PASSWORD, text

pytestmark = pytest.mark.django_db


def test_root_redirects_to_the_ui(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/ui/"


def test_signed_out_visitor_is_sent_to_sign_in(client, ui):
    response = client.get(ui("queue"))
    assert response.status_code == 302
    assert response["Location"].startswith("/ui/login?next=/ui/minds/")


def test_signing_in_with_the_right_password_opens_the_minds_list(client, alice_mind):
    response = client.post("/ui/login", {"username": "alice", "password": PASSWORD},
                           follow=True)
    assert response.redirect_chain[-1][0] == "/ui/"
    assert "Alice&#x27;s Mind" in text(response)


def test_signing_in_with_a_wrong_password_says_so(client, alice):
    response = client.post("/ui/login", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "enter a correct username and password" in text(response)
    assert "_auth_user_id" not in client.session


def test_minds_list_counts_current_memories_unverified_ones_and_usable_keys(
        owner, alice, alice_mind, alice_key, remember):
    remember(key="one")
    remember(key="two")
    remember(key="three", actor=alice)  # a human's memory is verified
    memory_delete(memory=remember(key="trashed"), actor=alice)
    key_revoke(key=key_issue(mind=alice_mind, name="old", created_by=alice)[0])
    response = owner.get("/ui/")
    mind = response.context["minds"][0]
    assert (mind.memory_count, mind.unverified_count, mind.key_count) == (3, 2, 1)
    assert "Review 2" in text(response)


def test_minds_list_shows_only_the_users_own_minds(owner, alice_mind, bob_mind):
    page = text(owner.get("/ui/"))
    assert "Alice&#x27;s Mind" in page and "Bob&#x27;s Mind" not in page


def test_a_user_without_minds_is_told_to_create_one(client, bob):
    client.force_login(bob)
    assert "No minds yet" in text(client.get("/ui/"))


def test_creating_a_mind_leads_to_its_keys_page(owner, alice):
    response = owner.post("/ui/", {"name": "Work Mind"})
    mind = Mind.objects.owned_by(alice).get(name="Work Mind")
    assert response.status_code == 302 and response["Location"] == f"/ui/minds/{mind.id}/keys"


def test_creating_a_mind_without_a_name_shows_the_error(owner, alice):
    response = owner.post("/ui/", {"name": "  "})
    assert response.status_code == 400
    assert "This field is required." in text(response)
    assert not Mind.objects.owned_by(alice).exists()


@pytest.mark.parametrize("tail", ["", "queue", "trash", "keys", "stats", "settings",
                                  "memories/new"])
def test_another_users_mind_is_a_404_page(owner, bob_mind, tail):
    response = owner.get(f"/ui/minds/{bob_mind.id}/{tail}")
    assert response.status_code == 404
    assert "Nothing here" in text(response)


def test_another_minds_key_cannot_be_revoked(owner, ui, bob_mind, bob):
    key, _plaintext = key_issue(mind=bob_mind, name="bob agent", created_by=bob)
    assert owner.post(ui(f"keys/{key.id}/revoke")).status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None


def test_a_mind_name_with_a_line_break_is_refused(owner, alice):
    response = owner.post("/ui/", {"name": "Work\u2029Mind"})
    assert response.status_code == 400
    assert not Mind.objects.owned_by(alice).exists()


def test_a_new_key_is_shown_once_and_works(owner, ui, alice_mind):
    response = owner.post(ui("keys"), {"name": "laptop", "scope": "write", "expires_at": ""})
    assert response.status_code == 200
    plaintext = response.context["plaintext"]
    assert plaintext.startswith("mk_") and plaintext in text(response)
    key = MindKey.objects.get(mind=alice_mind, name="laptop")
    assert plaintext.endswith(key.last4) and plaintext not in key.hashed_secret
    assert plaintext not in text(owner.get(ui("keys")))
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert agent.get("/memory/recall").status_code == 200


def test_a_key_must_expire_in_the_future(owner, ui, alice_mind):
    response = owner.post(ui("keys"), {"name": "late", "scope": "read",
                                         "expires_at": "2001-01-01T00:00"})
    assert response.status_code == 400
    assert "The expiry must be in the future." in text(response)
    assert not MindKey.objects.filter(name="late").exists()


def test_keys_list_shows_last4_scope_and_last_use(owner, ui, alice_key, agent):
    agent.get("/memory/recall")
    page = text(owner.get(ui("keys")))
    key = alice_key[0]
    assert f"mk_…{key.last4}" in page and "read and write" in page and "just now" in page
    assert alice_key[1] not in page


def test_a_revoked_key_is_refused_on_its_next_request(owner, ui, alice_key, agent):
    key = alice_key[0]
    response = owner.post(ui(f"keys/{key.id}/revoke"), follow=True)
    assert f"Revoked alice agent (…{key.last4})" in text(response)
    assert agent.get("/memory/recall").status_code == 401


def test_settings_rename_the_mind_and_choose_the_recall_policy(owner, ui, alice_mind):
    response = owner.post(ui("settings"), {"name": "Renamed",
                                             "unverified_in_recall": "hidden",
                                             "search_language": "english"})
    assert response.status_code == 302
    alice_mind.refresh_from_db()
    assert (alice_mind.name, alice_mind.unverified_in_recall) == ("Renamed", "hidden")
    assert "stay out of recall until you verify" in text(owner.get(ui("queue")))


def test_an_unknown_recall_policy_is_refused(owner, ui, alice_mind):
    response = owner.post(ui("settings"), {"name": "X", "unverified_in_recall": "shown"})
    assert response.status_code == 400
    alice_mind.refresh_from_db()
    assert alice_mind.name == "Alice's Mind"


def test_deleting_a_mind_needs_its_name_typed_out(owner, ui, alice_mind, remember):
    remember()
    response = owner.post(ui("delete"), {"confirm_name": "alice's mind"})
    assert response.status_code == 400
    assert Mind.objects.filter(pk=alice_mind.pk).exists()
    response = owner.post(ui("delete"), {"confirm_name": "Alice's Mind"})
    assert response.status_code == 302 and response["Location"] == "/ui/"
    assert not Mind.objects.filter(pk=alice_mind.pk).exists()
    assert not Memory.objects.exists()


def test_sign_in_attempts_are_rate_limited_like_the_api_login(client, alice, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login_username": "3/min", "login": "100/min"}}
    for _attempt in range(3):
        assert client.post("/ui/login", {"username": "alice", "password": "wrong"}
                           ).status_code == 200
    refused = client.post("/ui/login", {"username": "alice", "password": PASSWORD})
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert "Too many sign-in attempts" in text(refused)
    assert "_auth_user_id" not in client.session
    # The API login shares the counter: no way around the limit through the other door.
    api = APIClient().post("/auth/login", {"username": "alice", "password": PASSWORD},
                           format="json")
    assert api.status_code == 429
