"""A person's own data (issue 16, part 5): GET /auth/export and the Account page's export,
DELETE /auth/me and the Account page's deletion (minds.services.account_delete): minds owned
alone go with every row, shared minds stay with their other owners, and the person's
attribution everywhere else becomes a pseudonym, "deleted user <n>"."""

import base64
import json
import re
from html import escape

import pytest
from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session
from django.db import models
from rest_framework_simplejwt.token_blacklist.models import OutstandingToken

from memories.models import AuditEvent, Memory, MemoryVersion
from minds.invitations import invite
from minds.models import Invitation, Membership, Mind, MindKey, OAuthConnection, Role
from minds.services import key_issue, member_add, mind_create
from tests.conftest import PASSWORD, jwt_client, key_client, make_user, session_client, text
from tests.minds.oauth_flow import connect

NAME = "dorothea"  # in no fixture's data but hers: a scan for it finds only what names her
ORIGIN = "https://synapse.example"


def body(response) -> dict:
    assert response.status_code == 200, response.content[:300]
    assert response.streaming
    return json.loads(b"".join(response.streaming_content))


def delete_me(client, confirm=NAME, password=PASSWORD):
    return client.delete("/auth/me", {"confirm": confirm, "password": password},
                         format="json")


@pytest.fixture
def dora(db):
    return make_user(NAME)


@pytest.fixture
def world(dora, alice, alice_mind, alice_key, bob, bob_mind, remember, staff):
    """dora owns "Private notes" alone; she co-owns alice's mind (a key, an OAuth
    connection, memories she wrote, edited and verified there) and edits on bob's mind;
    she is signed in by session and by JWT; an admin changed her account."""
    member_add(mind=alice_mind, user=dora, role=Role.OWNER, actor=alice)
    member_add(mind=bob_mind, user=dora, role=Role.EDITOR, actor=bob)
    human = jwt_client(dora)
    own = mind_create(owner=dora, name="Private notes")
    stored = human.post(f"/memory?mind={own.id}", {"category": "fact", "key": "diary",
                                                   "content": "Kept to myself"}, format="json")
    assert stored.status_code == 201
    dora_key, dora_plaintext = key_issue(mind=alice_mind, name="her laptop", created_by=dora)
    key_issue(mind=own, name="her own agent", created_by=dora)
    browser = session_client(dora)
    tokens = connect(browser, alice_mind)
    written = human.post(f"/memory?mind={alice_mind.id}", {
        "category": "fact", "key": "office", "content": "Room 4"}, format="json").json()
    assert human.put(f"/memory/{written['id']}?mind={alice_mind.id}",
                     {"content": "Room 5"}, format="json").status_code == 200
    by_agent = remember(key="lunch", content="Noon")
    assert human.post(f"/memory/{by_agent.id}/verify?mind={alice_mind.id}").status_code == 200
    assert human.post(f"/memory?mind={bob_mind.id}", {
        "category": "fact", "key": "bob's", "content": "Edited by her"},
        format="json").status_code == 201
    login = jwt_client(dora).post("/auth/login", {"username": NAME, "password": PASSWORD},
                                  format="json")
    assert login.status_code == 200
    assert body(human.get("/auth/export"))["account"]["username"] == NAME  # a rate-limit row
    # Invitations: one she sent (on alice's mind, which stays), one to her account and one
    # to her address (on minds of bob's), all with audit events naming her.
    invite(mind=alice_mind, actor=dora, role=Role.VIEWER, origin=ORIGIN,
           email="guest@example.com")
    bob_other = mind_create(owner=bob, name="Reading list")
    invite(mind=bob_other, actor=bob, role=Role.VIEWER, origin=ORIGIN, username=NAME)
    invite(mind=mind_create(owner=bob, name="Plans"), actor=bob, role=Role.EDITOR,
           origin=ORIGIN, email=f"{NAME}@Example.com")
    LogEntry.objects.create(user=staff.user, action_flag=CHANGE, object_repr=NAME,
                            content_type=ContentType.objects.get_for_model(dora),
                            object_id=str(dora.pk))
    return {"own": own, "human": human, "browser": browser, "written": written["id"],
            "verified": by_agent.id, "dora_key": dora_key, "dora_plaintext": dora_plaintext,
            "tokens": tokens, "user_id": dora.pk}


