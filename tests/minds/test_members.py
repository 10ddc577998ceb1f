"""Memberships and roles (minds.access, minds.services): what each role may do through the
API and the web UI, a mind's last owner, and the keys of a departing owner."""

import pytest

from memories.models import AuditEvent, Memory
from minds.access import Action, allows, minds_for
from minds.models import Membership, Mind, MindKey, Role
from minds.services import (
    LastOwner,
    account_delete,
    key_issue,
    member_add,
    member_remove,
    member_set_role,
)
from tests.conftest import jwt_client, key_client, make_user, session_client, text


@pytest.fixture
def carol(db):
    return make_user("carol")


@pytest.fixture
def team(alice_mind, bob, carol):
    """alice owns her mind; bob is an editor on it, carol a viewer."""
    member_add(mind=alice_mind, user=bob, role=Role.EDITOR, actor=None)
    member_add(mind=alice_mind, user=carol, role=Role.VIEWER, actor=None)
    return alice_mind


def membership(mind, user) -> Membership:
    return Membership.objects.get(mind=mind, user=user)


@pytest.mark.parametrize("role, read, write, manage", [
    (Role.VIEWER, True, False, False), (Role.EDITOR, True, True, False),
    (Role.OWNER, True, True, True), (None, False, False, False)])
def test_each_role_allows_its_actions_and_those_below(role, read, write, manage):
    assert [allows(role, action) for action in Action] == [read, write, manage]


def test_minds_for_an_action_are_those_the_role_allows(team, bob, carol, bob_mind):
    assert set(minds_for(bob, Action.READ)) == {team, bob_mind}
    assert set(minds_for(bob, Action.WRITE)) == {team, bob_mind}
    assert set(minds_for(bob, Action.MANAGE)) == {bob_mind}
    assert list(minds_for(carol, Action.WRITE)) == []
    assert [mind.role for mind in minds_for(carol)] == ["viewer"]


