"""/minds/{id}/keys: issue (shown once), list, revoke; read-only keys on every write route."""

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.views import APIView

from memories.models import AuditEvent, Memory
from minds.keys import hash_key
from minds.models import MindKey
from minds.services import key_issue, key_revoke
from tests.conftest import key_client

pytestmark = pytest.mark.django_db

KEY_FIELDS = {"id", "mind_id", "name", "last4", "scope", "paths", "created_at", "last_used_at",
              "expires_at", "revoked", "revoked_at"}


def issue(client, mind, **body):
    body.setdefault("name", "laptop agent")
    return client.post(f"/minds/{mind.id}/keys", body, format="json")


def test_issue_returns_the_key_once_and_stores_only_its_hash(human, alice_mind):
    response = issue(human, alice_mind, scope="read")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == KEY_FIELDS | {"key"}
    assert re.fullmatch(r"mk_[A-Za-z0-9]{52}", body["key"])
    assert (body["name"], body["scope"], body["last4"], body["revoked"]) == (
        "laptop agent", "read", body["key"][-4:], False)
    stored = MindKey.objects.get(pk=body["id"])
    assert stored.hashed_secret == hash_key(body["key"])
    assert body["key"] not in str(stored.__dict__)
    listed = human.get(f"/minds/{alice_mind.id}/keys").json()
    assert body["key"] not in str(listed)
    assert body["key"] not in str(AuditEvent.objects.filter(action="key_issue").values())


def test_an_issued_key_acts_on_its_mind(human, alice_mind):
    plaintext = issue(human, alice_mind).json()["key"]
    agent = key_client(plaintext)
    stored = agent.post("/memory", {"category": "fact", "content": "It works"}, format="json")
    assert stored.status_code == 201
    assert Memory.objects.get(pk=stored.json()["id"]).mind == alice_mind


