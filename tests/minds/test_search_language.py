"""A mind's text-search language where humans set it: the human API (/minds), the web UI's
settings page and the admin. How search uses it: tests/memories/test_languages.py."""

import pytest
from django.contrib.admin.utils import quote

from memories.models import AuditEvent
from memories.text_search import reindex_memories
from minds.models import SEARCH_LANGUAGES, Mind
from minds.services import mind_update
from tests.conftest import text

pytestmark = pytest.mark.django_db

UNDER_WAY = "is under way"


def reindex_all() -> None:
    while reindex_memories(limit=50):
        pass


# -- human API ----------------------------------------------------------------------------

def test_a_mind_is_created_in_english_unless_another_language_is_chosen(human):
    plain = human.post("/minds", {"name": "Plain"}, format="json")
    assert plain.status_code == 201
    assert (plain.json()["search_language"], plain.json()["reindex_pending"]) == ("english",
                                                                                  False)
    german = human.post("/minds", {"name": "Deutsch", "search_language": "german"},
                        format="json")
    assert german.status_code == 201
    assert (german.json()["search_language"], german.json()["reindex_pending"]) == ("german",
                                                                                    False)
    mind = Mind.objects.get(pk=german.json()["id"])
    assert (mind.search_language, mind.search_config) == ("german", "synapse_german")


def test_the_list_and_the_detail_carry_the_language_and_the_pending_flag(human, alice_mind):
    listed = human.get("/minds").json()[0]
    detail = human.get(f"/minds/{alice_mind.id}").json()
    for body in (listed, detail):
        assert (body["search_language"], body["reindex_pending"]) == ("english", False)


def test_patching_the_language_is_audited_and_reindexes_through_the_worker(
        human, alice_mind, alice, remember):
    remember(key="haeuser", content="Die alten Häuser am Fluss wurden renoviert.")
    response = human.patch(f"/minds/{alice_mind.id}", {"search_language": "german"},
                           format="json")
    assert response.status_code == 200
    assert (response.json()["search_language"], response.json()["reindex_pending"]) == (
        "german", True)
    event = AuditEvent.objects.get(mind=alice_mind, action="mind_update")
    assert (event.actor_type, event.actor_id) == ("user", str(alice.pk))
    assert event.details == {"before": {"search_language": "english"},
                             "after": {"search_language": "german"}}
    reindex_all()
    assert human.get(f"/minds/{alice_mind.id}").json()["reindex_pending"] is False


def test_patching_the_same_language_changes_nothing(human, alice_mind):
    response = human.patch(f"/minds/{alice_mind.id}", {"search_language": "english"},
                           format="json")
    assert response.status_code == 200
    assert response.json()["reindex_pending"] is False
    assert not AuditEvent.objects.filter(action="mind_update").exists()


@pytest.mark.parametrize("language", ["klingon", "English", "", "synapse_german", None, 7])
def test_an_unknown_language_is_400_naming_the_field(human, alice_mind, language):
    created = human.post("/minds", {"name": "New", "search_language": language},
                         format="json")
    patched = human.patch(f"/minds/{alice_mind.id}", {"search_language": language},
                          format="json")
    for response in (created, patched):
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "invalid"
        assert set(error["fields"]) == {"search_language"}
    assert list(Mind.objects.values_list("name", "search_language", "reindex_pending")) == [
        ("Alice's Mind", "english", False)]


def test_every_language_of_the_model_is_accepted(human, alice_mind):
    for language in SEARCH_LANGUAGES:
        response = human.patch(f"/minds/{alice_mind.id}", {"search_language": language},
                               format="json")
        assert response.status_code == 200, (language, response.json())
        assert response.json()["search_language"] == language


