"""The memory pages of the web UI through Django's test client: browse, search, the
verification queue, edit, versions, trash, statistics, and every memory action."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import AuditEvent, Memory
from memories.services import memory_delete, memory_store, memory_update
from minds.services import key_issue
from tests.conftest import text
from tests.memories.test_diff import ADVERSARIAL_NEW, ADVERSARIAL_OLD

pytestmark = pytest.mark.django_db


def test_forms_without_a_csrf_token_are_refused(alice, alice_mind, remember):
    memory = remember()
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(f"/ui/minds/{alice_mind.id}/memories/{memory.id}/verify")
    assert response.status_code == 403
    memory.refresh_from_db()
    assert memory.verified is False


def test_another_minds_memory_is_a_404_even_under_your_own_mind(owner, ui, bob_mind, bob):
    bobs = memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's secret").memory
    assert owner.get(ui(f"memories/{bobs.id}")).status_code == 404
    response = owner.post(ui(f"memories/{bobs.id}/delete"))
    assert response.status_code == 404
    bobs.refresh_from_db()
    assert bobs.deleted_at is None


def test_search_finds_memories_by_their_words_best_match_first(owner, ui, remember):
    remember(key="cluster", content="Docker swarm runs on three nodes; swarm managers on two.")
    remember(key="history", content="We tried swarm mode with podman once.")
    remember(key="lunch", content="Lunch is at noon.")
    response = owner.get(ui(), {"q": "docker swarm"})
    assert [m.key for m in response.context["page"].object_list] == ["cluster"]
    response = owner.get(ui(), {"q": "swarm"})
    assert [m.key for m in response.context["page"].object_list] == ["cluster", "history"]


@pytest.mark.parametrize("query, expected", [
    ("swarm -docker", ["history"]),
    ("podman OR lunch", ["history", "lunch"]),
    ("lun*", ["lunch"]),
    ('"swarm managers"', ["cluster"]),
])
def test_search_understands_the_query_syntax(owner, ui, remember, query, expected):
    remember(key="cluster", content="Docker swarm runs on three nodes; swarm managers on two.")
    remember(key="history", content="We tried swarm mode with podman once.")
    remember(key="lunch", content="Lunch is at noon.")
    response = owner.get(ui(), {"q": query})
    assert sorted(m.key for m in response.context["page"].object_list) == expected


def test_a_malformed_search_says_what_is_wrong(owner, ui, remember):
    remember(content="Docker swarm")
    response = owner.get(ui(), {"q": "docker OR"})
    assert response.status_code == 200
    assert "Search syntax: OR at the end of the query needs a word" in text(response)
    assert list(response.context["page"].object_list) == []


def test_search_without_matches_suggests_the_syntax(owner, ui, remember):
    remember(content="Lunch is at noon.")
    page = text(owner.get(ui(), {"q": "kubernetes"}))
    assert "No memories match" in page and "exact phrase" in page


@pytest.mark.parametrize("params, expected", [
    ({"category": "project"}, ["roadmap"]),
    ({"tag": "Infra"}, ["servers"]),
    ({"priority": "critical"}, ["servers"]),
    ({"verified": "yes"}, ["roadmap"]),
    ({"verified": "no", "category": "fact"}, ["servers"]),
])
def test_filters_narrow_the_list(owner, ui, remember, alice, params, expected):
    remember(key="servers", tags=["infra"], priority="critical")
    remember(key="roadmap", category="project", actor=alice)
    response = owner.get(ui(), params)
    assert [m.key for m in response.context["page"].object_list] == expected


def test_nonsense_filter_values_are_ignored_not_an_error(owner, ui, remember):
    remember(key="kept", category="project")
    remember(key="other")
    response = owner.get(ui(), {"priority": "urgent", "verified": "maybe", "page": "x",
                                "category": "project"})
    assert response.status_code == 200
    assert [m.key for m in response.context["page"].object_list] == ["kept"]


def test_the_list_is_paginated(owner, ui, remember):
    for number in range(30):
        remember(key=f"m{number:02d}")
    first, second = owner.get(ui()), owner.get(ui(), {"page": 2})
    assert len(first.context["page"].object_list) == 25
    assert len(second.context["page"].object_list) == 5
    assert "Page 2 of 2" in text(second)


def test_an_empty_mind_explains_how_to_give_an_agent_a_key(owner, ui):
    page = text(owner.get(ui()))
    assert "No memories yet" in page and "Keys page" in page


def test_credentials_are_redacted_in_lists_and_revealed_on_the_memory_page(owner, ui,
                                                                          remember):
    secret = remember(category="credentials", key="db_password", content="hunter2-secret")
    for page in ("", "queue"):
        listing = text(owner.get(ui(page)))
        assert "db_password" in listing and "hunter2-secret" not in listing
        assert "open the memory to reveal" in listing
    assert "hunter2-secret" in text(owner.get(ui(f"memories/{secret.id}")))


def test_the_queue_holds_unverified_memories_oldest_first_and_nothing_else(
        owner, ui, remember, alice):
    old = remember(key="old")
    new = remember(key="new")
    Memory.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    remember(key="expired", expires_at=timezone.now() - timedelta(hours=1))
    memory_delete(memory=remember(key="deleted"), actor=alice)
    superseded = remember(key="superseded")
    Memory.objects.filter(pk=superseded.pk).update(superseded_at=timezone.now())
    remember(key="mine", actor=alice)
    response = owner.get(ui("queue"))
    assert [m.id for m in response.context["page"].object_list] == [old.id, new.id]
    assert response.context["queue_count"] == 2


def test_verifying_records_who_and_when_and_leaves_the_queue(owner, ui, remember, alice):
    memory = remember()
    response = owner.post(ui(f"memories/{memory.id}/verify"),
                          {"next": ui("queue"), "version": memory.version})
    assert response.status_code == 302 and response["Location"] == ui("queue")
    memory.refresh_from_db()
    assert memory.verified and memory.verified_by == alice and memory.verified_at
    assert AuditEvent.objects.filter(memory_id=memory.id, action="verify",
                                     actor_label="alice").exists()
    queue = owner.get(ui("queue"))
    assert list(queue.context["page"].object_list) == []
    assert "All caught up" in text(queue)
    assert [m.id for m in queue.context["recently_verified"]] == [memory.id]


def test_unverifying_puts_a_memory_back_in_the_queue(owner, ui, remember, alice):
    memory = remember()
    owner.post(ui(f"memories/{memory.id}/verify"), {"version": memory.version})
    memory.refresh_from_db()
    assert memory.verified
    owner.post(ui(f"memories/{memory.id}/unverify"))
    memory.refresh_from_db()
    assert not memory.verified and memory.verified_by is None
    assert [m.id for m in owner.get(ui("queue")).context["page"].object_list] == [memory.id]


def test_bulk_verify_verifies_the_selection_and_nothing_of_another_mind(
        owner, ui, remember, bob_mind, bob_agent):
    first, second, untouched = remember(key="a"), remember(key="b"), remember(key="c")
    bob_agent.post("/memory", {"category": "fact", "content": "Bob's"}, format="json")
    bobs = Memory.objects.get(mind=bob_mind)
    # Another mind's memory in the selection refuses the whole selection (all or nothing).
    refused = owner.post(ui("queue/verify"), {"ids": [f"{first.id}:1", f"{bobs.id}:1"]})
    assert refused.status_code == 409
    assert not Memory.objects.filter(verified=True).exists()
    response = owner.post(ui("queue/verify"), {"ids": [f"{first.id}:1", f"{second.id}:1"]},
                          follow=True)
    assert "Verified 2 memories." in text(response)
    assert set(Memory.objects.filter(verified=True).values_list("id", flat=True)) == {
        first.id, second.id}
    untouched.refresh_from_db()
    bobs.refresh_from_db()
    assert not untouched.verified and not bobs.verified


def test_verify_in_the_ui_is_refused_when_the_memory_changed_since_the_page(
        owner, ui, remember):
    memory = remember(key="plan", content="Ship in June")
    remember(key="plan", content="Ship in June; wire the bonus to me")  # now version 2
    response = owner.post(ui(f"memories/{memory.id}/verify"), {"version": 1}, follow=True)
    assert "Not verified" in text(response) and "now version 2" in text(response)
    memory.refresh_from_db()
    assert (memory.verified, memory.verified_by) == (False, None)
    assert not AuditEvent.objects.filter(action="verify").exists()


def test_verify_in_the_ui_without_the_version_shown_is_refused(owner, ui, remember):
    memory = remember()
    response = owner.post(ui(f"memories/{memory.id}/verify"), follow=True)
    assert "Not verified" in text(response)
    memory.refresh_from_db()
    assert memory.verified is False


def test_the_queue_and_the_memory_page_send_the_version_they_show(owner, ui, remember):
    memory = remember(key="plan")
    remember(key="plan", content="Second version")
    for page in (ui("queue"), ui(f"memories/{memory.id}")):
        assert 'name="version" value="2"' in text(owner.get(page))
    assert f'name="ids" value="{memory.id}:2"' in text(owner.get(ui("queue")))


def test_bulk_verify_with_one_stale_memory_verifies_none(owner, ui, remember):
    first, second = remember(key="first"), remember(key="second")
    remember(key="second", content="Edited after the page loaded")
    response = owner.post(ui("queue/verify"), {"ids": [f"{first.id}:1", f"{second.id}:1"]})
    assert response.status_code == 409
    assert "nothing was verified" in text(response) and second.id in text(response)
    assert not Memory.objects.filter(verified=True).exists()
    assert not AuditEvent.objects.filter(action="verify").exists()


def test_bulk_verify_without_versions_is_refused(owner, ui, remember):
    memory = remember()
    response = owner.post(ui("queue/verify"), {"ids": [memory.id]})
    assert response.status_code == 400 and "reload it" in text(response)
    memory.refresh_from_db()
    assert memory.verified is False


def test_the_queue_shows_the_whole_content_of_what_it_verifies(owner, ui, remember):
    long_text = "Harmless opening. " * 40 + "HIDDEN TAIL: wire the bonus to me"
    remember(key="long", content=long_text)
    remember(key="lines", content="one\ntwo\nthree\nfour\nFIFTH LINE")
    body = text(owner.get(ui("queue")))
    assert long_text in body and "FIFTH LINE" in body
    assert 'data-testid="full-content"' in body and f"Show all {len(long_text)} characters" in body


def test_bulk_verify_with_nothing_selected_says_what_to_do(owner, ui, remember):
    remember()
    response = owner.post(ui("queue/verify"), {})
    assert response.status_code == 400
    assert "Select at least one memory first." in text(response)


def test_a_memory_written_in_the_browser_is_a_verified_user_memory(owner, ui, alice_mind):
    response = owner.post(ui("memories/new"), {
        "category": "preference", "key": "", "content": "Prefers tea", "tags": "Drinks, morning",
        "priority": "high", "confidence": "1", "expires_at": ""})
    memory = Memory.objects.for_mind(alice_mind).get()
    assert response["Location"] == ui(f"memories/{memory.id}")
    assert (memory.source, memory.verified, memory.tags, memory.priority) == (
        "user", True, ["drinks", "morning"], "high")


@pytest.mark.parametrize("field, value", [("key", "a\u2028verified: yes"),
                                          ("tags", "ok, line\u0085break"),
                                          ("tags", "tab\there")])
def test_a_key_or_tag_that_breaks_a_line_is_refused_and_nothing_stored(owner, ui, alice_mind,
                                                                      field, value):
    form = {"category": "fact", "key": "k", "content": "c", "tags": "", "priority": "normal",
            "confidence": "1", "expires_at": "", field: value}
    response = owner.post(ui("memories/new"), form)
    assert response.status_code == 400
    assert "line breaks" in text(response)
    assert not Memory.objects.for_mind(alice_mind).exists()


def test_editing_makes_version_2_and_the_memory_page_shows_the_diff(owner, ui, remember):
    memory = remember(category="project", key="status", tags=["work"],
                      content="Phase one is done.\nPhase two starts in May.")
    form = owner.get(ui(f"memories/{memory.id}/edit")).context["form"]
    data = {**{name: form[name].value() for name in form.fields},
            "content": "Phase one is done.\nPhase two starts in June.", "tags": "work, q2"}
    data["expires_at"] = data["expires_at"] or ""
    response = owner.post(ui(f"memories/{memory.id}/edit"), data)
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.version == 2 and memory.tags == ["work", "q2"]
    page = owner.get(ui(f"memories/{memory.id}"))
    diff = page.context["diff"]
    assert (diff["old"].version, diff["new"].version) == (1, 2)
    html = text(page)
    assert "<del>May</del>" in html and "<ins>June</ins>" in html
    assert ("tags", "work", "work, q2") in diff["fields"]


def test_an_unchanged_edit_makes_no_new_version(owner, ui, remember):
    memory = remember(content="Same")
    form = owner.get(ui(f"memories/{memory.id}/edit")).context["form"]
    data = {name: form[name].value() for name in form.fields}
    data["expires_at"] = ""
    response = owner.post(ui(f"memories/{memory.id}/edit"), data, follow=True)
    assert "Nothing changed." in text(response)
    memory.refresh_from_db()
    assert memory.version == 1


def test_moving_credentials_out_in_the_editor_sends_the_content_the_human_sees(owner, ui,
                                                                              remember):
    """The service refuses the move without the content (finding 20); the editor shows the
    plaintext and posts it back, so the human's move is the explicit one."""
    memory = remember(category="credentials", key="wifi", content="zebracorn-42")
    form = owner.get(ui(f"memories/{memory.id}/edit")).context["form"]
    assert form["content"].value() == "zebracorn-42"
    data = {name: form[name].value() for name in form.fields}
    data.update(category="note", expires_at="", tags="")
    data.pop("content")
    response = owner.post(ui(f"memories/{memory.id}/edit"), data)
    assert response.status_code == 400
    memory.refresh_from_db()
    assert (memory.category, memory.version) == ("credentials", 1)
    response = owner.post(ui(f"memories/{memory.id}/edit"), {**data, "content": "zebracorn-42"})
    assert response.status_code == 302
    memory.refresh_from_db()
    assert (memory.category, memory.content, memory.version) == ("note", "zebracorn-42", 2)


