"""Management commands: create a mind, issue and revoke a key, the idempotent demo."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from minds.models import Mind, MindKey
from tests.conftest import key_client, session_client

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def test_create_mind_issue_key_and_revoke_it(alice):
    mind_id = run("create_mind", "Work", "--owner", "alice")
    assert list(Mind.objects.get(pk=mind_id).owners()) == [alice]
    plaintext = run("issue_key", mind_id, "--name", "laptop", "--scope", "read")
    key = MindKey.objects.get(mind_id=mind_id)
    assert plaintext.startswith("mk_") and key.scope == "read"
    assert plaintext not in (key.hashed_secret, key.lookup)
    agent = key_client(plaintext)
    assert agent.get("/memory").status_code == 200
    run("revoke_key", key.id)
    assert agent.get("/memory").status_code == 401


def test_commands_refuse_unknown_owner_mind_and_key(db):
    with pytest.raises(CommandError):
        run("create_mind", "Work", "--owner", "nobody")
    with pytest.raises(CommandError):
        run("issue_key", "m_missing")
    with pytest.raises(CommandError):
        run("revoke_key", "mkid_missing")


def test_demo_setup_creates_once_and_prints_a_working_key(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first = run("demo_setup")
    plaintext = next(line.split()[-1] for line in first.splitlines()
                     if line.startswith("Mind Key:"))
    assert key_client(plaintext).post("/memory", {"category": "note", "content": "hi"},
                                      format="json").status_code == 201
    second = run("demo_setup")
    assert "exists" in second and plaintext not in second
    assert Mind.objects.count() == 1 and MindKey.objects.count() == 1
    assert (tmp_path / "demo-credentials.txt").stat().st_mode & 0o077 == 0


def test_the_demo_user_is_staff_for_its_own_minds_not_a_superuser(settings, tmp_path, bob_mind):
    from django.contrib.auth import get_user_model

    settings.DATA_DIR = tmp_path
    run("demo_setup")
    demo = get_user_model().objects.get(username="demo")
    assert (demo.is_staff, demo.is_superuser) == (True, False)
    client = session_client(demo)
    minds = client.get("/admin/minds/mind/")
    assert minds.status_code == 200
    assert "Demo Mind" in minds.content.decode() and bob_mind.id not in minds.content.decode()
    assert client.get("/admin/auth/user/").status_code == 403


def test_demo_setup_makes_a_superuser_only_when_asked(settings, tmp_path):
    from django.contrib.auth import get_user_model

    settings.DATA_DIR = tmp_path
    run("demo_setup", "--superuser")
    assert get_user_model().objects.get(username="demo").is_superuser
