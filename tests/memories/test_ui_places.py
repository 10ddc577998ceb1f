"""Types, paths and episodes in the web UI and the admin, through Django's test client: the
browser's breadcrumb, child paths and filters, badges, the memory form, the timeline page
and an episode's neighbours, the queue's filters and bulk unverify and trash."""

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape

from memories.models import AuditEvent, Memory
from memories.naming import derive_key
from memories.services import memory_set_verified, memory_store
from memories.views import NOT_EPISODIC
from tests.conftest import make_user, messages_of, session_client, text

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def turns(episode):
    """Written out of order; t3 and t4 share a moment (t3 written first)."""
    return {key: episode(key, at) for key, at in [
        ("t2", T0 + timedelta(minutes=2)), ("t1", T0 + timedelta(minutes=1)),
        ("t3", T0 + timedelta(minutes=3)), ("t4", T0 + timedelta(minutes=3)),
        ("t5", T0 + timedelta(minutes=5))]}


@pytest.fixture
def places(remember):
    """Memories at the root, at projects/a, two below it, one at projects/b, one at notes."""
    for key, path in [("root", ""), ("a", "projects/a"), ("ax1", "projects/a/x"),
                      ("ax2", "projects/a/x"), ("b", "projects/b"), ("n", "notes")]:
        remember(key=key, path=path, content=f"memory {key}")


def keys(response) -> list[str]:
    return sorted(memory.key for memory in response.context["page"].object_list)


def children(response) -> list[tuple[str, int]]:
    return [(child["name"], child["count"]) for child in response.context["children"]]


# -- the browser --------------------------------------------------------------------------

def test_the_browser_shows_child_paths_with_counts_and_a_breadcrumb(owner, ui, places):
    top = owner.get(ui())
    assert children(top) == [("notes", 1), ("projects", 4)]
    assert [crumb["label"] for crumb in top.context["crumbs"]] == ["All paths"]
    assert keys(top) == ["a", "ax1", "ax2", "b", "n", "root"]

    projects = owner.get(ui(), {"path": "projects"})
    assert keys(projects) == ["a", "ax1", "ax2", "b"]
    assert children(projects) == [("a", 3), ("b", 1)]

    deep = owner.get(ui(), {"path": "projects/a"})
    assert keys(deep) == ["a", "ax1", "ax2"]
    assert children(deep) == [("x", 2)]
    assert [crumb["label"] for crumb in deep.context["crumbs"]] == ["All paths", "projects",
                                                                     "a"]
    html = text(deep)
    # Each ancestor is a link to that path, the root a link to every path; the current
    # segment is not a link; each child links one level down.
    assert '<a href="?">All paths</a>' in html
    assert '<a href="?path=projects">projects</a>' in html
    assert '<strong aria-current="page">a</strong>' in html
    assert 'href="?path=projects%2Fa%2Fx" data-path="x"' in html
    assert owner.get(ui(), {"path": "projects/a/x"}).context["children"] == []


def test_child_paths_and_breadcrumb_links_keep_the_other_filters(owner, ui, remember):
    remember(key="fact", path="work/one")
    remember(key="event", path="work/two", memory_type="episodic", category="context")
    response = owner.get(ui(), {"path": "work", "memory_type": "episodic", "page": "1"})
    assert keys(response) == ["event"]
    assert children(response) == [("two", 1)]
    assert parse_qs(response.context["children"][0]["query"]) == {
        "memory_type": ["episodic"], "path": ["work/two"]}
    assert response.context["crumbs"][0]["query"] == "memory_type=episodic"


def test_the_path_filter_takes_any_spelling_of_a_path_and_escapes_like_wildcards(
        owner, ui, remember):
    remember(key="underscored", path="a_b/c")
    remember(key="lookalike", path="axb/c")
    assert keys(owner.get(ui(), {"path": " /A_B/ "})) == ["underscored"]
    assert owner.get(ui(), {"path": "/A_B/"}).context["path"] == "a_b"