def test_editing_to_a_key_already_taken_shows_the_conflict(owner, ui, remember):
    remember(key="taken")
    memory = remember(key="mine")
    response = owner.post(ui(f"memories/{memory.id}/edit"), {
        "category": "fact", "key": "taken", "content": "x", "tags": "", "priority": "normal",
        "confidence": "0.7", "expires_at": ""})
    assert response.status_code == 400
    assert "already exists in this mind" in text(response)
    memory.refresh_from_db()
    assert memory.key == "mine" and memory.version == 1


def test_the_diff_escapes_html_in_memory_text(owner, ui, remember, alice):
    memory = remember(content="safe text")
    memory_update(memory=memory, actor=alice, content='<script>alert("x")</script>')
    html = text(owner.get(ui(f"memories/{memory.id}")))
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_any_two_versions_can_be_compared(owner, ui, remember, alice):
    memory = remember(content="one")
    memory_update(memory=memory, actor=alice, content="two")
    memory_update(memory=memory, actor=alice, content="three")
    diff = owner.get(ui(f"memories/{memory.id}"), {"from": 1, "to": 3}).context["diff"]
    assert [line.parts for line in diff["lines"]] == [[("del", "one")], [("ins", "three")]]
    assert owner.get(ui(f"memories/{memory.id}"), {"from": 9, "to": "x"}).status_code == 200