def test_another_users_mind_is_404_and_keeps_its_language(human, bob_mind):
    response = human.patch(f"/minds/{bob_mind.id}", {"search_language": "french"},
                           format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    bob_mind.refresh_from_db()
    assert (bob_mind.search_language, bob_mind.reindex_pending) == ("english", False)


def test_a_mind_key_cannot_change_the_language(agent, reader, alice_mind):
    for client in (agent, reader):
        response = client.patch(f"/minds/{alice_mind.id}", {"search_language": "french"},
                                format="json")
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"
    alice_mind.refresh_from_db()
    assert (alice_mind.search_language, alice_mind.reindex_pending) == ("english", False)
    assert not AuditEvent.objects.filter(action="mind_update").exists()


def test_reindex_pending_cannot_be_written(human, alice_mind):
    for response in (human.patch(f"/minds/{alice_mind.id}", {"reindex_pending": True},
                                 format="json"),
                     human.post("/minds", {"name": "x", "reindex_pending": True},
                                format="json")):
        assert response.status_code == 400
        assert "reindex_pending" in response.json()["error"]["fields"]
    assert not Mind.objects.filter(reindex_pending=True).exists()


# -- web UI -------------------------------------------------------------------------------

def test_the_settings_page_shows_the_language_select_and_its_help(owner, ui, alice_mind):
    mind_update(mind=alice_mind, search_language="french")
    Mind.objects.filter(pk=alice_mind.pk).update(reindex_pending=False)
    response = owner.get(ui("settings"))
    page = text(response)
    assert response.context["form"]["search_language"].value() == "french"
    assert '<select name="search_language"' in page
    assert '<option value="french" selected>French</option>' in page
    assert ("Keyword search stems words in this language and ignores accents; changing it "
            "re-indexes this mind&#x27;s memories in the background.") in page
    assert UNDER_WAY not in page


def test_the_settings_form_changes_the_language_and_says_reindexing_is_under_way(
        owner, ui, alice_mind, alice):
    response = owner.post(ui("settings"), {"name": "Alice's Mind",
                                             "unverified_in_recall": "marked",
                                             "search_language": "german"}, follow=True)
    assert response.redirect_chain[-1][0] == ui("settings")
    alice_mind.refresh_from_db()
    assert (alice_mind.search_language, alice_mind.reindex_pending) == ("german", True)
    assert alice_mind.unverified_in_recall == "marked" and alice_mind.name == "Alice's Mind"
    event = AuditEvent.objects.get(action="mind_update")
    assert event.details["after"] == {"search_language": "german"}
    assert event.actor_id == str(alice.pk)
    page = text(response)
    assert "Settings saved." in page and UNDER_WAY in page and "German" in page
    reindex_all()
    assert UNDER_WAY not in text(owner.get(ui("settings")))


def test_the_settings_form_refuses_an_unknown_language(owner, ui, alice_mind):
    response = owner.post(ui("settings"), {"name": "Renamed", "unverified_in_recall": "marked",
                                             "search_language": "klingon"})
    assert response.status_code == 400
    assert "Select a valid choice" in text(response)
    alice_mind.refresh_from_db()
    assert (alice_mind.name, alice_mind.search_language) == ("Alice's Mind", "english")


def test_another_users_settings_cannot_change_their_language(owner, bob_mind):
    response = owner.post(f"/ui/minds/{bob_mind.id}/settings", {
        "name": "Bob's Mind", "unverified_in_recall": "marked", "search_language": "german"})
    assert response.status_code == 404
    bob_mind.refresh_from_db()
    assert bob_mind.search_language == "english"


# -- admin --------------------------------------------------------------------------------

def test_the_admin_lists_and_filters_minds_by_language(staff, alice_mind, bob_mind):
    mind_update(mind=bob_mind, search_language="german")
    page = text(staff.get("/admin/minds/mind/"))
    assert "column-search_language" in page and "search_language__exact=german" in page
    response = staff.get("/admin/minds/mind/?search_language__exact=german")
    assert [mind.pk for mind in response.context["cl"].result_list] == [bob_mind.pk]


def test_the_admin_changes_the_language_through_the_service(staff, alice_mind):
    page = text(staff.get(f"/admin/minds/mind/{quote(alice_mind.pk)}/change/"))
    assert 'name="search_language"' in page and 'name="reindex_pending"' not in page
    response = staff.post(f"/admin/minds/mind/{quote(alice_mind.pk)}/change/", {
        "name": "Alice's Mind", "unverified_in_recall": "marked",
        "search_language": "spanish"})
    assert response.status_code == 302
    alice_mind.refresh_from_db()
    assert (alice_mind.search_language, alice_mind.reindex_pending) == ("spanish", True)
    event = AuditEvent.objects.get(action="mind_update")
    assert (event.actor_label, event.details["after"]) == ("root",
                                                           {"search_language": "spanish"})


def test_the_admin_creates_a_mind_in_a_language(staff, alice):
    response = staff.post("/admin/minds/mind/add/", {
        "owner": alice.pk, "name": "Italiano", "unverified_in_recall": "marked",
        "search_language": "italian"})
    assert response.status_code == 302
    mind = Mind.objects.get(name="Italiano")
    assert (mind.search_language, mind.reindex_pending) == ("italian", False)
