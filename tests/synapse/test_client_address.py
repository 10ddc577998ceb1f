"""Which client address a request counts against (per-address rate limits, issue 10
finding 12): X-Forwarded-For read by the number of trusted proxies, never otherwise; and
the Docker setup passes that number, so clients behind its one gateway are told apart.

Security finding 9: the server in front of Django (uvicorn's proxy-headers middleware)
must not rewrite the client address from X-Forwarded-For behind Django's back. The live
tests start gunicorn (synapse/gunicorn_conf.py) and spend the ``login`` budget through it."""

import re
from pathlib import Path

import httpx
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


# What gunicorn and uvicorn are told (security finding 9) ---------------------------------

# Builds the worker gunicorn would start (from synapse/gunicorn_conf.py and the command
# line given) and prints what its server trusts: gunicorn's forwarded_allow_ips, then
# the uvicorn Config's proxy_headers and forwarded_allow_ips (uvicorn_worker builds it
# from gunicorn's settings, then SynapseWorker.CONFIG_KWARGS).
BUILD_WORKER = """
import json, os, sys
from gunicorn import glogging
from gunicorn.app.wsgiapp import WSGIApplication
sys.argv = ["gunicorn", "-c", "synapse/gunicorn_conf.py", *sys.argv[1:]]
app = WSGIApplication("%(prog)s [OPTIONS]")
worker = app.cfg.worker_class(0, os.getpid(), [], app, 30, app.cfg, glogging.Logger(app.cfg))
config = getattr(worker, "config", None)
print(json.dumps([app.cfg.forwarded_allow_ips, config and config.proxy_headers,
                  config and config.forwarded_allow_ips]))
"""


def trusted_forwarders(*args: str, **env: str) -> list:
    import json
    import os
    import subprocess
    import sys

    from tests.security.live import ROOT

    base = {key: value for key, value in os.environ.items()
            if key not in ("FORWARDED_ALLOW_IPS", "SYNAPSE_NUM_PROXIES", "SYNAPSE_WORKER_CLASS")}
    result = subprocess.run([sys.executable, "-c", BUILD_WORKER, *args], cwd=ROOT,
                            env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [(), ("--forwarded-allow-ips", "10.0.0.0/8")])
@pytest.mark.parametrize("forwarded_allow_ips", [None, "*"])
def test_without_proxies_uvicorn_believes_no_forwarded_header(args, forwarded_allow_ips):
    env = {"SYNAPSE_NUM_PROXIES": "0"}
    if forwarded_allow_ips is not None:
        env["FORWARDED_ALLOW_IPS"] = forwarded_allow_ips
    _gunicorn, proxy_headers, uvicorn_trusts = trusted_forwarders(*args, **env)
    assert proxy_headers is False and uvicorn_trusts == []
    if not args:  # the environment cannot make gunicorn (gthread's scheme) trust any either
        assert _gunicorn == []


def test_without_proxies_gthread_trusts_no_forwarder_whatever_the_environment_says():
    # gthread's REMOTE_ADDR is the connection's (gunicorn never reads X-Forwarded-For for
    # it); its forwarded_allow_ips decides only X-Forwarded-Proto and the like.
    assert trusted_forwarders(SYNAPSE_NUM_PROXIES="0", SYNAPSE_WORKER_CLASS="gthread",
                              FORWARDED_ALLOW_IPS="*") == [[], None, None]


def test_with_proxies_uvicorn_trusts_the_proxies_forwarded_allow_ips_names():
    assert trusted_forwarders(SYNAPSE_NUM_PROXIES="1", FORWARDED_ALLOW_IPS="172.18.0.1") == [
        ["172.18.0.1"], True, ["172.18.0.1"]]
    assert trusted_forwarders("--forwarded-allow-ips", "10.0.0.2,127.0.0.1",
                              SYNAPSE_NUM_PROXIES="2") == [
        ["10.0.0.2", "127.0.0.1"], True, ["10.0.0.2", "127.0.0.1"]]


@pytest.mark.parametrize("value", ["-1", "one"])
def test_a_bad_proxy_count_stops_gunicorn(value):
    import subprocess
    import sys

    from tests.security.live import ROOT

    result = subprocess.run([sys.executable, "-c", BUILD_WORKER], cwd=ROOT, text=True,
                            env={"PATH": "/usr/bin:/bin", "SYNAPSE_NUM_PROXIES": value},
                            capture_output=True, timeout=120)
    assert result.returncode != 0 and "SYNAPSE_NUM_PROXIES" in result.stderr


# Live servers (security finding 9) ------------------------------------------------------

LIVE_LOGIN_RATE = 3  # a minute: the fourth failed sign-in from one address is a 429


@pytest.fixture(scope="module")
def address_cluster():
    from tests.security.live import destroy_cluster, make_cluster

    cluster = make_cluster()
    yield cluster
    destroy_cluster(cluster)