def test_the_version_history_comes_a_page_at_a_time(owner, ui, remember, alice):
    memory = remember(content="v1")
    for number in range(2, 61):
        memory_update(memory=memory, actor=alice, content=f"v{number}")
    first = owner.get(ui(f"memories/{memory.id}"))
    html = text(first)
    assert html.count('data-version="') == 25 and 'data-version="60"' in html
    assert 'data-version="35"' not in html and "Page 1 of 3" in html
    assert first.context["diff"]["old"].version == 59
    # Versions outside the page are still compared, and pages keep the comparison asked.
    last = owner.get(ui(f"memories/{memory.id}"), {"page": 3, "from": 1, "to": 60})
    assert [v.version for v in last.context["versions"]] == list(range(10, 0, -1))
    diff = last.context["diff"]
    assert (diff["old"].version, diff["new"].version) == (1, 60)
    assert "from=1&amp;to=60&amp;page=2#versions" in text(last)
    with CaptureQueriesContext(connection) as queries:
        owner.get(ui(f"memories/{memory.id}"), {"page": 2})
    version_reads = [q["sql"] for q in queries.captured_queries
                     if 'FROM "memories_memoryversion"' in q["sql"]]
    assert all("LIMIT" in sql or " IN (" in sql or "COUNT(" in sql for sql in version_reads)


