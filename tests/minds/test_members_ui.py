"""The Members page, the invitation link page and the minds list in the web UI: owners invite,
change roles, remove and revoke; anyone on the mind sees who is on it; invitees accept from
their list or the link (creating an account there even with registration closed); members
leave, the last owner cannot."""

import re

import pytest
from django.test import Client

from memories.models import AuditEvent
from minds.models import Invitation, Membership, MindKey, Role
from minds.services import key_issue, member_add
from tests.conftest import PASSWORD, key_client, make_user, messages_of, session_client, text

LINK = re.compile(r"(https?://\S+/ui/invitations/(inv_\w+))")


@pytest.fixture
def members_page(alice_mind):
    return f"/ui/minds/{alice_mind.id}/members"


def test_an_owner_invites_by_email_and_sees_the_link_once(smtp, owner, alice_mind,
                                                          members_page):
    page = owner.post(members_page, {"invitee": "Dana@Example.com", "role": "editor"})
    assert page.status_code == 200
    body = text(page)
    link, _token = LINK.search(body).groups()
    assert smtp.links(LINK)[0][0] == link
    assert "The link is on its way by e-mail." in body
    listed = text(owner.get(members_page))
    assert "dana@example.com" in listed and link not in listed
    invitation = Invitation.objects.get()
    assert (invitation.email, invitation.role) == ("dana@example.com", "editor")


def test_without_mail_the_owner_gets_the_link_to_hand_over(settings, owner, members_page):
    settings.PRODUCTION, settings.EMAIL_HOST = True, ""
    settings.PUBLIC_URL = "https://synapse.example.com"
    page = text(owner.post(members_page, {"invitee": "dana@example.com", "role": "viewer"}))
    assert "It was not mailed" in page
    assert LINK.search(page).group(1).startswith("https://synapse.example.com/ui/invitations/")


def test_in_production_the_page_never_builds_the_link_on_the_host_header(
        settings, owner, members_page):
    settings.PRODUCTION, settings.EMAIL_HOST, settings.ALLOWED_HOSTS = True, "", ["*"]
    settings.PUBLIC_URL = ""
    page = owner.post(members_page, {"invitee": "dana@example.com", "role": "viewer"},
                      HTTP_HOST="evil.example")
    assert page.status_code == 200
    assert "evil.example" not in page.content.decode()
    shown = re.search(r'id="invitation-link"[^>]*value="([^"]+)"', page.content.decode())
    assert shown.group(1).startswith("/ui/invitations/inv_")
    assert "SYNAPSE_PUBLIC_URL" in text(page)


def test_the_invite_form_says_what_is_wrong(owner, alice_mind, members_page, bob):
    member_add(mind=alice_mind, user=bob, role=Role.VIEWER)
    for invitee, message in [("bob", "bob is already a member of this mind."),
                             ("nobody", "There is no account named &#x27;nobody&#x27;."),
                             ("not@an@address", "Enter a valid email address.")]:
        page = owner.post(members_page, {"invitee": invitee, "role": "editor"})
        assert page.status_code == 400 and message in text(page), invitee
    assert not Invitation.objects.exists()


def test_the_link_creates_an_account_with_registration_closed_and_joins(
        settings, smtp, owner, alice_mind, members_page):
    settings.SYNAPSE = {**settings.SYNAPSE, "ALLOW_REGISTRATION": False}
    owner.post(members_page, {"invitee": "dana@example.com", "role": "editor"})
    link, _token = smtp.links(LINK)[0]
    browser = Client()
    page = browser.get(link)
    assert page.status_code == 200
    assert "alice" in text(page) and "Alice&#x27;s Mind" in text(page)
    assert "Create account and join" in text(page)
    mismatch = browser.post(link, {"answer": "signup", "username": "dana",
                                   "password1": PASSWORD, "password2": "other"})
    assert mismatch.status_code == 400 and "The two passwords differ." in text(mismatch)
    joined = browser.post(link, {"answer": "signup", "username": "dana",
                                 "password1": PASSWORD, "password2": PASSWORD})
    assert joined.status_code == 302 and joined["Location"] == f"/ui/minds/{alice_mind.id}/"
    dana = Membership.objects.select_related("user").get(mind=alice_mind,
                                                         user__username="dana")
    assert dana.role == "editor" and dana.user.email == "dana@example.com"
    assert browser.get(joined["Location"]).status_code == 200  # signed in
    used = Client().get(link)
    assert used.status_code == 410
    assert "This invitation has already been accepted." in text(used)
    assert Client().get("/ui/invitations/inv_nothing").status_code == 404