# -- Export everything I own ---------------------------------------------------------------

def test_the_export_holds_the_account_and_every_owned_mind_in_the_mind_export_format(
        world, dora, alice, alice_mind, bob_mind):
    document = body(world["human"].get("/auth/export"))
    assert document["format"] == "synapse.account-export"
    assert document["account"] | {"date_joined": None, "last_login": None} == {
        "id": dora.pk, "username": NAME, "email": f"{NAME}@example.com", "first_name": "",
        "last_name": "", "date_joined": None, "last_login": None}
    assert {(m["mind_id"], m["role"]) for m in document["memberships"]} == {
        (alice_mind.id, "owner"), (bob_mind.id, "editor"), (world["own"].id, "owner")}
    assert {key["name"] for key in document["keys"]} == {"her laptop", "her own agent"}
    assert [c["mind_id"] for c in document["connections"]] == [alice_mind.id]
    invitations = document["invitations"]
    assert [(i["mind_name"], i["invitee"], i["invited_by"], i["status"])
            for i in invitations["received"]] == [("Reading list", NAME, "bob", "open")]
    assert [(i["mind_id"], i["invitee"], i["invited_by"], i["role"])
            for i in invitations["sent"]] == [
        (alice_mind.id, "guest@example.com", NAME, "viewer")]
    assert not {"token", "token_hash", "link"} & set(invitations["sent"][0])
    # Never a secret: no lookup, no hash, no plaintext, no OAuth token.
    raw = json.dumps(document)
    assert world["dora_plaintext"] not in raw and world["dora_key"].hashed_secret not in raw
    assert world["tokens"]["access_token"] not in raw
    assert set(document["keys"][0]) == {"id", "mind_id", "name", "last4", "scope", "paths",
                                        "created_at", "last_used_at", "expires_at",
                                        "revoked_at"}
    # Every mind she owns, alone or not, exactly as GET /mind/export writes it.
    parts = {part["mind"]["id"]: part for part in document["minds"]}
    assert set(parts) == {alice_mind.id, world["own"].id}
    alone = jwt_client(dora).get(f"/mind/export?mind={world['own'].id}")
    single = body(alone)
    for part in (single, parts[world["own"].id]):
        part.pop("exported_at")
    assert parts[world["own"].id] == single


def test_each_part_of_the_export_imports_with_the_mind_import(world, dora):
    document = body(world["human"].get("/auth/export"))
    for part in document["minds"]:
        copy = mind_create(owner=dora, name=f"copy of {part['mind']['name']}")
        imported = world["human"].post(f"/memory/mind-import?mind={copy.id}", part,
                                       format="json")
        assert imported.status_code == 200, imported.json()
        assert imported.json()["memories"] == len(part["memories"]) > 0


def test_the_export_is_for_humans_and_limited_like_export(settings, world, agent):
    from tests.security.test_limits import LOW_RATES, assert_throttled

    refused = agent.get("/auth/export")
    assert refused.status_code == 403
    assert refused.json()["error"]["status"] == 403
    assert key_client(world["dora_plaintext"]).get("/auth/export").status_code == 403
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": LOW_RATES}
    human = world["human"]
    # The world spent one export of the two an hour allows.
    assert human.get("/auth/export").status_code == 200
    assert_throttled(human.get("/auth/export"))
    # The Account page's button spends the same budget.
    limited = world["browser"].get("/ui/account/export")
    assert limited.status_code == 429 and int(limited["Retry-After"]) >= 1


def test_the_export_of_someone_who_owns_nothing_is_their_account_alone(bob, bob_mind, alice):
    document = body(jwt_client(alice).get("/auth/export?include_credentials=true"))
    assert document["minds"] == [] and document["credentials"] == "included"
    assert [m["role"] for m in document["memberships"]] == []
    refused = jwt_client(alice).get("/auth/export?include_credentials=maybe")
    assert refused.status_code == 400