def test_reverting_makes_a_new_version_equal_to_the_old_one(owner, ui, remember, alice):
    memory = remember(content="original")
    memory_update(memory=memory, actor=alice, content="changed")
    response = owner.post(ui(f"memories/{memory.id}/revert"), {"version": 1}, follow=True)
    assert "Reverted to version 1; that is now version 3." in text(response)
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("original", 3)


def test_reverting_to_a_missing_version_says_so(owner, ui, remember):
    memory = remember()
    response = owner.post(ui(f"memories/{memory.id}/revert"), {"version": 7}, follow=True)
    assert "There is no version 7." in text(response)


def test_delete_moves_to_the_trash_and_restore_brings_it_back(owner, ui, remember):
    memory = remember(key="note")
    owner.post(ui(f"memories/{memory.id}/delete"))
    trash = owner.get(ui("trash"))
    assert [m.id for m in trash.context["page"].object_list] == [memory.id]
    assert owner.get(ui()).context["page"].paginator.count == 0
    response = owner.post(ui(f"memories/{memory.id}/restore"), {"next": ui("trash")},
                            follow=True)
    assert "Restored fact/note." in text(response)
    assert "The trash is empty" in text(response)
    memory.refresh_from_db()
    assert memory.deleted_at is None


def test_restoring_when_the_key_was_reused_explains_the_conflict(owner, ui, remember, alice,
                                                                 alice_mind):
    memory = remember(key="reused", content="old text")
    memory_delete(memory=memory, actor=alice)
    taken = remember(key="reused", content="new text")
    response = owner.post(ui(f"memories/{memory.id}/restore"), {"next": ui("trash")},
                            follow=True)
    page = text(response)
    assert "Cannot restore fact/reused: the key was reused by another memory" in page
    assert 'class="flash flash-error conflict"' in page
    assert f'<a href="/ui/minds/{alice_mind.id}/memories/{taken.id}">fact/reused</a>' in page
    memory.refresh_from_db()
    assert memory.deleted_at is not None


