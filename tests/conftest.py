"""The small cast: alice owns a mind her agent writes to; bob owns another tenant. And a
real SMTP server (``smtp``) for the tests of mail."""

import email
import re
import socket
from contextlib import contextmanager
from email import policy

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken

from memories.services import memory_store
from minds.authentication import AgentPrincipal
from minds.services import key_issue, mind_create

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _no_rate_limit_sweep(monkeypatch):
    """The rate-limit table is swept on one request in a thousand, at random: never in a
    test, so that a request issues the same queries every time (query-count tests)."""
    monkeypatch.setattr("synapse.throttling.SWEEP_CHANCE", 0.0)


def make_user(username: str):
    return get_user_model().objects.create_user(username, password=PASSWORD,
                                                email=f"{username}@example.com")


def key_client(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def session_client(user) -> Client:
    """A browser-like client signed in as ``user`` (web UI and admin)."""
    client = Client()
    client.force_login(user)
    return client


def text(response) -> str:
    """The body of a web page response."""
    return response.content.decode()


def action(client, url: str, name: str, ids: list[str]):
    """Run the Django admin action ``name`` of the changelist at ``url`` on ``ids``."""
    return client.post(url, {"action": name, "_selected_action": ids, "index": 0},
                       follow=True)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@contextmanager
def planner_without(*settings: str):
    """The planner with these kinds of plan priced out (``enable_seqscan`` …) on the test's
    connection, and put back after: a test asks whether an index *can* serve a query, not
    which plan a tiny, busy test database favours."""
    with connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(f"SET {setting} = off")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for setting in settings:
                cursor.execute(f"RESET {setting}")


@contextmanager
def statements_sent():
    """The statements (SQL, parameters) the test's connection sends inside the block, in
    order: to replay one under EXPLAIN."""
    sent: list[tuple[str, list]] = []

    def keep(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        yield sent


def plan_nodes(sql: str, params, *, analyze: bool = False) -> list[dict]:
    """Every node of the plan PostgreSQL makes for a statement (run, with ``analyze``),
    flattened: for tests that ask which index a statement reads, or whether a part ran."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ({'ANALYZE, ' if analyze else ''}FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0][0]["Plan"]

    def walk(node):
        yield node
        for child in node.get("Plans", ()):
            yield from walk(child)

    return list(walk(plan))


def jwt_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {RefreshToken.for_user(user).access_token}")
    return client


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, and before it drops the test database: the connections that
    synapse.db.beside keeps on threads of its own (hybrid search answered by a live
    server) closed."""
    yield
    from synapse.db import close_beside

    with django_db_blocker.unblock():
        close_beside()


@pytest.fixture
def alice(db):
    return make_user("alice")


@pytest.fixture
def alice_mind(alice):
    return mind_create(owner=alice, name="Alice's Mind")


@pytest.fixture
def alice_key(alice_mind, alice):
    """(MindKey, plaintext) with write scope."""
    return key_issue(mind=alice_mind, name="alice agent", created_by=alice)


@pytest.fixture
def agent(alice_key) -> APIClient:
    """An API client authenticated with alice's write key."""
    return key_client(alice_key[1])


@pytest.fixture
def reader(alice_mind, alice) -> APIClient:
    """An API client with a read-only key of alice's mind."""
    _key, plaintext = key_issue(mind=alice_mind, name="reader", scope="read", created_by=alice)
    return key_client(plaintext)


@pytest.fixture
def human(alice) -> APIClient:
    """alice herself, with a JWT."""
    return jwt_client(alice)


@pytest.fixture
def owner(alice) -> Client:
    """alice, signed in to the web UI."""
    return session_client(alice)


@pytest.fixture
def ui(alice_mind):
    """URL of a page of alice's mind in the web UI."""
    return lambda tail="": f"/ui/minds/{alice_mind.id}/{tail}"


@pytest.fixture
def staff(db):
    """A superuser signed in to the admin (``staff.user`` is the account)."""
    user = get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    client = session_client(user)
    client.user = user
    return client


@pytest.fixture
def bob(db):
    return make_user("bob")


@pytest.fixture
def bob_mind(bob):
    return mind_create(owner=bob, name="Bob's Mind")


@pytest.fixture
def bob_agent(bob_mind, bob) -> APIClient:
    return key_client(key_issue(mind=bob_mind, name="bob agent", created_by=bob)[1])


@pytest.fixture
def remember(alice_key):
    """Store a memory in alice's mind as her agent, through the service."""
    principal = AgentPrincipal(key=alice_key[0])

    def _remember(mind=None, actor=None, **fields):
        fields.setdefault("category", "fact")
        fields.setdefault("content", "Something worth remembering")
        return memory_store(mind=mind or alice_key[0].mind, actor=actor or principal,
                            expires_given="expires_at" in fields, **fields).memory

    return _remember


class Inbox:
    """What the SMTP server received: parsed messages."""

    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        message = email.message_from_bytes(envelope.content, policy=policy.default)
        self.messages.append((envelope.rcpt_tos, message))
        return "250 OK"

    def bodies(self) -> list[str]:
        return [message.get_body(("plain",)).get_content() for _to, message in self.messages]

    def links(self, pattern: re.Pattern) -> list[tuple[str, ...]]:
        """The groups of ``pattern`` in each message's plain-text body."""
        return [pattern.search(body).groups() for body in self.bodies()]


@pytest.fixture
def smtp(settings):
    """A real SMTP server on a free local port, and Django sending through it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.DEFAULT_FROM_EMAIL = "Synapse <synapse@example.com>"
    try:
        yield inbox
    finally:
        controller.stop()