def test_the_account_page_shows_what_deletion_does_and_streams_the_export(world, dora,
                                                                          alice_mind):
    page = world["browser"].get("/ui/account")
    assert page.status_code == 200
    alone = page.context["owned_alone"]
    assert [mind.id for mind in alone] == [world["own"].id]
    assert 'data-testid="deleted-with-account"' in text(page)
    assert "Private notes" in text(page) and escape(alice_mind.name) in text(page)
    document = body(world["browser"].get("/ui/account/export?include_credentials=on"))
    assert document["credentials"] == "included"
    assert {part["mind"]["id"] for part in document["minds"]} == {alice_mind.id,
                                                                  world["own"].id}


# -- Delete my account ---------------------------------------------------------------------

@pytest.mark.parametrize("confirm, password, field", [
    ("Dorothea", PASSWORD, "confirm"), ("", PASSWORD, "confirm"),
    (NAME, "wrong password", "password"), (NAME, "", "password")])
def test_a_deletion_needs_the_username_typed_and_the_password(dora, confirm, password, field):
    own = mind_create(owner=dora, name="Kept")
    refused = delete_me(jwt_client(dora), confirm=confirm, password=password)
    assert refused.status_code == 400
    assert field in refused.json()["error"]["fields"]
    assert Mind.objects.filter(pk=own.pk).exists()
    assert get_user_model().objects.filter(pk=dora.pk).exists()


def test_a_mind_key_or_oauth_token_cannot_delete_an_account(world):
    assert delete_me(key_client(world["dora_plaintext"])).status_code == 403
    assert delete_me(key_client(world["tokens"]["access_token"])).status_code == 403
    assert get_user_model().objects.filter(username=NAME).exists()


def rows_naming(user_id: int) -> list[str]:
    """Every row of every table (through tables included) that points at the user or names
    them: a foreign key to their id, their username or e-mail address in any text, JSON or
    array column, their id as ``user:<id>`` or as a whole text value, or ``user_id`` in
    JSON; sessions and JWTs decoded."""
    found = []
    user_model = get_user_model()
    as_label = re.compile(rf"\buser:{user_id}\b")

    def names(value) -> bool:
        if isinstance(value, dict):
            return value.get("user_id") == user_id or any(map(names, value.values()))
        if isinstance(value, list | tuple):
            return any(map(names, value))
        if isinstance(value, str):
            return (NAME in value.lower() or bool(as_label.search(value))
                    or value == str(user_id))
        return False

    for model in apps.get_models(include_auto_created=True):
        fields = list(model._meta.concrete_fields)
        for row in model._base_manager.all().values(*[field.attname for field in fields]):
            for field in fields:
                value = row[field.attname]
                if isinstance(field, models.ForeignKey) and field.related_model is user_model:
                    if value == user_id:
                        found.append(f"{model._meta.db_table}.{field.attname}")
                elif isinstance(field, models.ForeignKey | models.AutoField
                                | models.BigAutoField | models.IntegerField):
                    continue
                elif names(value):
                    found.append(f"{model._meta.db_table}.{field.attname}={value!r:.80}")
    for session in Session.objects.all():
        if session.get_decoded().get("_auth_user_id") == str(user_id):
            found.append(f"django_session {session.pk}")
    for token in OutstandingToken.objects.all():
        payload = token.token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        if str(claims.get("user_id")) == str(user_id):
            found.append(f"outstanding token {token.jti}")
    return found