def test_child_path_counts_follow_the_search(owner, ui, remember):
    remember(key="match", path="work/one", content="Docker swarm notes")
    remember(key="other", path="work/two", content="Lunch at noon")
    response = owner.get(ui(), {"q": "docker", "path": "work"})
    assert keys(response) == ["match"] and children(response) == [("one", 1)]
    assert children(owner.get(ui(), {"q": "docker OR"})) == []  # a syntax error: nothing


@pytest.mark.parametrize("bad, reason", [
    ("../etc", "no '.' or '..' segments"),
    ("a//b", "no empty segments"),
    ("a b", "Path segments use a-z"),
    ("/".join("abcdefghi"), "at most 8 segments"),
])
def test_an_invalid_path_is_an_error_message_not_a_500(owner, ui, places, bad, reason):
    response = owner.get(ui(), {"path": bad, "category": "fact"})
    assert response.status_code == 200
    html = text(response)
    assert 'data-testid="path-error"' in html and escape(reason) in html
    # The bad path is dropped (with its message); the other filters still apply.
    assert keys(response) == ["a", "ax1", "ax2", "b", "n", "root"]
    assert response.context["path"] == ""


def test_the_type_filter_narrows_the_list(owner, ui, remember, episode):
    remember(key="fact")
    remember(key="howto", memory_type="procedural")
    episode("talk", T0)
    assert keys(owner.get(ui(), {"memory_type": "episodic"})) == ["talk"]
    assert keys(owner.get(ui(), {"memory_type": "procedural"})) == ["howto"]
    assert keys(owner.get(ui(), {"memory_type": "dream"})) == ["fact", "howto", "talk"]
    assert '<option value="episodic" selected>' in text(
        owner.get(ui(), {"memory_type": "episodic"}))


def test_cards_show_the_type_the_path_and_when_an_episode_happened(owner, ui, remember,
                                                                  episode):
    fact = remember(key="plain_fact")
    talk = episode("talk", T0 + timedelta(seconds=7), path="talks/one")
    html = text(owner.get(ui()))
    card = html[html.index(f'data-memory-id="{talk.id}"'):]
    card = card[:card.index("</article>")]
    assert ('<span class="badge badge-info type-episodic" data-testid="type" '
            'title="memory type">episodic') in card
    assert f'<a href="/ui/minds/{talk.mind_id}/?path=talks/one" data-testid="path"' in card
    assert "May 1, 2026 12:00:07 UTC" in card
    card = html[html.index(f'data-memory-id="{fact.id}"'):]
    card = card[:card.index("</article>")]
    assert 'data-testid="type" title="memory type">semantic' in card
    assert 'data-testid="place"' not in card  # at the root and no episode: nothing to say


def test_pages_with_paths_make_the_same_number_of_queries_for_few_or_many(
        owner, ui, remember, episode, alice, django_assert_num_queries):
    def fill(count: int, offset: int) -> None:
        for number in range(offset, offset + count):
            remember(key=f"m{number}", path=f"p/c{number % 7}/d{number}")
            episode(f"e{number}", T0 + timedelta(minutes=number), path="p")
            if number % 2:
                memory_set_verified(memory=remember(key=f"v{number}", path="p/v"),
                                    user=alice, verified=True)

    fill(2, 0)
    first = Memory.objects.get(key="e0")
    pages = [(ui(), {"path": "p"}), (ui(), {"path": "p", "memory_type": "episodic"}),
             (ui("timeline"), {"path": "p"}), (ui("timeline"), {"path": "p", "at": first.id}),
             (ui(f"memories/{first.id}"), {}), (ui("queue"), {"path": "p"})]
    few = []
    for url, params in pages:
        with CaptureQueriesContext(connection) as queries:
            assert owner.get(url, params).status_code == 200
        few.append(len(queries))
    fill(20, 2)
    for (url, params), count in zip(pages, few, strict=True):
        with django_assert_num_queries(count):
            owner.get(url, params)


# -- the memory page ----------------------------------------------------------------------