def test_signed_in_as_another_address_the_link_says_so(owner, alice_mind, members_page, bob):
    page = text(owner.post(members_page, {"invitee": "dana@example.com", "role": "editor"}))
    link = LINK.search(page).group(1)
    as_bob = session_client(bob)
    shown = text(as_bob.get(link))
    assert "This invitation is for dana@example.com" in shown and ">Accept<" not in shown
    refused = as_bob.post(link, {"answer": "accept"}, follow=True)
    assert "This invitation is for dana@example.com" in messages_of(refused)[0]
    assert not Membership.objects.filter(mind=alice_mind, user=bob).exists()
    # The token holder may decline it, signed in or not.
    declined = Client().post(link, {"answer": "decline"})
    assert "You declined this invitation." in text(declined)
    assert Invitation.objects.get().status == "declined"


def test_an_invitation_by_username_is_answered_from_the_minds_list(owner, alice_mind,
                                                                   members_page, bob):
    owner.post(members_page, {"invitee": "bob", "role": "viewer"})
    as_bob = session_client(bob)
    minds = text(as_bob.get("/ui/"))
    assert "Invitations for you" in minds and "Alice&#x27;s Mind" in minds
    invitation = Invitation.objects.get()
    stranger = session_client(make_user("mallory"))
    assert stranger.post(f"/ui/invitations/{invitation.id}/accept").status_code == 404
    accepted = as_bob.post(f"/ui/invitations/{invitation.id}/accept")
    assert accepted.status_code == 302 and accepted["Location"] == f"/ui/minds/{alice_mind.id}/"
    minds = text(as_bob.get("/ui/"))
    assert "Invitations for you" not in minds
    assert 'data-testid="role">viewer<' in minds
    assert AuditEvent.objects.filter(mind=alice_mind, action="member_add",
                                     actor_label="bob").exists()


def test_a_declined_invitation_leaves_the_list(owner, members_page, bob):
    owner.post(members_page, {"invitee": "bob", "role": "viewer"})
    invitation = Invitation.objects.get()
    as_bob = session_client(bob)
    assert as_bob.post(f"/ui/invitations/{invitation.id}/decline").status_code == 302
    assert "Invitations for you" not in text(as_bob.get("/ui/"))
    assert Invitation.objects.get().status == "declined"


def test_members_see_the_list_read_only_and_cannot_post_its_forms(alice, alice_mind, bob,
                                                                  members_page):
    member_add(mind=alice_mind, user=bob, role=Role.EDITOR)
    as_bob = session_client(bob)
    page = as_bob.get(members_page)
    assert page.status_code == 200
    assert 'data-member="alice"' in text(page) and "Invite someone" not in text(page)
    for url, data in [(members_page, {"invitee": "x@example.com", "role": "owner"}),
                      (f"{members_page}/{bob.pk}/role", {"role": "owner"}),
                      (f"{members_page}/{alice.pk}/remove", {})]:
        assert as_bob.post(url, data).status_code == 403, url
    assert not Invitation.objects.exists()
    assert Membership.objects.get(mind=alice_mind, user=bob).role == "editor"
    stranger = session_client(make_user("mallory"))
    assert stranger.get(members_page).status_code == 404


def test_an_owner_changes_roles_removes_and_revokes(owner, alice, alice_mind, members_page,
                                                   bob):
    member_add(mind=alice_mind, user=bob, role=Role.VIEWER)
    assert owner.post(f"{members_page}/{bob.pk}/role", {"role": "owner"}).status_code == 302
    assert Membership.objects.get(mind=alice_mind, user=bob).role == "owner"
    _key, bobs = key_issue(mind=alice_mind, name="bob's", created_by=bob)
    assert owner.post(f"{members_page}/{bob.pk}/remove").status_code == 302
    assert not Membership.objects.filter(mind=alice_mind, user=bob).exists()
    assert key_client(bobs).get("/memory").status_code == 401
    owner.post(members_page, {"invitee": "dana@example.com", "role": "viewer"})
    invitation = Invitation.objects.get()
    revoked = owner.post(f"/ui/minds/{alice_mind.id}/invitations/{invitation.id}/revoke",
                         follow=True)
    assert "its link no longer works" in messages_of(revoked)[0]
    assert Invitation.objects.get().status == "revoked"
    last = owner.post(f"{members_page}/{alice.pk}/role", {"role": "editor"}, follow=True)
    assert messages_of(last) == ["A mind keeps at least one owner: make someone else an "
                                 "owner first."]


