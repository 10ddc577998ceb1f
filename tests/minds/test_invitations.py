"""Members and invitations through the human API (minds.invitations, minds.services): invite
by e-mail (a real SMTP server) or username, accept from the link (an account created with
registration closed), decline, revoke, expiry, re-invite; roles, leaving, the last owner,
ownership transfer, and the keys of a departing owner."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from memories.models import AuditEvent
from minds.invitations import hash_token
from minds.models import Invitation, Membership, MindKey, Role
from minds.services import key_issue, member_add
from tests.conftest import PASSWORD, jwt_client, key_client, make_user

LINK = re.compile(r"(https?://\S+/ui/invitations/(inv_\w+))")


@pytest.fixture
def closed_registration(settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "ALLOW_REGISTRATION": False}


def invite(client, mind, **body):
    return client.post(f"/minds/{mind.id}/invitations", body, format="json")


def members(client, mind) -> dict:
    response = client.get(f"/minds/{mind.id}/members")
    assert response.status_code == 200, response.content
    return {member["username"]: member["role"] for member in response.json()}


def error(response) -> dict:
    return response.json()["error"]


def test_an_email_invitation_is_mailed_and_its_link_opens_an_account_with_registration_closed(
        smtp, closed_registration, alice, alice_mind, human):
    response = invite(human, alice_mind, email="Dana@Example.com", role="editor")
    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer["email"] == "dana@example.com" and answer["username"] is None
    assert answer["role"] == "editor" and answer["status"] == "open"
    assert answer["invited_by"] == "alice" and answer["emailed"] is True
    assert len(smtp.messages) == 1
    recipients, message = smtp.messages[0]
    assert recipients == ["dana@example.com"]
    assert message["Subject"] == "alice invited you to \"Alice's Mind\" on Synapse"
    link, token = smtp.links(LINK)[0]
    assert link == answer["link"] and link.startswith("http://testserver/ui/invitations/")
    assert "as editor" in smtp.bodies()[0]
    # Only a hash of the token is stored.
    stored = Invitation.objects.get(pk=answer["id"])
    assert stored.token_hash == hash_token(token) and token not in str(
        Invitation.objects.filter(pk=stored.pk).values().get())

    anyone = APIClient()
    assert anyone.post("/auth/register", {"username": "dana", "password": PASSWORD},
                       format="json").status_code == 403
    created = anyone.post("/auth/register", {"username": "dana", "password": PASSWORD,
                                             "invitation": token}, format="json")
    assert created.status_code == 201, created.content
    dana = Membership.objects.select_related("user").get(mind=alice_mind, user__username="dana")
    assert dana.role == Role.EDITOR and dana.user.email == "dana@example.com"
    assert members(human, alice_mind) == {"alice": "owner", "dana": "editor"}
    stored.refresh_from_db()
    assert stored.status == "accepted" and stored.user_id == dana.user_id
    event = AuditEvent.objects.get(mind=alice_mind, action="member_add")
    assert (event.actor_label, event.details["role"]) == ("dana", "editor")
    # The link worked once.
    again = APIClient().post("/auth/register", {"username": "dana2", "password": PASSWORD,
                                                "invitation": token}, format="json")
    assert again.status_code == 409
    assert error(again)["code"] == "invitation_closed"


def test_register_with_an_invitation_refuses_a_taken_username_and_keeps_it_open(
        closed_registration, alice_mind, human, bob):
    token = LINK.search(invite(human, alice_mind, email="dana@example.com",
                               role="viewer").json()["link"]).group(2)
    taken = APIClient().post("/auth/register", {"username": "BOB", "password": PASSWORD,
                                                "invitation": token}, format="json")
    assert taken.status_code == 400
    assert error(taken)["message"] == "This username is taken: choose another."
    assert Invitation.objects.get().status == "open"
    unknown = APIClient().post("/auth/register", {"username": "dana", "password": PASSWORD,
                                                  "invitation": "inv_nope"}, format="json")
    assert unknown.status_code == 404
    assert not Membership.objects.filter(user__username="dana").exists()


def test_an_invitation_by_username_waits_on_their_list_and_is_accepted_there(
        smtp, alice_mind, human, bob):
    response = invite(human, alice_mind, username="Bob", role="viewer")
    assert response.status_code == 201, response.content
    assert response.json()["username"] == "bob" and response.json()["emailed"] is True
    assert smtp.messages[0][0] == ["bob@example.com"]
    assert "No account yet" not in smtp.bodies()[0]
    as_bob = jwt_client(bob)
    waiting = as_bob.get("/invitations").json()
    assert [(item["mind_name"], item["role"]) for item in waiting] == [("Alice's Mind", "viewer")]
    # Nobody else sees or answers it.
    carol = jwt_client(make_user("carol"))
    assert carol.get("/invitations").json() == []
    assert carol.post(f"/invitations/{waiting[0]['id']}/accept").status_code == 404
    accepted = as_bob.post(f"/invitations/{waiting[0]['id']}/accept")
    assert accepted.status_code == 200, accepted.content
    assert accepted.json() == {"mind_id": alice_mind.id, "mind_name": "Alice's Mind",
                               "role": "viewer"}
    assert as_bob.get("/invitations").json() == []
    assert {mind["name"]: mind["role"] for mind in as_bob.get("/minds").json()} == {
        "Alice's Mind": "viewer"}
    again = as_bob.post(f"/invitations/{waiting[0]['id']}/accept")
    assert again.status_code == 409
    assert error(again)["message"] == "This invitation has already been accepted."


def test_an_email_link_is_accepted_only_by_an_account_with_that_address(
        alice_mind, human, bob):
    token = LINK.search(invite(human, alice_mind, email="BOB@example.com",
                               role="editor").json()["link"]).group(2)
    mallory = jwt_client(make_user("mallory"))
    refused = mallory.post("/invitations/accept", {"token": token}, format="json")
    assert refused.status_code == 400
    assert "This invitation is for bob@example.com" in error(refused)["message"]
    # Without the link the account's list does not offer it: e-mail addresses are unverified.
    assert jwt_client(bob).get("/invitations").json() == []
    accepted = jwt_client(bob).post("/invitations/accept", {"token": token}, format="json")
    assert accepted.status_code == 200, accepted.content
    assert members(human, alice_mind) == {"alice": "owner", "bob": "editor"}


def test_decline_revoke_and_expiry_close_an_invitation(alice_mind, human, bob):
    first = invite(human, alice_mind, username="bob", role="editor").json()
    as_bob = jwt_client(bob)
    assert as_bob.post(f"/invitations/{first['id']}/decline").status_code == 200
    assert Invitation.objects.get(pk=first["id"]).status == "declined"
    assert AuditEvent.objects.filter(mind=alice_mind, action="invitation_decline",
                                     actor_label="bob").exists()

    second = invite(human, alice_mind, username="bob", role="editor").json()
    assert second["id"] != first["id"]
    listed = human.get(f"/minds/{alice_mind.id}/invitations").json()
    assert [item["id"] for item in listed] == [second["id"]]
    revoked = human.delete(f"/minds/{alice_mind.id}/invitations/{second['id']}")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    refused = as_bob.post(f"/invitations/{second['id']}/accept")
    assert refused.status_code == 409
    assert error(refused)["message"] == ("This invitation was withdrawn by an owner of the "
                                         "mind.")
    token = LINK.search(second["link"]).group(2)
    assert as_bob.post("/invitations/accept", {"token": token},
                       format="json").status_code == 409

    third = invite(human, alice_mind, username="bob", role="viewer").json()
    Invitation.objects.filter(pk=third["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    assert as_bob.get("/invitations").json() == []
    expired = as_bob.post(f"/invitations/{third['id']}/accept")
    assert expired.status_code == 409
    assert "expired" in error(expired)["message"]
    assert not Membership.objects.filter(mind=alice_mind, user=bob).exists()
    assert human.get(f"/minds/{alice_mind.id}/invitations").json()[0]["status"] == "expired"


def test_inviting_again_renews_the_open_invitation_with_a_new_link(settings, alice_mind,
                                                                    human, bob):
    settings.SYNAPSE = {**settings.SYNAPSE, "INVITATION_DAYS": 3}
    first = invite(human, alice_mind, username="bob", role="viewer").json()
    Invitation.objects.filter(pk=first["id"]).update(
        expires_at=timezone.now() - timedelta(days=1))
    second = invite(human, alice_mind, username="bob", role="editor").json()
    assert second["id"] == first["id"] and second["link"] != first["link"]
    invitation = Invitation.objects.get()
    assert invitation.role == "editor" and invitation.status == "open"
    assert timedelta(days=2, hours=23) < invitation.expires_at - timezone.now() <= timedelta(
        days=3)
    old_token = LINK.search(first["link"]).group(2)
    assert jwt_client(bob).post("/invitations/accept", {"token": old_token},
                                format="json").status_code == 404
    details = AuditEvent.objects.filter(action="invitation_create").order_by("id")
    assert [event.details["refreshed"] for event in details] == [False, True]


def test_in_production_the_link_in_the_answer_never_comes_from_the_host_header(
        settings, alice_mind, human, bob):
    # As with ALLOWED_HOSTS=* (which production now refuses): a stranger's Host gets in.
    settings.PRODUCTION, settings.EMAIL_HOST, settings.ALLOWED_HOSTS = True, "", ["*"]
    settings.PUBLIC_URL = "https://synapse.example.com"
    answer = human.post(f"/minds/{alice_mind.id}/invitations",
                        {"username": "bob", "role": "viewer"}, format="json",
                        HTTP_HOST="evil.example")
    assert answer.status_code == 201, answer.content
    assert answer.json()["link"].startswith("https://synapse.example.com/ui/invitations/inv_")
    # Without SYNAPSE_PUBLIC_URL (and so without mail): the path alone, on this server.
    settings.PUBLIC_URL = ""
    again = human.post(f"/minds/{alice_mind.id}/invitations",
                       {"username": "bob", "role": "viewer"}, format="json",
                       HTTP_HOST="evil.example").json()
    assert again["link"].startswith("/ui/invitations/inv_") and again["emailed"] is False


def test_in_development_the_link_is_on_the_request_origin(alice_mind, human):
    answer = human.post(f"/minds/{alice_mind.id}/invitations",
                        {"email": "dana@example.com", "role": "viewer"}, format="json",
                        HTTP_HOST="localhost:8000").json()
    assert answer["link"].startswith("http://localhost:8000/ui/invitations/inv_")


def test_who_may_not_be_invited(alice_mind, human, bob):
    member_add(mind=alice_mind, user=bob, role=Role.VIEWER)
    cases = [({"username": "bob", "role": "editor"}, "bob is already a member of this mind."),
             ({"email": "BOB@example.com", "role": "editor"},
              "A member of this mind already has this address."),
             ({"username": "nobody", "role": "editor"}, "There is no account named 'nobody'."),
             ({"username": "bob", "email": "b@example.com", "role": "editor"},
              "Send either username or email."),
             ({"username": "carl", "role": "admin"}, None)]
    for body, message in cases:
        response = invite(human, alice_mind, **body)
        assert response.status_code == 400, body
        if message:
            assert error(response)["message"] == message
    assert not Invitation.objects.exists()


def test_a_non_owner_cannot_invite_and_a_stranger_learns_nothing(alice_mind, bob, alice_key):
    member_add(mind=alice_mind, user=bob, role=Role.EDITOR)
    stranger = jwt_client(make_user("mallory"))
    editor = jwt_client(bob)
    for client, code in [(editor, 403), (stranger, 404)]:
        assert invite(client, alice_mind, email="x@example.com",
                      role="owner").status_code == code
        assert client.get(f"/minds/{alice_mind.id}/invitations").status_code == code
        assert client.patch(f"/minds/{alice_mind.id}/members/{bob.pk}", {"role": "owner"},
                            format="json").status_code == code
    assert error(invite(editor, alice_mind, email="x@example.com", role="owner"))[
        "code"] == "insufficient_role"
    hidden = stranger.get(f"/minds/{alice_mind.id}/members")
    assert hidden.status_code == 404 and b"alice" not in hidden.content
    # Any member sees who is on the mind.
    assert members(editor, alice_mind) == {"alice": "owner", "bob": "editor"}
    # A Mind Key is no human.
    agent = key_client(alice_key[1])
    assert agent.get(f"/minds/{alice_mind.id}/members").status_code == 403
    assert agent.get("/invitations").status_code == 403
    assert not Invitation.objects.exists()
    assert Membership.objects.get(mind=alice_mind, user=bob).role == Role.EDITOR


def test_open_invitations_per_mind_are_limited(monkeypatch, alice_mind, human):
    monkeypatch.setattr("minds.invitations.MAX_OPEN_PER_MIND", 2)
    for n in range(2):
        assert invite(human, alice_mind, email=f"p{n}@example.com",
                      role="viewer").status_code == 201
    refused = invite(human, alice_mind, email="p2@example.com", role="viewer")
    assert refused.status_code == 409
    assert "already has 2 open invitations" in error(refused)["message"]
    # Renewing one is not a new one.
    assert invite(human, alice_mind, email="p0@example.com", role="editor").status_code == 201


def test_inviting_is_rate_limited_per_person(settings, alice_mind, human):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {**rates, "invite": "2/hour"}}
    for n in range(2):
        assert invite(human, alice_mind, email=f"p{n}@example.com",
                      role="viewer").status_code == 201
    refused = invite(human, alice_mind, email="p2@example.com", role="viewer")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert Invitation.objects.count() == 2


def test_leaving_and_the_last_owner(alice, alice_mind, human, bob):
    member_add(mind=alice_mind, user=bob, role=Role.VIEWER)
    as_bob = jwt_client(bob)
    assert as_bob.delete(f"/minds/{alice_mind.id}/members/{alice.pk}").status_code == 403
    assert as_bob.delete(f"/minds/{alice_mind.id}/members/{bob.pk}").status_code == 204
    assert as_bob.get(f"/minds/{alice_mind.id}").status_code == 404
    for response in (human.delete(f"/minds/{alice_mind.id}/members/{alice.pk}"),
                     human.patch(f"/minds/{alice_mind.id}/members/{alice.pk}",
                                 {"role": "editor"}, format="json")):
        assert response.status_code == 409
        assert error(response) == {
            "status": 409, "code": "last_owner",
            "message": "A mind keeps at least one owner: make someone else an owner first."}
    assert members(human, alice_mind) == {"alice": "owner"}
    assert human.delete(f"/minds/{alice_mind.id}/members/{bob.pk}").status_code == 404


def test_ownership_transfer_and_a_removed_owner_s_keys(alice, alice_mind, alice_key, human, bob):
    member_add(mind=alice_mind, user=bob, role=Role.EDITOR)
    promoted = human.patch(f"/minds/{alice_mind.id}/members/{bob.pk}", {"role": "owner"},
                           format="json")
    assert promoted.status_code == 200 and promoted.json()["role"] == "owner"
    as_bob = jwt_client(bob)
    bobs_key = as_bob.post(f"/minds/{alice_mind.id}/keys", {"name": "bob's laptop"},
                           format="json").json()["key"]
    # alice hands over: she steps down to editor; her keys go, bob's keep working.
    stepped = human.patch(f"/minds/{alice_mind.id}/members/{alice.pk}", {"role": "editor"},
                          format="json")
    assert stepped.status_code == 200, stepped.content
    assert key_client(alice_key[1]).get("/memory").status_code == 401
    assert key_client(bobs_key).get("/memory").status_code == 200
    assert human.get(f"/minds/{alice_mind.id}/keys").status_code == 403
    assert members(as_bob, alice_mind) == {"alice": "editor", "bob": "owner"}
    # bob makes alice owner again, issues another key with her, and removes her: her new
    # key stops (401) and his keeps working.
    as_bob.patch(f"/minds/{alice_mind.id}/members/{alice.pk}", {"role": "owner"},
                 format="json")
    _key, alices_new = key_issue(mind=alice_mind, name="alice again", created_by=alice)
    assert key_client(alices_new).get("/memory").status_code == 200
    assert as_bob.delete(f"/minds/{alice_mind.id}/members/{alice.pk}").status_code == 204
    assert key_client(alices_new).get("/memory").status_code == 401
    assert key_client(bobs_key).get("/memory").status_code == 200
    assert not MindKey.objects.filter(mind=alice_mind, created_by=alice,
                                      revoked_at__isnull=True).exists()
    assert [e.details["username"] for e in AuditEvent.objects.filter(
        mind=alice_mind, action="member_remove")] == ["alice"]


def test_the_members_and_invitations_lists_take_the_same_queries_for_more_rows(
        alice_mind, human):
    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert human.get(url).status_code == 200
        return len(captured)

    urls = [f"/minds/{alice_mind.id}/members", f"/minds/{alice_mind.id}/invitations"]
    member_add(mind=alice_mind, user=make_user("m0"), role=Role.VIEWER)
    make_user("bob0")
    invite(human, alice_mind, username="bob0", role="viewer")
    invite(human, alice_mind, email="p0@example.com", role="viewer")
    before = [queries(url) for url in urls]
    for n in range(1, 4):
        member_add(mind=alice_mind, user=make_user(f"m{n}"), role=Role.VIEWER)
        make_user(f"bob{n}")
        invite(human, alice_mind, username=f"bob{n}", role="viewer")
        invite(human, alice_mind, email=f"p{n}@example.com", role="viewer")
    assert [queries(url) for url in urls] == before
    assert len(human.get(urls[1]).json()) == 8


# -- Invitations outlive no owner who sent them ----------------------------------------------

FORMER_OWNER = ("This invitation was sent by someone who is no longer an owner of this "
                "mind: ask a current owner to invite you again.")


@pytest.fixture
def co_owner(alice_mind, bob):
    """bob owns alice's mind with her."""
    member_add(mind=alice_mind, user=bob, role=Role.OWNER)
    return bob