def test_an_episodes_page_shows_its_place_and_its_neighbours(owner, ui, turns, alice_mind):
    response = owner.get(ui(f"memories/{turns['t3'].id}"))
    around = response.context["around"]
    assert [m.key for m in around["earlier"]] == ["t1", "t2"]
    assert [m.key for m in around["later"]] == ["t4", "t5"]
    html = text(response)
    assert 'data-testid="memory-type">episodic' in html
    assert f'<a href="/ui/minds/{alice_mind.id}/?path=talks/one">talks/one</a>' in html
    assert "May 1, 2026 12:03:00 UTC" in html
    for key in ("t1", "t2", "t4", "t5"):
        assert f'<a href="/ui/minds/{alice_mind.id}/memories/{turns[key].id}">{key}</a>' \
               in html
    assert (f'href="/ui/minds/{alice_mind.id}/timeline?path=talks/one&amp;'
            f'at={turns["t3"].id}#current"') in html
    # The tie: t4 was written after t3, so t3 is just before it.
    around = owner.get(ui(f"memories/{turns['t4'].id}")).context["around"]
    assert [m.key for m in around["earlier"]] == ["t1", "t2", "t3"]
    assert [m.key for m in around["later"]] == ["t5"]


def test_a_memory_that_is_no_episode_has_no_timeline_section(owner, ui, remember):
    fact = remember(key="fact", path="work")
    response = owner.get(ui(f"memories/{fact.id}"))
    assert response.context["around"] is None
    assert 'data-testid="neighbours"' not in text(response)
    assert 'data-testid="memory-type">semantic' in text(response)


def test_a_trashed_episode_links_to_its_timeline_not_to_a_place_on_it(owner, ui, turns,
                                                                      alice):
    from memories.services import memory_delete

    memory_delete(memory=turns["t3"], actor=alice)
    html = text(owner.get(ui(f"memories/{turns['t3'].id}")))
    assert "no longer on it" in html and "at=" not in html


# -- the memory form ----------------------------------------------------------------------

FORM = {"category": "context", "key": "", "content": "We chose PostgreSQL", "tags": "",
        "priority": "normal", "confidence": "1", "expires_at": "", "memory_type": "",
        "path": "", "occurred_at": ""}


def test_a_memory_is_written_with_a_type_a_path_and_a_moment(owner, ui, alice_mind):
    response = owner.post(ui("memories/new"), {
        **FORM, "memory_type": "episodic", "path": " /Projects/Memory-OS/ ",
        "occurred_at": "2026-05-01T12:00:30"})
    memory = Memory.objects.for_mind(alice_mind).get()
    assert response.status_code == 302 and response["Location"] == ui(f"memories/{memory.id}")
    assert (memory.memory_type, memory.path, memory.occurred_at) == (
        "episodic", "projects/memory-os", T0 + timedelta(seconds=30))
    # The key derived from the content includes the path.
    assert memory.key == derive_key("We chose PostgreSQL", "context", "projects/memory-os")
    assert memory.key != derive_key("We chose PostgreSQL", "context")


def test_an_episode_written_without_a_moment_happened_now(owner, ui, alice_mind):
    before = timezone.now()
    owner.post(ui("memories/new"), {**FORM, "memory_type": "episodic"})
    memory = Memory.objects.for_mind(alice_mind).get()
    assert memory.occurred_at >= before and memory.path == ""


def test_without_a_type_a_memory_gets_its_categorys(owner, ui, alice_mind):
    owner.post(ui("memories/new"), {**FORM, "category": "identity", "content": "Alice"})
    assert Memory.objects.for_mind(alice_mind).get().memory_type == "identity"


@pytest.mark.parametrize("fields, field, message", [
    ({"path": "a/../b"}, "path", "no '.' or '..' segments"),
    ({"path": "Über/alles"}, "path", "Path segments use a-z"),
    ({"occurred_at": "2026-05-01T12:00"}, "occurred_at", NOT_EPISODIC),
    ({"memory_type": "semantic", "occurred_at": "2026-05-01T12:00"}, "occurred_at",
     NOT_EPISODIC),
    ({"memory_type": "dream"}, "memory_type", "Select a valid choice"),
    ({"memory_type": "episodic", "occurred_at": "yesterday"}, "occurred_at",
     "Enter a valid date/time"),
])
def test_a_refused_type_path_or_moment_is_a_form_error_and_nothing_is_stored(
        owner, ui, alice_mind, fields, field, message):
    response = owner.post(ui("memories/new"), {**FORM, **fields})
    assert response.status_code == 400
    assert any(message in error for error in response.context["form"].errors[field])
    assert escape(message) in text(response)
    assert not Memory.objects.for_mind(alice_mind).exists()


