"""Secret, credentials-key and demo files are born 0600: no write-then-chmod window."""

import os
import stat
from io import StringIO

import pytest
from django.core.management import call_command

from synapse import settings as settings_module
from synapse.private_files import read_or_create_secret, write_private_file


@pytest.fixture
def open_umask_and_no_chmod(monkeypatch):
    """umask 0 (a file would be 0666 unless created 0600), and any chmod is a failure:
    a mode fixed after creation means a moment with a wider one."""
    previous = os.umask(0)

    def refuse_chmod(*args, **kwargs):
        raise AssertionError(f"chmod after creation: {args}")

    monkeypatch.setattr(os, "chmod", refuse_chmod)
    yield
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_development_secret_key_and_credentials_key_are_created_0600(
        open_umask_and_no_chmod, monkeypatch, tmp_path):
    monkeypatch.setattr(settings_module, "DATA_DIR", tmp_path)
    for name in ("SECRET_KEY", "SECRET_KEY_FILE", "SYNAPSE_CREDENTIALS_KEYS",
                 "SYNAPSE_CREDENTIALS_KEYS_FILE"):
        monkeypatch.delenv(name, raising=False)
    secret = settings_module._secret_key()
    keys = settings_module._credentials_keys()
    assert mode(tmp_path / "secret_key") == 0o600
    assert mode(tmp_path / "credentials_key") == 0o600
    # Kept across restarts: the second read returns the same values.
    assert settings_module._secret_key() == secret
    assert settings_module._credentials_keys() == keys
    assert sorted(path.name for path in tmp_path.iterdir()) == ["credentials_key",
                                                                 "secret_key"]


@pytest.mark.django_db
def test_demo_credentials_file_is_created_0600(open_umask_and_no_chmod, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    call_command("demo_setup", stdout=StringIO())
    path = tmp_path / "demo-credentials.txt"
    assert mode(path) == 0o600
    assert "Mind Key:" in path.read_text()


def test_an_existing_file_is_kept_and_two_writers_agree_on_one_secret(
        open_umask_and_no_chmod, tmp_path):
    path = tmp_path / "secret"
    assert write_private_file(path, "first") is True
    assert write_private_file(path, "second") is False
    assert read_or_create_secret(path, lambda: "third") == "first"
    assert write_private_file(path, "replaced", replace=True) is True
    assert path.read_text() == "replaced" and mode(path) == 0o600
    # No temporary file is left behind.
    assert [entry.name for entry in tmp_path.iterdir()] == ["secret"]


def test_a_symlink_planted_at_the_path_is_not_followed(open_umask_and_no_chmod, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "secret").symlink_to(target)
    assert write_private_file(tmp_path / "secret", "s3cret") is False
    assert target.read_text() == "untouched"