def test_the_api_lets_an_editor_write_and_a_viewer_only_read(team, bob, carol, remember):
    memory = remember(key="office", content="Bonn")
    url = f"/memory?mind={team.id}"
    editor, viewer = jwt_client(bob), jwt_client(carol)
    assert viewer.get(url).status_code == 200
    refused = viewer.post(url, {"category": "fact", "key": "x", "content": "y"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "status": 403, "code": "insufficient_role",
        "message": "Your role on this mind (viewer) does not allow this: only editors and "
                   "owners may."}
    assert viewer.post(f"/memory/{memory.id}/verify?mind={team.id}",
                       {"version": 1}, format="json").status_code == 403
    assert not Memory.objects.filter(key="x").exists()
    stored = editor.post(url, {"category": "fact", "key": "x", "content": "y"}, format="json")
    assert stored.status_code == 201
    verified = editor.post(f"/memory/{memory.id}/verify", {"version": 1}, format="json")
    assert verified.status_code == 200, verified.json()
    event = AuditEvent.objects.filter(mind=team, action="verify").get()
    assert (event.actor_type, event.actor_id, event.actor_label) == ("user", str(bob.pk), "bob")


def test_owner_only_routes_refuse_editors_and_hide_the_mind_from_strangers(team, bob, alice):
    stranger = jwt_client(make_user("mallory"))
    editor = jwt_client(bob)
    for method, url, body in [
            ("patch", f"/minds/{team.id}", {"name": "Taken"}),
            ("get", f"/minds/{team.id}/keys", None),
            ("post", f"/minds/{team.id}/keys", {"name": "mine"}),
            ("post", f"/memory/reset?mind={team.id}", {"path": "projects", "confirm": "projects"}),
            ("delete", f"/minds/{team.id}?confirm={team.name}", None)]:
        answer = getattr(editor, method)(url, body, format="json")
        assert answer.status_code == 403, (method, url, answer.content)
        hidden = getattr(stranger, method)(url, body, format="json")
        assert hidden.status_code == 404, (method, url)
        assert hidden.json()["error"]["message"] == "No such mind."
        assert team.name.encode() not in hidden.content
    assert Mind.objects.get(pk=team.pk).name == "Alice's Mind"
    assert not MindKey.objects.filter(mind=team, name="mine").exists()


def test_the_minds_list_shows_shared_minds_with_the_role(team, bob, bob_mind):
    minds = {mind["name"]: mind["role"] for mind in jwt_client(bob).get("/minds").json()}
    assert minds == {"Alice's Mind": "editor", "Bob's Mind": "owner"}


def test_the_web_ui_refuses_a_viewer_s_posts_and_an_editor_s_settings(team, bob, carol,
                                                                       remember):
    memory = remember(key="office", content="Bonn")
    viewer, editor = session_client(carol), session_client(bob)
    page = f"/ui/minds/{team.id}/"
    assert viewer.get(page).status_code == 200
    refused = viewer.post(f"{page}memories/{memory.id}/delete")
    assert refused.status_code == 403
    assert "does not allow this" in text(refused)
    assert viewer.get(f"{page}memories/new").status_code == 403
    assert Memory.objects.get(pk=memory.pk).deleted_at is None
    assert editor.get(f"{page}settings").status_code == 403
    assert editor.get(f"{page}keys").status_code == 403
    assert editor.post(f"{page}memories/{memory.id}/delete").status_code == 302
    assert Memory.objects.get(pk=memory.pk).deleted_at is not None


def test_a_mind_keeps_its_last_owner(team, alice, bob):
    with pytest.raises(LastOwner):
        member_remove(membership=membership(team, alice), actor=alice)
    with pytest.raises(LastOwner):
        member_set_role(membership=membership(team, alice), role=Role.EDITOR, actor=alice)
    member_set_role(membership=membership(team, bob), role=Role.OWNER, actor=alice)
    member_set_role(membership=membership(team, alice), role=Role.VIEWER, actor=alice)
    assert list(team.owners()) == [bob]


def test_an_owner_who_leaves_takes_no_key_with_them(team, alice, bob):
    """The keys a departing owner issued on the mind are revoked; the other owner's keep
    working, and an editor leaving revokes nothing."""
    member_set_role(membership=membership(team, bob), role=Role.OWNER, actor=alice)
    _bobs_key, bobs_plaintext = key_issue(mind=team, name="bob's laptop", created_by=bob)
    _alices_key, alices_plaintext = key_issue(mind=team, name="alice's laptop",
                                              created_by=alice)
    member_set_role(membership=membership(team, bob), role=Role.EDITOR, actor=alice)
    assert key_client(bobs_plaintext).get("/memory").status_code == 401
    assert key_client(alices_plaintext).get("/memory").status_code == 200
    member_remove(membership=membership(team, bob), actor=bob)
    assert key_client(alices_plaintext).get("/memory").status_code == 200
    assert [event.details["username"] for event in
            AuditEvent.objects.filter(mind=team, action="member_remove")] == ["bob"]


def test_deleting_an_account_keeps_minds_shared_with_another_owner(team, alice, bob, bob_mind):
    member_set_role(membership=membership(team, bob), role=Role.OWNER, actor=alice)
    account_delete(user=bob)
    assert Mind.objects.filter(pk=team.pk).exists()
    assert not Mind.objects.filter(pk=bob_mind.pk).exists()
    assert list(team.owners()) == [alice]


def test_keys_stop_when_no_active_owner_is_left(team, alice, alice_key, bob):
    plaintext = alice_key[1]
    member_set_role(membership=membership(team, bob), role=Role.OWNER, actor=alice)
    _key, bobs = key_issue(mind=team, name="bob's", created_by=bob)
    alice.is_active = False
    alice.save()
    # alice's own key stops with her account; bob's works while he owns the mind.
    assert key_client(plaintext).get("/memory").status_code == 401
    assert key_client(bobs).get("/memory").status_code == 200
    bob.is_active = False
    bob.save()
    MindKey.objects.filter(pk=_key.pk).update(created_by=None)
    assert key_client(bobs).get("/memory").status_code == 401