def test_new_memory_from_a_path_starts_there(owner, ui):
    form = owner.get(ui("memories/new"), {"path": "Talks/One",
                                          "memory_type": "episodic"}).context["form"]
    assert (form["path"].value(), form["memory_type"].value()) == ("talks/one", "episodic")
    assert owner.get(ui("memories/new"), {"path": "../x"}).status_code == 200
    html = text(owner.get(ui(), {"path": "talks", "memory_type": "episodic"}))
    assert 'memories/new?path=talks&amp;memory_type=episodic"' in html


def edit_data(owner, url, **changes) -> dict:
    form = owner.get(url).context["form"]
    data = {name: form[name].value() for name in form.fields}
    data["expires_at"] = data["expires_at"] or ""
    return {**data, **changes}


def test_editing_moves_a_memory_and_leaves_an_episodes_moment_as_it_was(owner, ui,
                                                                        episode):
    exact = T0 + timedelta(seconds=5, microseconds=123456)
    talk = episode("talk", exact)
    url = ui(f"memories/{talk.id}/edit")
    assert 'value="2026-05-01T12:00:05"' in text(owner.get(url))
    data = edit_data(owner, url, path="talks/two", content="turn talk, moved",
                     occurred_at="2026-05-01T12:00:05")
    assert owner.post(url, data).status_code == 302
    talk.refresh_from_db()
    # Shown to the second and sent back unchanged, the moment keeps its microseconds.
    assert (talk.path, talk.occurred_at, talk.version) == ("talks/two", exact, 2)

    assert owner.post(url, edit_data(owner, url, occurred_at="2026-05-01T13:00:00")
                      ).status_code == 302
    talk.refresh_from_db()
    assert talk.occurred_at == T0 + timedelta(hours=1)


def test_an_episode_edited_into_another_type_loses_its_moment(owner, ui, episode):
    talk = episode("talk", T0)
    url = ui(f"memories/{talk.id}/edit")
    assert owner.post(url, edit_data(owner, url, memory_type="semantic")).status_code == 302
    talk.refresh_from_db()
    assert (talk.memory_type, talk.occurred_at) == ("semantic", None)


def test_editing_refuses_a_moment_for_a_memory_that_is_no_episode(owner, ui, remember):
    fact = remember(key="fact")
    url = ui(f"memories/{fact.id}/edit")
    response = owner.post(url, edit_data(owner, url, occurred_at="2026-05-01T12:00"))
    assert response.status_code == 400
    assert response.context["form"].errors["occurred_at"] == [NOT_EPISODIC]
    response = owner.post(url, edit_data(owner, url, path="a//b"))
    assert response.status_code == 400 and "no empty segments" in text(response)
    fact.refresh_from_db()
    assert (fact.version, fact.occurred_at, fact.path) == (1, None, "")


# -- the timeline -------------------------------------------------------------------------

def timeline_keys(response) -> list[str]:
    return [memory.key for memory in response.context["episodes"]]


def test_the_timeline_lists_a_paths_episodes_in_the_order_they_happened(
        owner, ui, turns, episode, remember):
    episode("elsewhere", T0, path="talks/two")
    episode("below", T0, path="talks/one/sub")
    remember(key="fact", path="talks/one")
    response = owner.get(ui("timeline"), {"path": "talks/one"})
    assert response.status_code == 200
    # By moment; t3 and t4 happened together and t3 was written first.
    assert timeline_keys(response) == ["t1", "t2", "t3", "t4", "t5"]
    html = text(response)
    assert html.index(f'data-memory-id="{turns["t3"].id}"') < html.index(
        f'data-memory-id="{turns["t4"].id}"')
    # Sub-paths have timelines of their own, listed with how many episodes.
    assert children(response) == [("sub", 1)]
    assert [c["label"] for c in response.context["crumbs"]] == ["Root", "talks", "one"]
    assert '<a href="?path=talks">talks</a>' in html
    assert timeline_keys(owner.get(ui("timeline"), {"path": "TALKS/one/"})) == [
        "t1", "t2", "t3", "t4", "t5"]


