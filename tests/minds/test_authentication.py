"""Mind Key authentication: header and query forms, every refusal a 401, agents never humans."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from minds.authentication import AgentPrincipal, MindKeyAuthentication, is_agent
from minds.models import MindKey
from minds.services import key_issue, key_revoke, mind_create
from tests.conftest import key_client

pytestmark = pytest.mark.django_db


# RFC 6750 and RFC 9728: where an OAuth client learns how to get a token.
CHALLENGE = ('Bearer realm="synapse", '
             'resource_metadata="http://testserver/.well-known/oauth-protected-resource"')


def assert_401(response, message: str) -> None:
    assert response.status_code == 401
    assert response.json() == {"error": {"status": 401, "code": "authentication_failed",
                                         "message": message}}
    assert response["WWW-Authenticate"] == CHALLENGE


def test_bearer_header_authenticates_as_the_keys_mind(agent, alice_mind):
    response = agent.get("/memory/health")
    assert response.status_code == 200
    assert response.json()["mind"]["id"] == alice_mind.id


def test_query_parameter_authenticates_too(alice_key, alice_mind):
    response = APIClient().get(f"/memory/health?key={alice_key[1]}")
    assert response.status_code == 200
    assert response.json()["mind"]["id"] == alice_mind.id


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_a_key_in_the_query_string_is_refused_on_writes(alice_key, remember, method):
    memory = remember(key="kept", content="Unchanged")
    url = {"post": "/memory"}.get(method, f"/memory/{memory.id}")
    body = {"category": "fact", "key": "new", "content": "Changed"}
    response = getattr(APIClient(), method)(f"{url}?key={alice_key[1]}", body, format="json")
    assert_401(response, "A Mind Key in the query string (?key=) is accepted on reads only: "
                         "send it as Authorization: Bearer mk_….")
    # Even beside the right header: the key must not travel in a write's URL at all.
    both = key_client(alice_key[1])
    assert getattr(both, method)(f"{url}?key={alice_key[1]}", body,
                                 format="json").status_code == 401
    memory.refresh_from_db()
    assert (memory.content, memory.deleted_at) == ("Unchanged", None)
    assert list(alice_key[0].mind.memories.values_list("key", flat=True)) == ["kept"]


def test_a_key_in_the_query_string_still_reads(alice_key, remember):
    memory = remember(content="Readable with ?key=")
    response = APIClient().get(f"/memory/{memory.id}?key={alice_key[1]}")
    assert response.status_code == 200
    assert (response.json()["id"], response.json()["content"]) == (memory.id,
                                                                   "Readable with ?key=")
    assert APIClient().head(f"/memory?key={alice_key[1]}").status_code == 200


def test_keys_stop_when_their_creator_is_deactivated(alice, alice_mind, db):
    """A staff member's keys for someone's mind end with the staff account, like its JWTs."""
    staff = get_user_model().objects.create_user("clerk", password="pw-12345678",
                                                 is_staff=True)
    _key, plaintext = key_issue(mind=alice_mind, name="by clerk", created_by=staff)
    client = key_client(plaintext)
    assert client.get("/memory").status_code == 200
    staff.is_active = False
    staff.save()
    assert_401(client.get("/memory"), "This Mind Key belongs to a deactivated account.")
    assert_401(APIClient().get(f"/memory?key={plaintext}"),
               "This Mind Key belongs to a deactivated account.")
    staff.is_active = True
    staff.save()
    assert client.get("/memory").status_code == 200


def test_keys_stop_when_the_minds_owner_is_deactivated(alice, agent):
    assert agent.get("/memory").status_code == 200
    alice.is_active = False
    alice.save()
    assert_401(agent.get("/memory"), "This Mind Key belongs to a deactivated account.")


def test_the_bearer_scheme_is_case_insensitive(alice_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"bearer {alice_key[1]}")
    assert client.get("/memory").status_code == 200
    assert client.get("/memory/health").json()["mind"]["id"] == alice_key[0].mind_id


@pytest.mark.parametrize("presented", ["mk_short", "mk_" + "!" * 52, "mk_" + "a" * 53])
def test_a_malformed_key_is_401(presented):
    assert_401(key_client(presented).get("/memory"), "Malformed Mind Key.")
    assert_401(APIClient().get(f"/memory?key={presented}"), "Malformed Mind Key.")


def test_a_key_that_is_not_a_mind_key_in_the_query_is_401():
    assert_401(APIClient().get("/memory?key=hello"), "Malformed Mind Key.")


def test_an_unknown_key_is_401(alice_key):
    _key, plaintext = alice_key
    # Right lookup prefix, wrong secret; and an entirely unknown key.
    tampered = plaintext[:-1] + ("a" if plaintext[-1] != "a" else "b")
    assert_401(key_client(tampered).get("/memory"), "Unknown Mind Key.")
    assert_401(key_client("mk_" + "A" * 52).get("/memory"), "Unknown Mind Key.")


def test_a_revoked_key_is_401_on_the_next_request(alice_key, agent):
    key, _plaintext = alice_key
    assert agent.get("/memory").status_code == 200
    key_revoke(key=key)
    assert_401(agent.get("/memory"), "This Mind Key has been revoked.")


def test_an_expired_key_is_401(alice_mind, alice):
    key, plaintext = key_issue(mind=alice_mind, name="short-lived", created_by=alice,
                               expires_at=timezone.now() + timedelta(hours=1))
    client = key_client(plaintext)
    assert client.get("/memory").status_code == 200
    MindKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_401(client.get("/memory"), "This Mind Key has expired.")


def test_no_credentials_is_401_with_www_authenticate():
    response = APIClient().get("/memory")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == CHALLENGE


def test_using_a_key_records_when_it_was_last_used(alice_key, agent):
    key, _plaintext = alice_key
    assert key.last_used_at is None
    before = timezone.now()
    agent.get("/memory")
    key.refresh_from_db()
    assert key.last_used_at >= before


def test_last_used_is_written_at_most_once_a_minute(alice_key, agent):
    key, _plaintext = alice_key
    agent.get("/memory")
    key.refresh_from_db()
    first = key.last_used_at
    agent.get("/memory")
    key.refresh_from_db()
    assert key.last_used_at == first
    MindKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=5))
    agent.get("/memory")
    key.refresh_from_db()
    assert key.last_used_at > first


def test_the_principal_of_a_key_is_an_agent_and_never_a_user(alice_key):
    request = APIRequestFactory().get("/memory", HTTP_AUTHORIZATION=f"Bearer {alice_key[1]}")
    principal, auth = MindKeyAuthentication().authenticate(Request(request))
    assert isinstance(principal, AgentPrincipal) and is_agent(principal)
    assert not isinstance(principal, get_user_model())
    assert (principal.is_staff, principal.is_superuser) == (False, False)
    assert auth == alice_key[0]
    assert principal.mind == alice_key[0].mind


def test_a_jwt_shaped_bearer_token_is_left_to_jwt_authentication(human):
    # Not an mk_ token: MindKeyAuthentication steps aside and the JWT is honoured.
    response = human.get("/auth/me")
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


def test_a_key_cannot_reach_the_admin(alice_key):
    _key, plaintext = alice_key
    for response in (Client().get("/admin/", HTTP_AUTHORIZATION=f"Bearer {plaintext}"),
                     Client().get(f"/admin/?key={plaintext}")):
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_a_key_of_a_staff_users_mind_still_cannot_act_as_that_user(db):
    staff = get_user_model().objects.create_superuser("root", "root@example.com", "pw-12345678")
    mind = mind_create(owner=staff, name="Staff mind")
    _key, plaintext = key_issue(mind=mind, name="staff agent", created_by=staff)
    client = key_client(plaintext)
    assert client.get("/auth/me").status_code == 403
    assert client.get("/minds").status_code == 403
    assert Client().get("/admin/", HTTP_AUTHORIZATION=f"Bearer {plaintext}"
                        ).status_code == 302


@pytest.mark.parametrize("method, path", [
    ("get", "/auth/me"), ("get", "/minds"), ("post", "/minds"),
    ("get", "/minds/{mind}"), ("patch", "/minds/{mind}"), ("delete", "/minds/{mind}"),
    ("get", "/minds/{mind}/keys"), ("post", "/minds/{mind}/keys"),
    ("delete", "/minds/{mind}/keys/{key}"),
    ("post", "/memory/{memory}/verify"), ("post", "/memory/{memory}/unverify"),
])
def test_a_write_key_is_refused_on_every_human_only_route(agent, alice_key, remember, method,
                                                          path):
    memory = remember()
    url = path.format(mind=alice_key[0].mind_id, key=alice_key[0].id, memory=memory.id)
    response = getattr(agent, method)(url, {"name": "x"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
