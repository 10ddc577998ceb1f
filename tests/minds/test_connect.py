"""The "Connect an agent" page through Django's test client: the configurations with the
server's URL, a key created and filled in once, CSRF, and another user's mind as a 404."""

import re
from html import unescape

import pytest
from django.test import Client

from minds.models import MindKey
from synapse.agent_config import KEY_PLACEHOLDER, hosts
from tests.conftest import text

pytestmark = pytest.mark.django_db

KEY = re.compile(r"mk_[A-Za-z0-9]{52}")


def test_the_owner_sees_every_hosts_snippets_with_the_servers_url(owner, ui):
    response = owner.get(ui("connect"))
    assert response.status_code == 200
    page = text(response)
    assert 'value="http://testserver/mcp"' in page
    for host in hosts("http://testserver"):
        assert f'id="host-{host.id}"' in page
    assert "http://testserver/mcp" in page and KEY_PLACEHOLDER in page
    assert KEY.findall(page) == []


def test_the_public_url_setting_is_the_url_the_page_hands_out(owner, ui, settings):
    settings.PUBLIC_URL = "https://memory.example.org"
    page = text(owner.get(ui("connect")))
    assert 'value="https://memory.example.org/mcp"' in page
    assert "http://testserver/mcp" not in page


def test_creating_a_key_fills_it_into_the_snippets_of_that_response_only(owner, ui,
                                                                       alice_mind, alice):
    response = owner.post(ui("connect"), {"name": "laptop codex", "scope": "write"})
    assert response.status_code == 200
    page = unescape(text(response))
    (plaintext,) = set(KEY.findall(page))
    key = MindKey.objects.get(mind=alice_mind, name="laptop codex")
    assert plaintext.endswith(key.last4) and key.created_by == alice and key.scope == "write"
    # In the key variants' snippets (Codex's export, Claude Desktop's env, VS Code's value).
    assert f'export SYNAPSE_MIND_KEY="{plaintext}"' in page
    assert f"Bearer {plaintext}" in page
    assert "Cache-Control" in response and "no-store" in response["Cache-Control"]
    # Coming back shows the placeholder again and no key at all.
    again = unescape(text(owner.get(ui("connect"))))
    assert KEY.findall(again) == [] and plaintext not in again
    assert f'export SYNAPSE_MIND_KEY="{KEY_PLACEHOLDER}"' in again


def test_a_nameless_key_is_refused_and_none_is_created(owner, ui, alice_mind):
    response = owner.post(ui("connect"), {"name": "  ", "scope": "write"})
    assert response.status_code == 400
    assert "This field is required." in text(response)
    assert not MindKey.objects.filter(mind=alice_mind).exists()


def test_the_key_form_without_a_csrf_token_is_refused(alice, alice_mind, ui):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(ui("connect")).status_code == 200
    response = client.post(ui("connect"), {"name": "sneaky", "scope": "write"})
    assert response.status_code == 403
    assert not MindKey.objects.filter(mind=alice_mind).exists()


def test_another_users_mind_is_a_404_and_gets_no_key(owner, bob_mind):
    url = f"/ui/minds/{bob_mind.id}/connect"
    assert owner.get(url).status_code == 404
    assert owner.post(url, {"name": "stolen", "scope": "write"}).status_code == 404
    assert not MindKey.objects.filter(mind=bob_mind).exists()


def test_signed_out_visitors_are_sent_to_sign_in(client, ui):
    response = client.get(ui("connect"))
    assert response.status_code == 302 and response["Location"].startswith("/ui/login")


def test_the_mind_pages_link_to_it(owner, ui, alice_mind):
    link = f'href="/ui/minds/{alice_mind.id}/connect"'
    assert link in text(owner.get(ui()))  # the tabs, and the empty mind's call to action
    assert link in text(owner.get("/ui/"))
