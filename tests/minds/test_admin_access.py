"""Who reaches what in the admin: its sign-in is rate-limited like /ui/login and the API
login; staff who are not superusers see and act on their own minds only."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.test import APIClient

from memories.models import AuditEvent, Memory
from minds.models import Mind, MindKey
from minds.services import key_issue, mind_create
from tests.conftest import PASSWORD, make_user, session_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def clerk(db):
    """Staff, not a superuser, with every permission on minds, keys, memories and audit
    events: permissions say what kind of thing, ownership says which."""
    user = make_user("clerk")
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label__in=["minds", "memories"]))
    return user


@pytest.fixture
def clerk_mind(clerk):
    return mind_create(owner=clerk, name="Clerk's Mind")


@pytest.fixture
def clerk_client(clerk) -> Client:
    client = session_client(clerk)
    return client


@pytest.fixture
def alices_things(alice_key, remember):
    """alice's mind with a key, a memory and audit events: none of the clerk's business."""
    key, _plaintext = alice_key
    memory = remember(key="alice_secret_plan", content="Alice's private plan")
    return key.mind, key, memory


def page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


# -- sign-in rate limit -------------------------------------------------------------------

def test_admin_sign_in_is_rate_limited_on_the_api_logins_counters(alice, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login_username": "3/min", "login": "100/min"}}
    client = Client()
    for _attempt in range(3):
        assert client.post("/admin/login/", {"username": "alice", "password": "wrong"}
                           ).status_code == 200
    refused = client.post("/admin/login/?next=/admin/", {"username": "alice",
                                                         "password": PASSWORD})
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert "Too many sign-in attempts" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    # One budget for every door: the API login and the web sign-in are refused too.
    assert APIClient().post("/auth/login", {"username": "alice", "password": PASSWORD},
                            format="json").status_code == 429
    assert Client().post("/ui/login", {"username": "alice", "password": PASSWORD}
                         ).status_code == 429


def test_admin_sign_in_is_rate_limited_per_address_across_usernames(settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login_username": "100/min", "login": "2/min"}}
    client = Client()
    for number in range(2):
        assert client.post("/admin/login/", {"username": f"someone{number}",
                                             "password": "x"}).status_code == 200
    assert client.post("/admin/login/", {"username": "other", "password": "x"}
                       ).status_code == 429


def test_staff_still_sign_in_to_the_admin(clerk):
    client = Client()
    response = client.post("/admin/login/?next=/admin/", {"username": "clerk",
                                                          "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/admin/"


# -- staff see their own minds ------------------------------------------------------------

def test_staff_changelists_show_only_their_own_minds(clerk_client, clerk_mind, alices_things):
    alice_mind, alice_key, memory = alices_things
    key_issue(mind=clerk_mind, name="clerk agent")
    minds = page(clerk_client, "/admin/minds/mind/")
    assert "Clerk&#x27;s Mind" in minds and alice_mind.id not in minds
    keys = page(clerk_client, "/admin/minds/mindkey/")
    assert "clerk agent" in keys and alice_key.id not in keys and "alice agent" not in keys
    memories = page(clerk_client, "/admin/memories/memory/")
    assert memory.id not in memories and "alice_secret_plan" not in memories
    events = page(clerk_client, "/admin/memories/auditevent/")
    assert memory.id not in events and alice_mind.id not in events
    assert "alice_secret_plan" not in page(clerk_client, "/admin/memories/memory/?q=alice")


@pytest.mark.parametrize("url", [
    "/admin/minds/mind/{mind}/change/", "/admin/minds/mind/{mind}/delete/",
    "/admin/minds/mind/{mind}/history/", "/admin/minds/mindkey/{key}/change/",
    "/admin/memories/memory/{memory}/change/", "/admin/memories/auditevent/{event}/change/",
])
def test_staff_cannot_open_another_owners_objects(clerk_client, alices_things, url):
    alice_mind, alice_key, memory = alices_things
    event = AuditEvent.objects.filter(mind=alice_mind).first()
    response = clerk_client.get(url.format(mind=quote(alice_mind.pk), key=quote(alice_key.pk),
                                           memory=quote(memory.pk), event=quote(event.pk)))
    # The admin's answer for an object that does not exist: back to the index.
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert "Alice" not in response.content.decode()


def test_staff_issue_keys_for_their_own_minds_only(clerk_client, clerk_mind, alices_things):
    alice_mind, _key, _memory = alices_things
    form = page(clerk_client, "/admin/minds/mindkey/add/")
    assert clerk_mind.id in form and alice_mind.id not in form
    response = clerk_client.post("/admin/minds/mindkey/add/", {
        "mind": alice_mind.pk, "name": "stolen", "scope": "write"})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not MindKey.objects.filter(name="stolen").exists()
    response = clerk_client.post("/admin/minds/mindkey/add/", {
        "mind": clerk_mind.pk, "name": "mine", "scope": "write"})
    assert response.status_code == 302
    assert MindKey.objects.get(name="mine").mind == clerk_mind


def test_staff_create_minds_for_themselves_only(clerk_client, clerk, alice):
    form = page(clerk_client, "/admin/minds/mind/add/")
    assert f'value="{alice.pk}"' not in form
    response = clerk_client.post("/admin/minds/mind/add/", {
        "owner": alice.pk, "name": "Planted", "unverified_in_recall": "marked",
        "search_language": "english"})
    assert response.status_code == 200
    assert not Mind.objects.filter(name="Planted").exists()
    clerk_client.post("/admin/minds/mind/add/", {
        "owner": clerk.pk, "name": "Own", "unverified_in_recall": "marked",
        "search_language": "english"})
    assert list(Mind.objects.get(name="Own").owners()) == [clerk]


def test_staff_actions_skip_another_owners_objects(clerk_client, alices_things):
    alice_mind, alice_key, memory = alices_things
    for url, name, pk in [("/admin/memories/memory/", "verify", memory.pk),
                          ("/admin/minds/mindkey/", "revoke_keys", alice_key.pk),
                          ("/admin/minds/mind/", "delete_selected", alice_mind.pk)]:
        # The verify action's confirm step names the versions shown (ids "<id>:<version>").
        clerk_client.post(url, {"action": name, "_selected_action": [pk], "index": 0,
                                "post": "yes", "ids": [f"{pk}:1"]})
    memory.refresh_from_db()
    alice_key.refresh_from_db()
    assert (memory.verified, memory.verified_by) == (False, None)
    assert alice_key.revoked_at is None
    assert Mind.objects.filter(pk=alice_mind.pk).exists()


def test_staff_verify_in_their_own_minds(clerk_client, clerk, clerk_mind, alices_things):
    from memories.services import memory_store

    own = memory_store(mind=clerk_mind, actor=clerk, category="fact", key="own",
                       content="Mine").memory
    Memory.objects.filter(pk=own.pk).update(verified=False)
    confirmation = clerk_client.post("/admin/memories/memory/", {
        "action": "verify", "_selected_action": [own.pk], "index": 0})
    assert "Mine" in confirmation.content.decode()
    clerk_client.post("/admin/memories/memory/", {
        "action": "verify", "post": "yes", "_selected_action": [own.pk], "index": 0,
        "ids": [f"{own.pk}:{own.version}"]})
    own.refresh_from_db()
    assert (own.verified, own.verified_by) == (True, clerk)


def test_only_superusers_manage_accounts(clerk_client, clerk):
    # Even holding every account permission: whoever edits accounts could make themselves
    # superuser, and a superuser reaches every mind.
    clerk.user_permissions.add(*Permission.objects.filter(content_type__app_label="auth"))
    assert clerk_client.get("/admin/auth/user/").status_code == 403
    assert clerk_client.get(f"/admin/auth/user/{quote(clerk.pk)}/change/").status_code == 403
    assert clerk_client.post(f"/admin/auth/user/{quote(clerk.pk)}/change/", {
        "username": "clerk", "is_superuser": "on"}).status_code == 403
    clerk.refresh_from_db()
    assert not clerk.is_superuser


def test_superusers_see_every_mind(alices_things, clerk_mind):
    alice_mind, alice_key, memory = alices_things
    root = get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    client = session_client(root)
    minds = page(client, "/admin/minds/mind/")
    assert alice_mind.id in minds and clerk_mind.id in minds
    assert memory.id in page(client, "/admin/memories/memory/")
    assert alice_key.id in page(client, "/admin/minds/mindkey/")
    page(client, f"/admin/minds/mind/{quote(alice_mind.pk)}/change/")


# -- staff who are editors or viewers on someone else's mind ------------------------------

@pytest.fixture
def shared_with_clerk(alices_things, alice, clerk):
    """alice's mind, the clerk a member of it with the role the test sets, and an
    unverified memory in it."""
    from minds.services import member_add

    mind, key, memory = alices_things
    Memory.objects.filter(pk=memory.pk).update(verified=False)

    def share(role: str):
        member_add(mind=mind, user=clerk, role=role, actor=alice)
        return mind, key, Memory.objects.get(pk=memory.pk)
    return share


def verify_in_admin(client, memory):
    client.post("/admin/memories/memory/", {
        "action": "verify", "post": "yes", "_selected_action": [memory.pk], "index": 0,
        "ids": [f"{memory.pk}:{memory.version}"]})
    memory.refresh_from_db()
    return memory.verified


def test_staff_editors_view_and_verify_memories_but_not_the_mind_or_its_keys(
        clerk_client, clerk, shared_with_clerk):
    from minds.models import Role

    mind, key, memory = shared_with_clerk(Role.EDITOR)
    assert "alice_secret_plan" in page(clerk_client, "/admin/memories/memory/")
    assert "Verify selected memories" in page(clerk_client, "/admin/memories/memory/")
    page(clerk_client, f"/admin/memories/memory/{quote(memory.pk)}/change/")
    assert verify_in_admin(clerk_client, memory)
    assert Memory.objects.get(pk=memory.pk).verified_by == clerk
    # The mind: seen, not changed, not deleted (one by one or by the list's action).
    assert mind.pk in page(clerk_client, "/admin/minds/mind/")
    clerk_client.post(f"/admin/minds/mind/{quote(mind.pk)}/change/", {
        "name": "Taken over", "unverified_in_recall": "marked", "search_language": "english"})
    assert clerk_client.get(f"/admin/minds/mind/{quote(mind.pk)}/delete/").status_code == 403
    clerk_client.post("/admin/minds/mind/", {"action": "delete_selected", "post": "yes",
                                            "_selected_action": [mind.pk], "index": 0})
    assert Mind.objects.get(pk=mind.pk).name == mind.name
    # Its keys: not listed, not opened, not revoked.
    assert key.name not in page(clerk_client, "/admin/minds/mindkey/")
    assert clerk_client.get(f"/admin/minds/mindkey/{quote(key.pk)}/change/").status_code in (
        302, 403, 404)
    clerk_client.post("/admin/minds/mindkey/", {"action": "revoke_keys",
                                               "_selected_action": [key.pk], "index": 0})
    key.refresh_from_db()
    assert key.revoked_at is None
    assert not AuditEvent.objects.filter(mind=mind, actor_id=str(clerk.pk)).exclude(
        action__in=["verify", "member_add"]).exists()


def test_staff_viewers_only_view(clerk_client, clerk, shared_with_clerk):
    from minds.models import Role

    mind, key, memory = shared_with_clerk(Role.VIEWER)
    listing = page(clerk_client, "/admin/memories/memory/")
    assert "alice_secret_plan" in listing and "Verify selected memories" not in listing
    page(clerk_client, f"/admin/memories/memory/{quote(memory.pk)}/change/")
    assert not verify_in_admin(clerk_client, memory)
    clerk_client.post("/admin/memories/memory/", {
        "action": "unverify", "_selected_action": [memory.pk], "index": 0})
    assert "Delete selected" not in page(clerk_client, "/admin/minds/mind/")
    clerk_client.post("/admin/minds/mind/", {"action": "delete_selected", "post": "yes",
                                            "_selected_action": [mind.pk], "index": 0})
    assert Mind.objects.filter(pk=mind.pk).exists()
    assert key.name not in page(clerk_client, "/admin/minds/mindkey/")
    # No mind the clerk may manage: no key to add either.
    assert clerk_client.get("/admin/minds/mindkey/add/").status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None
    assert not AuditEvent.objects.filter(actor_id=str(clerk.pk)).exclude(
        action="member_add").exists()
