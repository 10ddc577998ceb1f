"""The Content-Security-Policy of the pages humans use (/ui/, /admin/): every page carries
it, no page has inline script or style for it to block, and Chromium enforces it while
the UI keeps working."""

import re

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from playwright.sync_api import expect

from memories.services import memory_delete, memory_store, memory_update
from synapse.middleware import CONTENT_SECURITY_POLICY
from tests.conftest import PASSWORD, session_client
from tests.ui.conftest import sign_in

INLINE = {
    "inline <script>": re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I),
    "on…= handler": re.compile(r"<[^>]*\son[a-z]+\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
    "style= attribute": re.compile(r"<[^>]*\sstyle\s*=", re.I),
    "<style> element": re.compile(r"<style\b", re.I),
}


@pytest.fixture
def a_mind_with_everything(alice, alice_mind, remember):
    """alice's mind with a versioned memory, one in the trash, one in the queue, and two
    episodes on a path (the memory returned is the first of them, versioned too)."""
    edited = remember(category="project", key="staging", content="PostgreSQL 16\nport 5433")
    memory_update(memory=edited, actor=alice, content="PostgreSQL 17\nport 5433")
    trashed = memory_store(mind=alice_mind, actor=alice, category="fact", key="old",
                           content="Gone").memory
    memory_delete(memory=trashed, actor=alice)
    remember(category="preference", key="style", content="Short answers")
    episode = remember(category="context", key="standup", content="Standup: ship Friday",
                       memory_type="episodic", path="projects/synapse/meetings")
    remember(category="context", key="retro", content="Retro: do not ship on Friday",
             memory_type="episodic", path="projects/synapse/meetings")
    memory_update(memory=episode, actor=alice, content="Standup: ship Thursday")
    return alice_mind, episode


def ui_pages(mind, memory) -> list[str]:
    base = f"/ui/minds/{mind.id}"
    return ["/ui/", f"{base}/", f"{base}/?q=postgres", f"{base}/memories/new",
            f"{base}/memories/{memory.id}", f"{base}/memories/{memory.id}?from=1&to=2",
            f"{base}/memories/{memory.id}/edit", f"{base}/queue", f"{base}/trash",
            f"{base}/stats", f"{base}/activity", f"{base}/reset", f"{base}/keys",
            f"{base}/settings", f"{base}/connect",
            f"{base}/?path=projects/synapse&memory_type=episodic", f"{base}/?path=a//b",
            f"{base}/timeline?path=projects/synapse/meetings",
            f"{base}/timeline?path=projects/synapse/meetings&at={memory.id}",
            f"{base}/queue?path=projects&memory_type=episodic"]


def admin_pages(mind, memory) -> list[str]:
    version = memory.versions.get(version=1)
    return ["/admin/", "/admin/minds/mind/", f"/admin/minds/mind/{quote(mind.id)}/change/",
            "/admin/minds/mind/add/", "/admin/minds/mindkey/", "/admin/minds/mindkey/add/",
            "/admin/memories/memory/", f"/admin/memories/memory/{quote(memory.id)}/change/",
            "/admin/memories/memory/?memory_type__exact=episodic&under=projects",
            "/admin/memories/memoryversion/",
            f"/admin/memories/memoryversion/{quote(version.pk)}/change/",
            "/admin/memories/auditevent/", "/admin/auth/user/"]


def inline_code(html: str) -> list[str]:
    return [f"{what}: {found.group(0)[:120]}" for what, pattern in INLINE.items()
            for found in pattern.finditer(html)]


@pytest.mark.django_db
def test_every_ui_and_admin_page_has_the_policy_and_no_inline_script(a_mind_with_everything,
                                                                      alice):
    mind, memory = a_mind_with_everything
    alice.is_staff = alice.is_superuser = True
    alice.save()
    signed_out = Client()
    responses = {"/ui/login": signed_out.get("/ui/login"),
                 "/admin/login/": signed_out.get("/admin/login/")}
    client = session_client(alice)
    for url in ui_pages(mind, memory) + admin_pages(mind, memory):
        responses[url] = client.get(url)
    # The page that shows a new key once, and a form with errors.
    responses["key created"] = client.post(f"/ui/minds/{mind.id}/keys",
                                           {"name": "shown once", "scope": "read"})
    responses["key created on the connect page"] = client.post(
        f"/ui/minds/{mind.id}/connect", {"name": "filled in once", "scope": "write"})
    responses["invalid form"] = client.post(f"/ui/minds/{mind.id}/memories/new", {})
    responses["invalid timeline"] = client.get(f"/ui/minds/{mind.id}/timeline?path=../x")
    responses["bulk trash confirmation"] = client.post(
        f"/ui/minds/{mind.id}/queue/trash", {"ids": [f"{memory.id}:{memory.version}"]})
    problems = []
    for url, response in responses.items():
        if response.status_code not in (200, 400):
            problems.append(f"{url}: {response.status_code}")
            continue
        if response.get("Content-Security-Policy") != CONTENT_SECURITY_POLICY:
            problems.append(f"{url}: no Content-Security-Policy")
        problems += [f"{url}: {found}" for found in inline_code(response.content.decode())]
    assert not problems, "\n".join(problems)


def test_the_policy_allows_only_this_servers_scripts_and_styles():
    directives = dict(part.split(" ", 1) for part in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["script-src"] == directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "unsafe-eval" not in CONTENT_SECURITY_POLICY


@pytest.mark.django_db
def test_the_api_answers_without_the_ui_policy(agent):
    assert "Content-Security-Policy" not in agent.get("/memory")


# -- in Chromium --------------------------------------------------------------------------

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_chromium_enforces_the_policy_and_the_ui_still_works(page, a_mind_with_everything,
                                                             alice):
    mind, memory = a_mind_with_everything
    page.add_init_script(RECORD_VIOLATIONS)
    console = []
    page.on("console", lambda message: console.append(message.text)
            if message.type in ("error", "warning") else None)
    sign_in(page)
    for url in ui_pages(mind, memory):
        response = page.goto(url)
        assert response.status == 200, url
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert page.evaluate("window.__cspViolations") == [], url
        # The stylesheet applied (a blocked one would leave the page unstyled).
        assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).display"
                             ) != "inline", url

    # synapse.js runs: select-all and the live count on the queue, copy on a new key.
    page.goto(f"/ui/minds/{mind.id}/queue")
    verify_selected = page.get_by_role("button", name=re.compile("^Verify selected"))
    page.get_by_label("Select all on this page").check()
    expect(verify_selected).to_have_text(re.compile(r"Verify selected \(\d+\)"))
    page.goto(f"/ui/minds/{mind.id}/keys")
    page.get_by_label("Name").fill("csp agent")
    page.get_by_role("button", name="Create key").click()
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("window.__cspViolations") == []
    assert [text for text in console if "Content Security Policy" in text] == []

    # An inline script injected into a page does not run: the browser enforces the policy.
    ran = page.evaluate("""() => {
        const script = document.createElement("script");
        script.textContent = "window.__injectedRan = true";
        document.head.appendChild(script);
        return window.__injectedRan === true;
    }""")
    assert ran is False
    assert page.evaluate("window.__cspViolations") == ["script-src-elem inline"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_chromium_signs_in_to_the_admin_under_the_policy(page, alice_mind, alice):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto("/admin/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    for url in ("/admin/", "/admin/minds/mind/",
                f"/admin/minds/mind/{quote(alice_mind.id)}/change/",
                "/admin/minds/mindkey/add/"):
        response = page.goto(url)
        assert response.status == 200, url
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert page.evaluate("window.__cspViolations") == [], url