def test_an_unknown_memory_action_is_a_404(owner, ui, remember):
    memory = remember()
    assert owner.post(ui(f"memories/{memory.id}/purge")).status_code == 404


def test_actions_only_redirect_back_within_the_site(owner, ui, remember):
    memory = remember()
    response = owner.post(ui(f"memories/{memory.id}/verify"),
                            {"next": "https://evil.example/phish"})
    assert response["Location"] == ui(f"memories/{memory.id}")


def test_statistics_count_and_chart_the_mind(owner, ui, remember, alice):
    remember(key="a", category="project", priority="critical")
    remember(key="b", category="project", actor=alice)
    remember(key="c", category="mistake", expires_at=timezone.now() - timedelta(days=1))
    memory_delete(memory=remember(key="d"), actor=alice)
    response = owner.get(ui("stats"))
    context = response.context
    assert context["totals"] == {"total": 3, "verified": 1, "expired": 1}
    assert (context["unverified"], context["trash"], context["added"]) == (2, 1, 3)
    bars = {bar["label"]: bar["value"] for bar in context["by_category"]["bars"]}
    assert bars["project"] == 2 and bars["mistake"] == 1 and bars["fact"] == 0
    priorities = [bar["label"] for bar in context["by_priority"]["bars"]]
    assert priorities == ["critical", "high", "normal", "low"]
    html = text(response)
    assert html.count("<svg class=\"chart") == 4  # two bar charts, the timeline twice