def test_leaving_a_shared_mind_from_the_minds_list(owner, alice, alice_mind, alice_key, bob):
    member_add(mind=alice_mind, user=bob, role=Role.EDITOR)
    as_bob = session_client(bob)
    assert "Leave" in text(as_bob.get("/ui/"))
    alone = text(owner.get("/ui/"))
    assert "You are its only owner: to leave, make another member an owner first." in alone
    refused = owner.post(f"/ui/minds/{alice_mind.id}/leave", follow=True)
    assert "You are the only owner of Alice's Mind, so you cannot leave it" in messages_of(
        refused)[0]
    left = as_bob.post(f"/ui/minds/{alice_mind.id}/leave", follow=True)
    assert messages_of(left) == ["You left Alice's Mind."]
    assert as_bob.get(f"/ui/minds/{alice_mind.id}/").status_code == 404
    assert MindKey.objects.usable().filter(pk=alice_key[0].pk).exists()


def test_an_invitation_from_a_former_owner_is_closed_in_the_web_ui(alice_mind, members_page,
                                                                   bob):
    """bob, an owner, invites carol (her account) and dana@example.com; then he is no longer
    an owner without his invitations being revoked (a row from before revocation on stepping
    down, made here by updating the database): neither the minds list, the Accept button nor
    the link takes them up, each says why, and nobody joins."""
    from minds.invitations import FORMER_OWNER

    member_add(mind=alice_mind, user=bob, role=Role.OWNER)
    as_bob, carol = session_client(bob), make_user("carol")
    links = [LINK.search(text(as_bob.post(members_page, {"invitee": invitee,
                                                         "role": "owner"}))).group(1)
             for invitee in ("carol", "dana@example.com")]
    Membership.objects.filter(mind=alice_mind, user=bob).update(role=Role.EDITOR)
    as_carol = session_client(carol)
    assert "Invitations for you" not in text(as_carol.get("/ui/"))
    by_username = Invitation.objects.get(user=carol)
    refused = as_carol.post(f"/ui/invitations/{by_username.id}/accept", follow=True)
    assert refused.status_code == 200 and messages_of(refused) == [FORMER_OWNER]
    for link, browser in [(links[0], as_carol), (links[1], Client())]:
        shown = browser.get(link)
        assert shown.status_code == 410 and FORMER_OWNER in text(shown)
        assert ">Accept<" not in text(shown) and "Create account and join" not in text(shown)
    for answer in ({"answer": "accept"}, {"answer": "signup", "username": "dana",
                                          "password1": PASSWORD, "password2": PASSWORD}):
        browser = as_carol if answer["answer"] == "accept" else Client()
        posted = browser.post(links[0] if answer["answer"] == "accept" else links[1], answer)
        assert posted.status_code == 410 and FORMER_OWNER in text(posted)
    assert not Membership.objects.filter(mind=alice_mind, role=Role.OWNER).exclude(
        user__username="alice").exists()
    assert not Membership.objects.filter(user__username__in=["carol", "dana"]).exists()


def test_removing_an_owner_on_the_members_page_revokes_their_invitations(
        owner, alice_mind, members_page, bob):
    member_add(mind=alice_mind, user=bob, role=Role.OWNER)
    page = text(session_client(bob).post(members_page, {"invitee": "dana@example.com",
                                                        "role": "owner"}))
    link = LINK.search(page).group(1)
    owner.post(members_page, {"invitee": "zoe@example.com", "role": "viewer"})
    assert owner.post(f"{members_page}/{bob.pk}/remove").status_code == 302
    statuses = {i.email: i.status for i in Invitation.objects.all()}
    assert statuses == {"dana@example.com": "revoked", "zoe@example.com": "open"}
    event = AuditEvent.objects.get(mind=alice_mind, action="invitation_revoke")
    assert (event.actor_label, event.details["email"], event.details["invited_by"],
            event.details["reason"]) == ("alice", "dana@example.com", "bob",
                                         "inviter_not_owner")
    listed = text(owner.get(members_page))
    assert "<strong>zoe@example.com</strong>" in listed
    assert "<strong>dana@example.com</strong>" not in listed
    closed = Client().get(link)
    assert closed.status_code == 410
    assert "This invitation was withdrawn by an owner of the mind." in text(closed)