def sent_by_bob(bob, alice_mind) -> dict:
    """bob invites x (an account) and x2@example.com as owners: (invitation, token) each."""
    make_user("x")
    as_bob = jwt_client(bob)
    sent = {}
    for name, body in [("account", {"username": "x"}), ("address", {"email": "x2@example.com"})]:
        response = invite(as_bob, alice_mind, role="owner", **body)
        assert response.status_code == 201, response.content
        sent[name] = (response.json()["id"], LINK.search(response.json()["link"]).group(2))
    return sent


def assert_every_way_in_is_closed(sent, *, message=None):
    """x cannot take up bob's invitations, from the list, with the token, or by creating an
    account from the address's link: each is a 409 invitation_closed."""
    as_x = jwt_client(get_user_model().objects.get(username="x"))
    assert as_x.get("/invitations").json() == []
    invitation_id, token = sent["account"]
    register = {"username": "x2", "password": PASSWORD, "invitation": sent["address"][1]}
    for refused in (as_x.post(f"/invitations/{invitation_id}/accept"),
                    as_x.post("/invitations/accept", {"token": token}, format="json"),
                    APIClient().post("/auth/register", register, format="json")):
        assert refused.status_code == 409, refused.content
        assert error(refused)["code"] == "invitation_closed"
        assert error(refused)["status"] == 409
        if message:
            assert error(refused)["message"] == message
    assert not get_user_model().objects.filter(username="x2").exists()