def live_server(cluster, **env: str):
    """gunicorn with a login limit small enough to reach, every budget spent before gone."""
    from tests.security.live import Server

    cluster.manage("shell", "-c", "from django.db import connection; "
                   "connection.cursor().execute('DELETE FROM synapse_ratelimit')")
    return Server(cluster, workers=1, threads=2, env={
        "SYNAPSE_RATE_LOGIN": f"{LIVE_LOGIN_RATE}/min",
        "SYNAPSE_RATE_LOGIN_USERNAME": "100/min", "SYNAPSE_PRELOAD_MODEL": "false", **env})


def access_addresses(output: str) -> list[str]:
    """The client address of each sign-in in synapse.access's lines (synapse.asgi): the
    ``client`` uvicorn put in the ASGI scope, Django's REMOTE_ADDR."""
    return [line.split(" synapse.access ", 1)[1].split()[0] for line in output.splitlines()
            if " synapse.access " in line and '"POST /auth/login"' in line]


def live_login(server, forwarded_for: str | None = None) -> int:
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    return httpx.post(server.url + "/auth/login", headers=headers, timeout=30,
                      json={"username": "nobody", "password": "wrong"}).status_code


@pytest.mark.slow
@pytest.mark.parametrize(("worker_class", "forwarded_allow_ips"), [
    ("uvicorn", None),            # gunicorn's and uvicorn's default: 127.0.0.1,::1
    ("uvicorn", "127.0.0.1,::1"),
    ("uvicorn", "*"),
    ("gthread", "*"),
])
def test_without_proxies_a_live_server_believes_no_x_forwarded_for(
        address_cluster, worker_class, forwarded_allow_ips):
    """From loopback with SYNAPSE_NUM_PROXIES=0, a new X-Forwarded-For on every attempt
    does not buy a new budget, whatever FORWARDED_ALLOW_IPS says."""
    env = {"SYNAPSE_NUM_PROXIES": "0", "SYNAPSE_WORKER_CLASS": worker_class}
    if forwarded_allow_ips is not None:
        env["FORWARDED_ALLOW_IPS"] = forwarded_allow_ips
    server = live_server(address_cluster, **env)
    try:
        answers = [live_login(server, forwarded_for)
                   for forwarded_for in ("203.0.113.1", "203.0.113.2, 198.51.100.2",
                                         "2001:db8::3", "203.0.113.4", "198.51.100.5:443")]
    finally:
        output = server.stop()
    assert answers == [401] * LIVE_LOGIN_RATE + [429, 429], output
    if worker_class == "uvicorn":  # uvicorn did not rewrite the address either
        assert access_addresses(output) == ["127.0.0.1"] * 5, output


@pytest.mark.slow
def test_with_one_proxy_a_live_server_takes_the_address_that_proxy_appended(
        address_cluster):
    """SYNAPSE_NUM_PROXIES=1 and the proxy's address in FORWARDED_ALLOW_IPS: the throttles
    and uvicorn (the access log) agree on the client, and neither counts the proxy twice
    (uvicorn rewrites REMOTE_ADDR, DRF reads the last X-Forwarded-For entry: the same)."""
    server = live_server(address_cluster, SYNAPSE_NUM_PROXIES="1",
                         FORWARDED_ALLOW_IPS="127.0.0.1")
    try:
        # What the proxy (127.0.0.1) sends on: whatever the client wrote, then its address.
        answers = [live_login(server, f"6.6.6.{attempt}, 203.0.113.7")
                   for attempt in range(LIVE_LOGIN_RATE + 1)]
        other_client = live_login(server, "203.0.113.8")
        the_proxy_itself = live_login(server)  # no header: the connection's address
    finally:
        output = server.stop()
    assert answers == [401] * LIVE_LOGIN_RATE + [429], output
    assert other_client == 401 and the_proxy_itself == 401, output
    assert access_addresses(output) == (
        ["203.0.113.7"] * (LIVE_LOGIN_RATE + 1) + ["203.0.113.8", "127.0.0.1"]), output


@pytest.mark.slow
def test_with_two_proxies_the_address_is_not_taken_one_proxy_too_far(address_cluster):
    """Two proxies, both named in FORWARDED_ALLOW_IPS: the client is the second entry from
    the right (uvicorn skips the trusted inner proxy; DRF counts two), not the inner proxy
    and not anything the client wrote."""
    server = live_server(address_cluster, SYNAPSE_NUM_PROXIES="2",
                         FORWARDED_ALLOW_IPS="127.0.0.1,10.0.0.2")
    try:
        # Client 203.0.113.9 → outer proxy 10.0.0.2 (appends 203.0.113.9) → inner proxy
        # 127.0.0.1 (appends 10.0.0.2) → us; "6.6.6.x" is what the client wrote itself.
        answers = [live_login(server, f"6.6.6.{attempt}, 203.0.113.9, 10.0.0.2")
                   for attempt in range(LIVE_LOGIN_RATE + 1)]
        other_client = live_login(server, "203.0.113.10, 10.0.0.2")
    finally:
        output = server.stop()
    assert answers == [401] * LIVE_LOGIN_RATE + [429], output
    assert other_client == 401, output
    assert access_addresses(output) == (
        ["203.0.113.9"] * (LIVE_LOGIN_RATE + 1) + ["203.0.113.10"]), output
