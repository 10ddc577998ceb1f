"""Attribution by member (issue 16, part 3): every human change records which member made
it, and the audit API, the versions, the Activity page, the memory page and the
verification queue show it and filter by it (``?member=<user id>``), in as many queries for
many rows as for few."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import AuditEvent, Memory, MemoryVersion
from minds.models import Membership, Role
from minds.services import member_add, member_set_role
from tests.conftest import jwt_client, make_user, session_client, text


@pytest.fixture
def carol(db):
    return make_user("carol")


@pytest.fixture
def team(alice_mind, alice, bob, carol):
    """alice and bob own alice's mind; carol is an editor on it."""
    member_add(mind=alice_mind, user=bob, role=Role.OWNER, actor=alice)
    member_add(mind=alice_mind, user=carol, role=Role.EDITOR, actor=alice)
    return alice_mind


def test_every_human_change_records_the_member_who_made_it(team, alice, bob, carol,
                                                            remember):
    client, mind = jwt_client(bob), f"mind={team.id}"
    first = AuditEvent.objects.order_by("-id").first().id
    stored = client.post(f"/memory?{mind}", {"category": "fact", "key": "office",
                                             "content": "Room 4"}, format="json").json()
    memory_id = stored["id"]
    calls = [
        client.put(f"/memory/{memory_id}?{mind}", {"content": "Room 5"}, format="json"),
        client.post(f"/memory/{memory_id}/revert?{mind}", {"version": 1}, format="json"),
        client.post(f"/memory/{remember(key='lunch').id}/verify?{mind}"),
        client.delete(f"/memory/{memory_id}?{mind}"),
        client.post(f"/memory/{memory_id}/restore?{mind}"),
        client.post(f"/memory/reset?{mind}", {"path": "projects/x", "confirm": "projects/x"},
                    format="json"),
        client.post(f"/minds/{team.id}/keys", {"name": "bob's"}, format="json"),
    ]
    assert [call.status_code for call in calls] == [200, 200, 200, 200, 200, 200, 201]
    key_id = calls[-1].json()["id"]
    assert client.delete(f"/minds/{team.id}/keys/{key_id}").status_code in (200, 204)
    member_set_role(membership=Membership.objects.get(mind=team, user=carol),
                    role=Role.VIEWER, actor=bob)
    events = AuditEvent.objects.filter(pk__gt=first, actor_type="user").order_by("id")
    assert [event.action for event in events] == [
        "store", "update", "revert", "verify", "delete", "restore", "reset", "key_issue",
        "key_revoke", "member_role"]
    assert {(event.actor_id, event.actor_label) for event in events} == {(str(bob.pk), "bob")}
    versions = MemoryVersion.objects.filter(memory_id=memory_id)
    assert {(v.recorded_by_type, v.recorded_by_id, v.recorded_by) for v in versions} == {
        ("user", str(bob.pk), "bob")}
    assert Memory.objects.get(key="lunch").verified_by == bob


@pytest.fixture
def busy(team, alice, bob, remember):
    """Memories written by alice and bob (through the API), one verified by bob."""
    def write(user, key):
        return jwt_client(user).post(f"/memory?mind={team.id}", {
            "category": "fact", "key": key, "content": f"by {user.username}"},
            format="json").json()["id"]

    ids = {"alice": write(alice, "a1"), "bob": write(bob, "b1")}
    jwt_client(alice).put(f"/memory/{ids['bob']}?mind={team.id}", {"content": "edited"},
                          format="json")
    agents = remember(key="from an agent")
    jwt_client(bob).post(f"/memory/{agents.id}/verify?mind={team.id}")
    return {**ids, "agents": agents.id, "write": write}


def test_the_audit_api_filters_by_member(busy, team, alice, bob, carol):
    audit = f"/memory/audit?mind={team.id}"
    mine = jwt_client(alice).get(f"{audit}&member={bob.pk}").json()
    assert mine["count"] == 2
    assert {(e["action"], e["actor"]["id"], e["actor"]["label"]) for e in mine["results"]} == {
        ("store", str(bob.pk), "bob"), ("verify", str(bob.pk), "bob")}
    assert jwt_client(alice).get(f"{audit}&member={carol.pk}").json()["count"] == 0
    everyone = jwt_client(alice).get(audit).json()["count"]
    assert everyone > mine["count"]
    refused = jwt_client(alice).get(f"{audit}&member=bob")
    assert refused.status_code == 400 and "member" in refused.json()["error"]["fields"]


def test_the_versions_api_filters_by_member(busy, team, alice, bob):
    url = f"/memory/{busy['bob']}/versions?mind={team.id}"
    listed = jwt_client(bob).get(url).json()
    assert [v["recorded_by"]["label"] for v in listed["versions"]] == ["bob", "alice"]
    by_alice = jwt_client(bob).get(f"{url}&member={alice.pk}").json()
    assert [(v["version"], v["recorded_by"]["id"]) for v in by_alice["versions"]] == [
        (2, str(alice.pk))]
    assert by_alice["count"] == 1


def test_the_activity_page_offers_the_members_and_filters_by_one(busy, team, alice, bob,
                                                                 carol):
    page = session_client(carol).get(f"/ui/minds/{team.id}/activity?member={bob.pk}")
    assert page.status_code == 200
    assert [m.user.username for m in page.context["members"]] == ["alice", "bob", "carol"]
    assert {event.actor_label for event, _label, _memory in page.context["events"]} == {"bob"}
    assert f'<option value="{bob.pk}" selected>bob (owner)</option>' in text(page)
    everyone = session_client(carol).get(f"/ui/minds/{team.id}/activity?member=nobody")
    labels = {event.actor_label for event, _label, _memory in everyone.context["events"]}
    assert {"alice", "bob"} <= labels
    none = session_client(carol).get(f"/ui/minds/{team.id}/activity?member={carol.pk}")
    assert "No change by this member" in text(none)


def test_the_memory_page_filters_its_versions_and_activity_by_member(busy, team, alice):
    page = session_client(alice).get(
        f"/ui/minds/{team.id}/memories/{busy['bob']}?member={alice.pk}")
    assert [v.recorded_by for v in page.context["versions"]] == ["alice"]
    assert {event.actor_label for event, _label in page.context["activity"]} == {"alice"}


def test_the_queue_names_who_wrote_each_memory_and_who_verified_it(busy, team, alice,
                                                                   remember):
    pending = remember(key="pending")
    page = session_client(alice).get(f"/ui/minds/{team.id}/queue")
    written = {memory.id: memory.written_by for memory in page.context["page"].object_list}
    assert written[pending.id].startswith("alice agent")
    recent = {memory.id: memory.verified_by_label
              for memory in page.context["recently_verified"]}
    assert recent == {busy["agents"]: "bob"}
    assert 'data-testid="verified-by">bob</span>' in text(page)


@pytest.mark.parametrize("tail", ["activity?member={bob}", "queue"])
def test_the_pages_make_as_many_queries_for_many_members_and_events_as_for_few(
        busy, team, alice, bob, remember, tail, django_assert_num_queries):
    client = session_client(alice)
    url = f"/ui/minds/{team.id}/" + tail.format(bob=bob.pk)
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200
    queries = len(few.captured_queries)  # now: every request clears the log
    for number in range(6):
        member_add(mind=team, user=make_user(f"member{number}"), role=Role.EDITOR, actor=bob)
        busy["write"](bob, f"more{number}")
        jwt_client(bob).post(f"/memory/{remember(key=f'agent{number}').id}/verify"
                             f"?mind={team.id}")
    with django_assert_num_queries(queries):
        client.get(url)