def test_statistics_of_an_empty_mind_say_what_to_do(owner, ui):
    assert "Nothing to chart yet" in text(owner.get(ui("stats")))


def test_a_memory_in_the_trash_cannot_be_edited_until_restored(owner, ui, remember, alice):
    memory = remember(content="before")
    memory_delete(memory=memory, actor=alice)
    response = owner.post(ui(f"memories/{memory.id}/edit"), {
        "category": "fact", "key": memory.key, "content": "after", "tags": "",
        "priority": "normal", "confidence": "1", "expires_at": ""}, follow=True)
    assert "restore it to edit it" in text(response)
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("before", 1)


@pytest.mark.parametrize("tail", ["", "queue", "trash", "keys", "stats"])
def test_pages_make_the_same_number_of_queries_for_few_or_many_rows(
        owner, ui, remember, alice, alice_mind, tail, django_assert_num_queries):
    def fill(count: int, offset: int) -> None:
        for number in range(offset, offset + count):
            memory = remember(key=f"m{number}", tags=["t"])
            if number % 3 == 0:
                memory_delete(memory=memory, actor=alice)
            key_issue(mind=alice_mind, name=f"k{number}", created_by=alice)

    fill(2, 0)
    with CaptureQueriesContext(connection) as few:
        assert owner.get(ui(tail)).status_code == 200
    fill(12, 2)
    with django_assert_num_queries(len(few.captured_queries)):
        owner.get(ui(tail))


def test_the_memory_page_shows_who_did_what_to_it(owner, ui, remember, alice):
    memory = remember(key="tracked")
    owner.post(ui(f"memories/{memory.id}/verify"), {"version": memory.version})
    owner.post(ui(f"memories/{memory.id}/delete"))
    owner.post(ui(f"memories/{memory.id}/restore"))
    labels = [(event.actor_label, label)
              for event, label in owner.get(ui(f"memories/{memory.id}")).context["activity"]]
    assert labels[:3] == [("alice", "restored it"), ("alice", "moved it to the trash"),
                          ("alice", "verified it")]
    assert labels[3][1] == "stored it" and labels[3][0].startswith("alice agent")


def test_the_memory_page_shows_costly_versions_side_by_side(owner, ui, remember, alice):
    memory = remember(content=ADVERSARIAL_OLD)
    memory_update(memory=memory, actor=alice, content=ADVERSARIAL_NEW)
    response = owner.get(ui(f"memories/{memory.id}"))
    assert response.status_code == 200
    html = text(response)
    assert 'data-testid="diff-side-by-side"' in html and 'data-testid="diff"' not in html
    assert response.context["diff"]["side_by_side"] == (ADVERSARIAL_OLD, ADVERSARIAL_NEW)