def test_a_deleted_account_leaves_no_row_that_names_or_belongs_to_the_person(
        world, dora, alice, alice_mind, alice_key, bob, bob_mind):
    user_id = world["user_id"]
    assert len(rows_naming(user_id)) > 20  # the scan sees her everywhere before
    assert Session.objects.count() and OutstandingToken.objects.filter(user=dora).count()

    assert delete_me(world["human"]).status_code == 204

    assert rows_naming(user_id) == []
    # Invitations to her are gone; the one she sent stays with alice's mind, nameless.
    assert list(Invitation.objects.values_list("mind__name", "email", "invited_by")) == [
        (alice_mind.name, "guest@example.com", None)]
    # Her own mind is gone with every row of it.
    own = world["own"].id
    for model in (Mind, Memory, MindKey, Membership, AuditEvent, OAuthConnection):
        field = "pk" if model is Mind else "mind_id"
        assert not model.objects.filter(**{field: own}).exists(), model
    assert not MemoryVersion.objects.filter(memory__mind_id=own).exists()
    # What she did elsewhere is told under one pseudonym.
    pseudonym = AuditEvent.objects.get(mind=alice_mind, action="member_remove").actor_label
    assert re.fullmatch(r"deleted user \d+", pseudonym)
    hers = AuditEvent.objects.filter(actor_label=pseudonym)
    assert {event.mind_id for event in hers} == {alice_mind.id, bob_mind.id}
    assert set(hers.values_list("action", flat=True)) >= {
        "store", "update", "verify", "key_issue", "key_revoke", "connection_create",
        "connection_revoke", "member_remove"}
    assert set(hers.values_list("actor_type", "actor_id").distinct()) == {("user", "")}
    added = AuditEvent.objects.get(mind=bob_mind, action="member_add")
    assert added.details == {"username": pseudonym, "role": "editor"}
    versions = MemoryVersion.objects.filter(memory_id=world["written"])
    assert [(v.recorded_by_type, v.recorded_by_id, v.recorded_by) for v in versions] == [
        ("user", "", pseudonym)] * 2
    verified = Memory.objects.get(pk=world["verified"])
    assert verified.verified and verified.verified_by is None
    # The shared mind works on for its other owner: her key and connection do not.
    assert list(alice_mind.owners()) == [alice]
    assert key_client(alice_key[1]).get("/memory/recall").status_code == 200
    assert key_client(world["dora_plaintext"]).get("/memory/recall").status_code == 401
    assert key_client(world["tokens"]["access_token"]).get(
        "/memory/recall").status_code == 401
    activity = session_client(alice).get(f"/ui/minds/{alice_mind.id}/activity")
    assert activity.status_code == 200 and pseudonym in text(activity)
    assert NAME not in text(activity).lower()
    # Every sign-in of hers is over.
    assert world["human"].get("/auth/me").status_code == 401
    assert world["browser"].get("/ui/account").status_code == 302


def test_the_next_deleted_account_gets_another_pseudonym(alice, alice_mind, bob):
    first, second = make_user("erin"), make_user("frank")
    pseudonyms = []
    for person in (first, second):
        member_add(mind=alice_mind, user=person, role=Role.EDITOR, actor=alice)
        assert delete_me(jwt_client(person), confirm=person.username).status_code == 204
        pseudonyms.append(AuditEvent.objects.filter(
            mind=alice_mind, action="member_remove").order_by("-id").first().actor_label)
    assert pseudonyms[0] != pseudonyms[1]
    assert all(str(person.pk) not in label for person, label in zip((first, second),
                                                                    pseudonyms, strict=True))


def test_the_account_page_deletes_after_the_typed_confirmation(world, dora, alice_mind):
    browser = world["browser"]
    wrong = browser.post("/ui/account/delete", {"confirm_username": "Dorothea",
                                                 "password": PASSWORD})
    assert wrong.status_code == 400
    assert "not your username" in text(wrong)
    assert get_user_model().objects.filter(pk=dora.pk).exists()
    done = browser.post("/ui/account/delete", {"confirm_username": NAME,
                                                "password": PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/ui/login"
    assert not get_user_model().objects.filter(pk=dora.pk).exists()
    assert not Mind.objects.filter(pk=world["own"].pk).exists()
    assert Mind.objects.filter(pk=alice_mind.pk).exists()
    assert browser.get("/ui/account").status_code == 302


def test_the_admin_s_user_deletion_pseudonymises_too(staff, dora, alice, alice_mind):
    member_add(mind=alice_mind, user=dora, role=Role.EDITOR, actor=alice)
    jwt_client(dora).post(f"/memory?mind={alice_mind.id}", {
        "category": "fact", "key": "k", "content": "v"}, format="json")
    url = f"/admin/auth/user/{quote(dora.pk)}/delete/"
    assert staff.post(url, {"post": "yes"}).status_code == 302
    assert rows_naming(dora.pk) == []
