"""The web UI shows each member only the controls their role may use (docs/teams.md,
"Roles"): a viewer no form that writes, an editor none that manages, an owner all; and a
form posted anyway is refused by the check, whatever the page showed."""

import re

import pytest

from memories.models import Memory
from memories.services import memory_delete, memory_set_verified
from minds.models import Role
from minds.services import member_add
from tests.conftest import make_user, session_client, text

pytestmark = pytest.mark.django_db

# What a page links or posts to, by what it takes (the tabs and forms of templates/).
WRITE = re.compile(r'(action="[^"]*/(verify|unverify|delete|restore|revert|queue/verify|'
                   r'queue/unverify|queue/trash)"|href="[^"]*/(memories/new|edit)[?"])')
MANAGE = re.compile(r'href="[^"]*/(keys|connect|settings|reset|apps)"')
POST_FORM = re.compile(r'<form[^>]*method="post"(?![^>]*action="/ui/logout")')


@pytest.fixture
def shared(alice, alice_mind, remember):
    """alice's mind with every kind of memory a page shows a control for; an editor and a
    viewer on it."""
    editor, viewer = make_user("eddie"), make_user("vera")
    member_add(mind=alice_mind, user=editor, role=Role.EDITOR, actor=alice)
    member_add(mind=alice_mind, user=viewer, role=Role.VIEWER, actor=alice)
    unverified = remember(key="unverified", content="Waiting for a human")
    revised = remember(key="revised", content="First take")
    remember(key="revised", content="Second take")
    verified = remember(key="verified", content="Checked")
    memory_set_verified(memory=verified, user=alice, verified=True)
    trashed = remember(key="trashed", content="Gone")
    memory_delete(memory=trashed, actor=alice)
    remember(key="episode", content="It happened", memory_type="episodic",
             occurred_at="2026-01-01T10:00:00Z")
    users = {"owner": alice, "editor": editor, "viewer": viewer}
    return alice_mind, users, {"unverified": unverified, "revised": revised,
                               "trashed": trashed}


def pages(mind, memories) -> list[str]:
    base = f"/ui/minds/{mind.id}"
    return [f"{base}/", f"{base}/queue", f"{base}/trash", f"{base}/stats", f"{base}/activity",
            f"{base}/timeline", *(f"{base}/memories/{memory.id}" for memory in
                                  memories.values())]


@pytest.mark.parametrize("role, writes, manages", [
    ("owner", True, True), ("editor", True, False), ("viewer", False, False)])
def test_each_role_sees_only_the_controls_it_may_use(shared, role, writes, manages):
    mind, users, memories = shared
    client = session_client(users[role])
    seen_write, seen_manage = set(), set()
    for page in pages(mind, memories):
        response = client.get(page)
        assert response.status_code == 200, page
        body = text(response)
        assert f'data-testid="mind-role" title="Your role on this mind">{role}<' in body
        found_write = [match.group(0) for match in WRITE.finditer(body)]
        found_forms = POST_FORM.findall(body)
        found_manage = [match.group(0) for match in MANAGE.finditer(body)]
        if not writes:
            assert not found_write and not found_forms, (page, found_write, found_forms)
        if not manages:
            assert not found_manage, (page, found_manage)
        seen_write.update(found_write)
        seen_manage.update(found_manage)
    # The pages do carry the controls for those who may use them: the test sees them.
    assert bool(seen_write) == writes and bool(seen_manage) == manages


@pytest.mark.parametrize("role", ["viewer", "editor"])
def test_a_form_posted_anyway_is_refused_and_changes_nothing(shared, role):
    """Every form a viewer (writes) or an editor (owner pages) does not see, posted with
    the session: the 403 page, and the rows as they were."""
    mind, users, memories = shared
    base = f"/ui/minds/{mind.id}"
    memory, trashed = memories["unverified"], memories["trashed"]
    posts = {
        f"{base}/settings": {"name": "Taken", "unverified_in_recall": "marked",
                             "search_language": "english"},
        f"{base}/delete": {"confirm": mind.name},
        f"{base}/reset": {"path": "", "confirm": ""},
        f"{base}/keys": {"name": "sneaky", "scope": "write"},
        f"{base}/connect": {"name": "sneaky", "scope": "write"},
    }
    if role == "viewer":
        posts.update({
            f"{base}/memories/new": {"category": "fact", "key": "new", "content": "x"},
            f"{base}/memories/{memory.id}/edit": {"category": "fact", "key": "k",
                                                  "content": "changed", "version": 1},
            f"{base}/memories/{memory.id}/verify": {"version": memory.version},
            f"{base}/memories/{memory.id}/delete": {},
            f"{base}/memories/{trashed.id}/restore": {},
            f"{base}/memories/{memories['revised'].id}/revert": {"version": 1},
            f"{base}/queue/verify": {"ids": [f"{memory.id}:{memory.version}"]},
            f"{base}/queue/trash": {"ids": [f"{memory.id}:{memory.version}"]},
        })
    client = session_client(users[role])

    def state():
        return (list(Memory.objects.for_mind(mind).order_by("id").values(
                    "id", "content", "version", "verified", "deleted_at")),
                mind.keys.count(), type(mind).objects.filter(pk=mind.pk).values().first())

    before = state()
    for url, form in posts.items():
        response = client.post(url, form)
        assert response.status_code == 403, (url, response.status_code)
        assert "does not allow this" in text(response)
    assert state() == before