def test_the_timeline_pages_before_and_after_an_episode(owner, ui, episode, settings,
                                                        monkeypatch):
    monkeypatch.setattr("memories.views.TIMELINE_PAGE_SIZE", 2)
    monkeypatch.setattr("memories.views.TIMELINE_CONTEXT", 1)
    made = [episode(f"e{n}", T0 + timedelta(minutes=n // 2)) for n in range(7)]
    first = owner.get(ui("timeline"), {"path": "talks/one"})
    assert timeline_keys(first) == ["e0", "e1"]
    assert first.context["earlier_query"] == ""
    assert first.context["later_query"] == f"path=talks%2Fone&after={made[1].id}"
    later = owner.get(ui("timeline") + "?" + first.context["later_query"])
    assert timeline_keys(later) == ["e2", "e3"]
    back = owner.get(ui("timeline") + "?" + later.context["earlier_query"])
    assert timeline_keys(back) == ["e0", "e1"]
    end = owner.get(ui("timeline"), {"path": "talks/one", "end": "1"})
    assert timeline_keys(end) == ["e5", "e6"] and end.context["later_query"] == ""
    assert end.context["earlier_query"] == f"path=talks%2Fone&before={made[5].id}"


def test_the_timeline_opens_at_an_episode(owner, ui, turns):
    response = owner.get(ui("timeline"), {"path": "talks/one", "at": turns["t4"].id})
    assert timeline_keys(response) == ["t1", "t2", "t3", "t4", "t5"]
    assert response.context["current_id"] == turns["t4"].id
    assert f'data-memory-id="{turns["t4"].id}" id="current" aria-current="true"' in text(
        response)


def test_the_timeline_refuses_what_is_not_on_it(owner, ui, turns, episode, remember, bob,
                                                bob_mind):
    elsewhere = episode("elsewhere", T0, path="talks/two")
    fact = remember(key="fact", path="talks/one")
    bobs = memory_store(mind=bob_mind, actor=bob, category="context", content="bob's",
                        memory_type="episodic", path="talks/one", occurred_at=T0).memory
    for anchor in (elsewhere.id, fact.id, bobs.id, "mem_nope"):
        for side in ("at", "after", "before"):
            response = owner.get(ui("timeline"), {"path": "talks/one", side: anchor})
            assert response.status_code == 404, (anchor, side)
    response = owner.get(ui("timeline"), {"path": "talks/../x"})
    assert response.status_code == 400
    assert escape("no '.' or '..' segments") in text(response)
    # Bob's episode on his own timeline of the same path is not on alice's.
    assert bobs.id not in text(owner.get(ui("timeline"), {"path": "talks/one"}))


def test_an_empty_timeline_says_what_an_episode_is(owner, ui):
    html = text(owner.get(ui("timeline"), {"path": "nothing/here"}))
    assert "No episodes here" in html and "memory_type=episodic&amp;path=nothing/here" in html


# -- the queue ----------------------------------------------------------------------------

def queue_keys(response) -> list[str]:
    return [memory.key for memory in response.context["page"].object_list]


def test_the_queue_filters_by_type_and_path(owner, ui, remember, episode):
    remember(key="fact_a", path="work/a")
    remember(key="fact_b", path="work/b")
    episode("talk", T0, path="work/a")
    remember(key="home", path="home")
    assert queue_keys(owner.get(ui("queue"), {"path": "work"})) == ["fact_a", "fact_b", "talk"]
    assert queue_keys(owner.get(ui("queue"), {"path": "work/a",
                                              "memory_type": "episodic"})) == ["talk"]
    response = owner.get(ui("queue"), {"memory_type": "procedural"})
    assert queue_keys(response) == [] and "Nothing to verify here" in text(response)
    bad = owner.get(ui("queue"), {"path": "a b"})
    assert bad.status_code == 200 and "Path segments use a-z" in text(bad)
    assert len(queue_keys(bad)) == 4
    # The bulk forms post the filters along, so a refused selection comes back filtered.
    html = text(owner.get(ui("queue"), {"path": "work"}))
    assert 'action="/ui/minds/' in html and "/queue/verify?path=work" in html
    assert "/queue/trash?path=work" in html


def test_bulk_trash_asks_first_then_trashes_the_selection_only(owner, ui, remember):
    first, second, kept = remember(key="first"), remember(key="second"), remember(key="kept")
    selection = [f"{first.id}:1", f"{second.id}:1"]
    asked = owner.post(ui("queue/trash"), {"ids": selection, "next": ui("queue") + "?path="})
    assert asked.status_code == 200
    html = text(asked)
    assert "Move 2 memories to the trash?" in html
    assert "Something worth remembering" in html  # what is about to go, whole
    assert f'name="ids" value="{first.id}:1"' in html and 'name="confirmed" value="yes"' in html
    assert not Memory.objects.in_trash().exists()  # nothing moved yet

    done = owner.post(ui("queue/trash"), {"ids": selection, "confirmed": "yes",
                                          "next": ui("queue")}, follow=True)
    assert "Moved 2 memories to the trash." in messages_of(done)
    assert set(Memory.objects.in_trash().values_list("key", flat=True)) == {"first", "second"}
    kept.refresh_from_db()
    assert kept.deleted_at is None
    assert AuditEvent.objects.filter(action="delete", actor_label="alice").count() == 2


def test_bulk_trash_never_touches_another_mind_and_refuses_a_stale_selection(
        owner, ui, remember, bob, bob_mind):
    mine = remember(key="mine")
    bobs = memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's").memory
    response = owner.post(ui("queue/trash"), {"ids": [f"{mine.id}:1", f"{bobs.id}:1"]})
    html = text(response)
    assert "Bob&#x27;s" not in html and "Bob's" not in html  # never shown either
    assert "1 of the selected memory is already gone" in html
    response = owner.post(ui("queue/trash"), {"ids": [f"{mine.id}:1", f"{bobs.id}:1"],
                                              "confirmed": "yes"})
    assert response.status_code == 409 and "nothing was moved to the trash" in text(response)
    remember(key="mine", content="Edited after the page")  # now version 2
    response = owner.post(ui("queue/trash"), {"ids": [f"{mine.id}:1"], "confirmed": "yes"})
    assert response.status_code == 409 and "you saw version 1" in text(response)
    assert not Memory.objects.in_trash().exists()
    assert owner.post(ui("queue/trash"), {"confirmed": "yes"}).status_code == 400


def test_bulk_unverify_puts_recently_verified_memories_back_in_the_queue(
        owner, ui, remember, alice, bob, bob_mind):
    first, second, other = remember(key="first"), remember(key="second"), remember(key="other")
    for memory in (first, second, other):
        memory_set_verified(memory=memory, user=alice, verified=True)
    queue = text(owner.get(ui("queue")))
    assert f'name="recent-ids" value="{first.id}:1" form="bulk-recent"' in queue
    assert "/queue/unverify" in queue and "Select all recently verified" in queue
    bobs = memory_store(mind=bob_mind, actor=bob, category="fact", content="Bob's").memory
    refused = owner.post(ui("queue/unverify"), {"recent-ids": [f"{first.id}:1",
                                                               f"{bobs.id}:1"]})
    assert refused.status_code == 409
    assert Memory.objects.filter(verified=True).count() == 4  # bob's too, untouched
    done = owner.post(ui("queue/unverify"), {"recent-ids": [f"{first.id}:1", f"{second.id}:1"],
                                             "next": ui("queue")}, follow=True)
    assert "Unverified 2 memories; they are back in the queue." in messages_of(done)
    assert queue_keys(done) == ["first", "second"]
    other.refresh_from_db()
    bobs.refresh_from_db()
    assert other.verified and bobs.verified
    # The main list's checkboxes (ids) are not an unverify selection.
    assert owner.post(ui("queue/unverify"), {"ids": [f"{other.id}:1"]}).status_code == 400


def test_bulk_forms_need_the_csrf_token(alice, alice_mind, remember):
    from django.test import Client

    memory = remember()
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    for action in ("trash", "unverify"):
        response = client.post(f"/ui/minds/{alice_mind.id}/queue/{action}",
                               {"ids": [f"{memory.id}:1"], "recent-ids": [f"{memory.id}:1"],
                                "confirmed": "yes"})
        assert response.status_code == 403
    memory.refresh_from_db()
    assert memory.deleted_at is None


# -- the admin ----------------------------------------------------------------------------

def test_the_admin_lists_filters_and_searches_by_type_and_path(staff, remember, episode):
    remember(key="tea", content="Prefers green tea", path="home/kitchen")
    episode("talk", T0, path="talks/one")
    remember(key="top", content="At the root")
    listing = staff.get("/admin/memories/memory/")
    html = text(listing)
    assert "?under=home" in html and "?under=talks" in html and "?under=%2F" in html
    assert "?memory_type__exact=episodic" in html
    for query, shown in [("memory_type__exact=episodic", {"turn talk"}),
                         ("under=home", {"green tea"}),
                         ("under=home/kitchen", {"green tea"}),
                         ("under=%2F", {"At the root"}),
                         ("under=a//b", set()),
                         ("q=kitchen", {"green tea"})]:
        page = text(staff.get(f"/admin/memories/memory/?{query}"))
        assert {t for t in ("turn talk", "green tea", "At the root") if t in page} == shown, \
            query


def test_the_admin_shows_a_memorys_place_and_its_versions(staff, episode, alice):
    from memories.services import memory_update

    talk = episode("talk", T0, path="talks/one")
    memory_update(memory=talk, actor=alice, path="talks/two")
    page = text(staff.get(f"/admin/memories/memory/{quote(talk.pk)}/change/"))
    assert "talks/two" in page and "Episodic" in page and "May 1, 2026" in page
    assert f"/admin/memories/memoryversion/?memory__exact={talk.pk}" in page
    versions = staff.get(f"/admin/memories/memoryversion/?memory__exact={talk.pk}")
    assert versions.status_code == 200
    assert "talks/one" in text(versions) and "talks/two" in text(versions)
    for query in ("memory_type__exact=episodic", "under=talks", "q=talks/two",
                  "recorded_by_type__exact=user"):
        assert staff.get(f"/admin/memories/memoryversion/?{query}").status_code == 200
    version = talk.versions.get(version=1)
    page = text(staff.get(f"/admin/memories/memoryversion/{version.pk}/change/"))
    assert "talks/one" in page and "Episodic" in page
    assert staff.post(f"/admin/memories/memoryversion/{version.pk}/change/",
                      {"path": "x"}).status_code == 403
    assert staff.get("/admin/memories/memoryversion/add/").status_code == 403


def test_admin_versions_are_scoped_to_own_minds_and_hide_credentials(remember, bob,
                                                                   bob_mind):
    from django.contrib.auth.models import Permission

    remember(key="alices", content="Alice's version", path="alice/path")
    memory_store(mind=bob_mind, actor=bob, category="credentials", key="token",
                 content="hunter2-secret", path="bob/path")
    bob.is_staff = True
    bob.save()
    bob.user_permissions.add(Permission.objects.get(codename="view_memoryversion"))
    client = session_client(bob)
    page = text(client.get("/admin/memories/memoryversion/"))
    assert "bob/path" in page and "[credentials]" in page
    assert "hunter2-secret" not in page and "Alice&#x27;s version" not in page
    assert "alice" not in page.split('id="changelist-filter"')[-1]  # not among the paths
    other = make_user("clerk")
    other.is_staff = True
    other.save()
    assert session_client(other).get("/admin/memories/memoryversion/").status_code == 403
