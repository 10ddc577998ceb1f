"""Production defaults of synapse/settings.py, each read in a fresh process (settings are
read once, at start): DEBUG is refused, registration starts closed."""

import os
import subprocess
import sys

from tests.synapse.test_project_checks import PRODUCTION_ENV, ROOT


def run_manage(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **PRODUCTION_ENV, "SYNAPSE_DATA_DIR": str(tmp_path), **env}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)


def production_setting(expression: str, tmp_path, **env: str) -> str:
    """``settings.<expression>`` as the production settings compute it."""
    result = run_manage(tmp_path, "shell", "-c",
                        f"from django.conf import settings; print(settings.{expression})", **env)
    assert result.returncode == 0, result.stderr
    # The last line: the shell may first say how many objects it imported.
    return result.stdout.strip().splitlines()[-1]


def test_production_refuses_to_start_with_debug_on(tmp_path):
    result = run_manage(tmp_path, "check", DEBUG="true")
    assert result.returncode != 0
    assert "DEBUG=true is refused with SYNAPSE_PRODUCTION=true" in result.stderr


def test_registration_is_closed_by_default_in_production_and_a_setting_opens_it(tmp_path):
    assert production_setting("SYNAPSE['ALLOW_REGISTRATION']", tmp_path) == "False"
    assert production_setting("SYNAPSE['ALLOW_REGISTRATION']", tmp_path,
                              SYNAPSE_ALLOW_REGISTRATION="true") == "True"


def test_registration_stays_open_by_default_in_development(tmp_path):
    development = {name: value for name, value in os.environ.items()
                   if name not in ("SYNAPSE_PRODUCTION", "SYNAPSE_ALLOW_REGISTRATION")}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.conf import settings; print(settings.SYNAPSE['ALLOW_REGISTRATION'])"],
        cwd=ROOT, env={**development, "SYNAPSE_DATA_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True"


def test_production_with_smtp_refuses_to_start_without_the_public_url(tmp_path):
    # Mailed links (password resets, invitations) are built on SYNAPSE_PUBLIC_URL only:
    # never on the Host header a stranger sends (synapse.origin.link_origin).
    result = run_manage(tmp_path, "check", EMAIL_HOST="smtp.example.com", SYNAPSE_PUBLIC_URL="")
    assert result.returncode != 0
    assert "SYNAPSE_PUBLIC_URL must be set in production when EMAIL_HOST is" in result.stderr
    assert production_setting("PUBLIC_URL", tmp_path, EMAIL_HOST="smtp.example.com",
                              SYNAPSE_PUBLIC_URL="https://synapse.example.com") \
        == "https://synapse.example.com"


def test_production_refuses_to_start_with_any_host_allowed(tmp_path):
    for hosts in ("*", "synapse.example.com, *"):
        result = run_manage(tmp_path, "check", ALLOWED_HOSTS=hosts)
        assert result.returncode != 0, hosts
        assert "ALLOWED_HOSTS=* is refused with SYNAPSE_PRODUCTION=true" in result.stderr
