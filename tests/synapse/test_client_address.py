"""Which client address a request counts against (per-address rate limits, issue 10
finding 12): X-Forwarded-For read by the number of trusted proxies, never otherwise; and
the Docker setup passes that number, so clients behind its one gateway are told apart."""

import re
from pathlib import Path

import pytest
import yaml
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

DOCKER = Path(__file__).resolve().parents[2] / "docker"
# Inside a compose network every connection comes from the network's gateway.
DOCKER_GATEWAY = "172.18.0.1"


def compose_environment() -> dict:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return compose["services"]["web"]["environment"]


def compose_default(name: str) -> str:
    """The value compose gives NAME when the operator's .env does not set it."""
    value = compose_environment()[name]
    match = re.fullmatch(r"\$\{" + name + r":-([^}]*)\}", value)
    assert match, f"{name} should be passed through with a default: {value!r}"
    return match.group(1)


def use(settings, *, proxies: int, login_rate: str = "100/min") -> None:
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": proxies,
                               "DEFAULT_THROTTLE_RATES": {**rates, "login": login_rate,
                                                          "login_username": "100/min"}}


def failed_login(remote_addr: str, forwarded_for: str | None = None, username="nobody"):
    extra = {"REMOTE_ADDR": remote_addr}
    if forwarded_for is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return APIClient().post("/auth/login", {"username": username, "password": "wrong"},
                            format="json", **extra)


def budget_addresses() -> set[str]:
    """The client addresses that spent from the per-address login budget."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT key FROM synapse_ratelimit WHERE key LIKE 'login:ip:%%'")
        return {row[0].removeprefix("login:ip:") for row in cursor.fetchall()}


@pytest.mark.parametrize(("proxies", "expected"), [
    (1, "203.0.113.7"),   # the address the one trusted proxy appended
    (2, "198.51.100.4"),  # two proxies: the address the outer one appended
])
def test_x_forwarded_for_is_read_by_the_number_of_trusted_proxies(settings, proxies,
                                                                  expected):
    use(settings, proxies=proxies)
    # The client wrote "6.6.6.6" itself; each proxy appended the address it saw.
    assert failed_login(DOCKER_GATEWAY, "6.6.6.6, 198.51.100.4, 203.0.113.7").status_code == 401
    assert budget_addresses() == {expected}


def test_without_proxies_the_header_is_ignored(settings):
    use(settings, proxies=0)
    failed_login("192.0.2.10", "6.6.6.6")
    assert budget_addresses() == {"192.0.2.10"}


def test_compose_passes_the_proxy_count_and_the_forwarded_ips_setting():
    environment = compose_environment()
    assert int(compose_default("SYNAPSE_NUM_PROXIES")) == 1
    assert compose_default("FORWARDED_ALLOW_IPS")
    env_example = (DOCKER / ".env.example").read_text()
    assert "SYNAPSE_NUM_PROXIES=" in env_example and "FORWARDED_ALLOW_IPS=" in env_example
    # The worker shares the environment (one anchor), the web service above all.
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert compose["services"]["worker"]["environment"] == environment


def test_with_compose_settings_one_client_locked_out_does_not_lock_out_the_others(settings):
    use(settings, proxies=int(compose_default("SYNAPSE_NUM_PROXIES")), login_rate="3/min")
    for _attempt in range(3):
        assert failed_login(DOCKER_GATEWAY, "203.0.113.7").status_code == 401
    assert failed_login(DOCKER_GATEWAY, "203.0.113.7").status_code == 429
    # Another client behind the same gateway still has its own attempts …
    assert failed_login(DOCKER_GATEWAY, "198.51.100.4").status_code == 401
    # … also through the web UI's sign-in form, which spends the same budgets.
    response = APIClient().post("/ui/login", {"username": "nobody", "password": "wrong"},
                                REMOTE_ADDR=DOCKER_GATEWAY,
                                HTTP_X_FORWARDED_FOR="192.0.2.99")
    assert response.status_code == 200  # the form again, with its error: not a 429
    response = APIClient().post("/ui/login", {"username": "nobody", "password": "wrong"},
                                REMOTE_ADDR=DOCKER_GATEWAY,
                                HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert response.status_code == 429