def test_a_removed_owner_s_invitee_cannot_join_as_owner_and_demote_the_other(
        alice, alice_mind, human, co_owner):
    """The finding: bob invites x as owner, alice removes bob, x must not get in (and then
    demote alice)."""
    sent = sent_by_bob(co_owner, alice_mind)
    assert human.delete(f"/minds/{alice_mind.id}/members/{co_owner.pk}").status_code == 204
    assert_every_way_in_is_closed(sent)
    assert members(human, alice_mind) == {"alice": "owner"}
    assert Membership.objects.filter(mind=alice_mind).count() == 1


def leave(alice, alice_mind, bob):
    return jwt_client(bob).delete(f"/minds/{alice_mind.id}/members/{bob.pk}")


def remove(alice, alice_mind, bob):
    return jwt_client(alice).delete(f"/minds/{alice_mind.id}/members/{bob.pk}")


def demote(alice, alice_mind, bob):
    return jwt_client(alice).patch(f"/minds/{alice_mind.id}/members/{bob.pk}",
                                   {"role": "editor"}, format="json")


def delete_account(alice, alice_mind, bob):
    return jwt_client(bob).delete("/auth/me", {"confirm": "bob", "password": PASSWORD},
                                  format="json")


@pytest.mark.parametrize("stop_owning", [remove, demote, leave, delete_account])
def test_an_owner_who_stops_owning_a_mind_takes_their_open_invitations_with_them(
        stop_owning, alice, alice_mind, human, co_owner):
    sent = sent_by_bob(co_owner, alice_mind)
    carol = make_user("carol")
    declined = invite(jwt_client(co_owner), alice_mind, username="carol",
                      role="viewer").json()["id"]
    assert jwt_client(carol).post(f"/invitations/{declined}/decline").status_code == 200
    alices = invite(human, alice_mind, email="y@example.com", role="viewer").json()["id"]
    answer = stop_owning(alice, alice_mind, co_owner)
    assert answer.status_code in (200, 204), answer.content
    bobs = [invitation_id for invitation_id, _token in sent.values()]
    assert {invitation.id: invitation.status for invitation in Invitation.objects.all()} == {
        **dict.fromkeys(bobs, "revoked"), declined: "declined", alices: "open"}
    events = AuditEvent.objects.filter(mind=alice_mind, action="invitation_revoke")
    assert sorted(event.details["invitation_id"] for event in events) == sorted(bobs)
    assert {event.details["reason"] for event in events} == {"inviter_not_owner"}
    assert_every_way_in_is_closed(sent, message="This invitation was withdrawn by an owner "
                                                "of the mind.")
    # alice's invitation still works.
    token = LINK.search(invite(human, alice_mind, email="y@example.com",
                               role="viewer").json()["link"]).group(2)
    joined = APIClient().post("/auth/register", {"username": "y", "password": PASSWORD,
                                                 "invitation": token}, format="json")
    assert joined.status_code == 201, joined.content
    assert Membership.objects.get(mind=alice_mind, user__username="y").role == Role.VIEWER