def test_issue_with_an_expiry_in_the_future(human, alice_mind):
    expires = (timezone.now() + timedelta(days=30)).replace(microsecond=0)
    body = issue(human, alice_mind, expires_at=expires.isoformat()).json()
    assert MindKey.objects.get(pk=body["id"]).expires_at == expires
    assert body["expires_at"] == expires.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize("body, field", [
    ({"name": ""}, "name"),
    ({"name": "x", "scope": "admin"}, "scope"),
    ({"name": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
    ({"name": "x", "expires_at": "next tuesday"}, "expires_at"),
    ({"name": "x", "lookup": "abc"}, "lookup"),
    ({"name": "x", "mind": "m_other"}, "mind"),
])
def test_issue_with_bad_input_is_400_naming_the_field(human, alice_mind, body, field):
    before = MindKey.objects.count()
    response = human.post(f"/minds/{alice_mind.id}/keys", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert MindKey.objects.count() == before


def test_list_shows_every_key_of_the_mind_newest_first_without_secrets(
        human, alice_mind, alice_key, bob_mind, bob_agent):
    issue(human, alice_mind, name="second")
    keys = human.get(f"/minds/{alice_mind.id}/keys").json()
    assert [key["name"] for key in keys] == ["second", "alice agent"]
    for key in keys:
        assert set(key) == KEY_FIELDS
        assert key["mind_id"] == alice_mind.id


def test_list_shows_when_a_key_was_last_used(human, alice_mind, alice_key, agent):
    listed = human.get(f"/minds/{alice_mind.id}/keys").json()
    assert listed[0]["last_used_at"] is None
    agent.get("/memory")
    listed = human.get(f"/minds/{alice_mind.id}/keys").json()
    assert listed[0]["last_used_at"] is not None


def test_revoke_is_effective_on_the_next_request(human, alice_mind, alice_key, agent, alice):
    key, _plaintext = alice_key
    assert agent.get("/memory").status_code == 200
    response = human.delete(f"/minds/{alice_mind.id}/keys/{key.id}")
    assert response.status_code == 200
    assert response.json()["revoked"] is True
    refused = agent.get("/memory")
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "This Mind Key has been revoked."
    assert "WWW-Authenticate" in refused
    event = AuditEvent.objects.get(action="key_revoke")
    assert (event.actor_type, event.actor_id, event.details["key_id"]) == (
        "user", str(alice.pk), key.id)


def test_revoking_twice_is_fine_and_audited_once(human, alice_mind, alice_key):
    key, _plaintext = alice_key
    first = human.delete(f"/minds/{alice_mind.id}/keys/{key.id}").json()
    second = human.delete(f"/minds/{alice_mind.id}/keys/{key.id}").json()
    assert first["revoked_at"] == second["revoked_at"]
    assert AuditEvent.objects.filter(action="key_revoke").count() == 1


def test_get_one_key(human, alice_mind, alice_key):
    body = human.get(f"/minds/{alice_mind.id}/keys/{alice_key[0].id}").json()
    assert set(body) == KEY_FIELDS
    assert body["id"] == alice_key[0].id


def test_another_users_keys_are_404(human, alice_mind, bob_mind, bob):
    bob_key, bob_plaintext = key_issue(mind=bob_mind, name="bob's", created_by=bob)
    assert human.get(f"/minds/{bob_mind.id}/keys").status_code == 404
    assert issue(human, bob_mind).status_code == 404
    for path in (f"/minds/{bob_mind.id}/keys/{bob_key.id}",
                 # bob's key named under alice's own mind is not found either
                 f"/minds/{alice_mind.id}/keys/{bob_key.id}"):
        assert human.get(path).status_code == 404
        response = human.delete(path)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    bob_key.refresh_from_db()
    assert bob_key.revoked_at is None
    assert key_client(bob_plaintext).get("/memory").status_code == 200
    assert MindKey.objects.filter(mind=bob_mind).count() == 1


def test_a_mind_key_cannot_list_issue_or_revoke_keys(agent, alice_mind, alice_key):
    key, _plaintext = alice_key
    for response in (agent.get(f"/minds/{alice_mind.id}/keys"),
                     issue(agent, alice_mind),
                     agent.get(f"/minds/{alice_mind.id}/keys/{key.id}"),
                     agent.delete(f"/minds/{alice_mind.id}/keys/{key.id}")):
        assert response.status_code == 403
    assert MindKey.objects.filter(mind=alice_mind).count() == 1
    key.refresh_from_db()
    assert key.revoked_at is None


def test_a_read_only_key_reads(reader, remember):
    remember(content="readable")
    assert reader.get("/memory").json()["count"] == 1
    assert reader.get("/memory/recall").status_code == 200


# -- a read-only key on every write route --------------------------------------------------

WRITE_METHODS = ("post", "put", "patch", "delete")
# Token routes take credentials from the body and act on no mind.
NOT_MIND_ROUTES = {"auth/register", "auth/login", "auth/refresh", "auth/logout",
                   "auth/password-reset", "auth/password-reset/confirm"}


def api_write_routes(patterns=None, prefix=""):
    """(route, method) of every DRF route that accepts a write method."""
    routes = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            routes += api_write_routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            # A viewset's route (DRF's as_view) carries its class as ``cls`` and maps methods
            # to actions; a view's route carries ``view_class`` with a handler per method.
            view_class = (getattr(entry.callback, "view_class", None)
                          or getattr(entry.callback, "cls", None))
            actions = getattr(entry.callback, "actions", None)
            route = prefix + str(entry.pattern)
            if (view_class is None or not issubclass(view_class, APIView)
                    or route in NOT_MIND_ROUTES or route.startswith("api/")):
                continue
            routes += [(route, method) for method in WRITE_METHODS
                       if (method in actions if actions is not None
                           else hasattr(view_class, method))]
    return routes


def test_the_write_route_list_covers_the_known_writes():
    routes = set(api_write_routes())
    for known in [("memory", "post"), ("memory/<memory_id:memory_id>", "put"),
                  ("memory/<memory_id:memory_id>", "delete"),
                  ("memory/<memory_id:memory_id>/verify", "post"),
                  ("minds", "post"), ("minds/<str:mind_id>/keys/<str:key_id>", "delete")]:
        assert known in routes


@pytest.mark.parametrize("route, method", api_write_routes())
def test_a_read_only_key_is_refused_on_every_write_route(reader, remember, alice_key, route,
                                                         method):
    memory = remember(content="Stays as it is", tags=["kept"])
    values = {"memory_id": memory.id, "mind_id": alice_key[0].mind_id, "key_id": alice_key[0].id,
              "user_id": str(alice_key[0].created_by_id), "invitation_id": "invid_none"}
    path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda match: values[match.group(1)], route)
    audit_before = AuditEvent.objects.count()
    response = getattr(reader, method)(path, {"category": "fact", "content": "changed",
                                              "ids": [memory.id], "name": "x"}, format="json")
    assert response.status_code == 403, (path, response.content)
    assert response.json()["error"]["code"] == "permission_denied"
    memory.refresh_from_db()
    assert (memory.content, memory.version, memory.deleted_at) == ("Stays as it is", 1, None)
    assert Memory.objects.count() == 1
    assert AuditEvent.objects.count() == audit_before


@pytest.mark.django_db(transaction=True)
def test_concurrent_revokes_record_one_event_and_one_time(alice_key, alice):
    key, _plaintext = alice_key
    barrier = threading.Barrier(4)

    def revoke(_number):
        try:
            barrier.wait()
            return key_revoke(key=MindKey.objects.get(pk=key.pk), actor=alice).revoked_at
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        times = set(pool.map(revoke, range(4)))
    assert len(times) == 1
    assert AuditEvent.objects.filter(action="key_revoke").count() == 1
