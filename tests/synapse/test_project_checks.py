"""Project-wide checks: migrations match the models, the production settings pass
`check --deploy`, and the OpenAPI schema documents every route."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION_ENV = {
    "SYNAPSE_PRODUCTION": "true",
    "SECRET_KEY": "x8Hq2-RJ6mZ4vN0yP1cT7wK3sL9dF5gA2bE6hU0iO4jQ8rS1tV7uW3zX5yC9nM2",
    "JWT_SIGNING_KEY": "u7Gk1-PL3nB8vC2xZ6mQ0wE4rT9yU5iO1pA7sD3fG8hJ2kL6zX0cV4bN9mQ1wE5",
    "ALLOWED_HOSTS": "synapse.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://synapse.example.com",
    "DEBUG": "false",
    "SYNAPSE_CREDENTIALS_KEYS": "58vavofhn9hK25aNknxzuhJX4zlUJt6ch8gMOiqRsxM=",
    # These checks never connect; production otherwise refuses the embedded database.
    "SYNAPSE_ALLOW_EMBEDDED_DB": "true",
}


@pytest.mark.django_db
def test_migrations_match_the_models():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_production_settings_pass_the_deploy_check(tmp_path):
    # A developer's or test's DJANGO_ALLOW_ASYNC_UNSAFE is not part of the deployment.
    env = {name: value for name, value in os.environ.items()
           if name != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {**env, **PRODUCTION_ENV, "SYNAPSE_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy",
                             "--fail-level", "DEBUG"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_refuses_to_start_without_secret_key(tmp_path):
    env = {**os.environ, **PRODUCTION_ENV, "SYNAPSE_DATA_DIR": str(tmp_path)}
    del env["SECRET_KEY"]
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_production_refuses_to_start_without_allowed_hosts(tmp_path):
    env = {**os.environ, **PRODUCTION_ENV, "SYNAPSE_DATA_DIR": str(tmp_path)}
    del env["ALLOWED_HOSTS"]
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "ALLOWED_HOSTS" in result.stderr


def test_a_boolean_setting_that_is_not_a_boolean_is_an_error(tmp_path):
    env = {**os.environ, "DEBUG": "maybe", "SYNAPSE_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "DEBUG must be true or false" in result.stderr


def _routes(resolver=None, prefix=""):
    """Every concrete URL pattern of the API (not admin, UI, schema or docs)."""
    resolver = resolver or get_resolver()
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route


@pytest.mark.django_db
def test_schema_documents_every_api_route(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    documented = set(response.json()["paths"])
    # OAuth's endpoints speak their RFCs (form bodies, RFC 6749 errors, metadata documents),
    # not the API: docs/security.md, "OAuth", documents them. /metrics speaks Prometheus'
    # text format to a scraper, not to agents: docs/scaling.md, "Metrics".
    skipped = ("admin/", "api/", "ui/", "mcp", "static/", "oauth/", ".well-known/oauth-",
               "metrics")
    missing = []
    for route in _routes():
        if not route or route.startswith(skipped) or route == "^(?P<path>.*)$":
            continue
        path = "/" + route.replace("<memory_id:memory_id>", "{memory_id}")
        for converter in ("str:", "slug:", "int:", "path:"):
            path = path.replace(f"<{converter}", "{")
        path = path.replace("<", "{").replace(">", "}")
        if path not in documented:
            missing.append(path)
    assert missing == []


@pytest.mark.django_db
def test_api_docs_are_served_without_a_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn" not in html.lower()
    assert "swagger-ui" in html