def test_an_editor_leaving_revokes_no_invitation(alice_mind, human, bob):
    member_add(mind=alice_mind, user=bob, role=Role.EDITOR)
    sent = invite(human, alice_mind, email="y@example.com", role="viewer").json()["id"]
    assert leave(None, alice_mind, bob).status_code == 204
    assert Invitation.objects.get(pk=sent).status == "open"
    assert not AuditEvent.objects.filter(action="invitation_revoke").exists()


@pytest.mark.parametrize("orphan", ["demoted", "removed", "deleted", "deactivated"])
def test_an_invitation_from_someone_no_longer_an_owner_is_refused_even_if_still_open(
        orphan, alice, alice_mind, human, co_owner):
    """A row from before revocation on stepping down (here made by updating the database
    directly): still open, but its inviter is no longer an owner (or no longer exists, or
    is deactivated), so taking it up is refused and it leaves the invitee's list."""
    sent = sent_by_bob(co_owner, alice_mind)
    if orphan == "demoted":
        Membership.objects.filter(mind=alice_mind, user=co_owner).update(role=Role.EDITOR)
    elif orphan == "removed":
        Membership.objects.filter(mind=alice_mind, user=co_owner).delete()
    elif orphan == "deactivated":
        get_user_model().objects.filter(pk=co_owner.pk).update(is_active=False)
    else:
        Invitation.objects.filter(invited_by=co_owner).update(invited_by=None)
    assert {invitation.status for invitation in Invitation.objects.all()} == {"open"}
    assert_every_way_in_is_closed(sent, message=FORMER_OWNER)
    assert not Membership.objects.filter(mind=alice_mind, user__username="x").exists()
    assert Membership.objects.get(mind=alice_mind, user=alice).role == Role.OWNER
    assert not AuditEvent.objects.filter(action="member_add", details__username="x").exists()


def test_migration_0010_closes_invitations_left_open_by_former_owners(
        alice, alice_mind, human, co_owner):
    """Rows from before the rule: bob stepped down without his invitations being revoked
    (a direct update, as the code before it left them). The migration revokes his, not
    alice's."""
    from importlib import import_module

    from django.apps import apps

    sent = sent_by_bob(co_owner, alice_mind)
    mine = invite(human, alice_mind, role="viewer", email="y@example.com").json()["id"]
    Membership.objects.filter(mind=alice_mind, user=co_owner).update(role=Role.EDITOR)
    import_module("minds.migrations.0010_close_invitations_of_former_owners").close(apps, None)
    statuses = dict(Invitation.objects.values_list("id", "revoked_at"))
    assert all(statuses[invitation_id] is not None for invitation_id, _ in sent.values())
    assert statuses[mine] is None
