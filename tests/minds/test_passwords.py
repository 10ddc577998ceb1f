"""Password reset by e-mail (through a real SMTP server) and password change, in the web UI
and the API: every other sign-in ends, Mind Keys keep working (minds.passwords). A reset
request only queues the mail (``QueuedResetMail``); ``drain`` sends it, as the embedding
worker does."""

import io
import logging
import re
import smtplib
from datetime import timedelta

from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from minds.models import QueuedResetMail
from tests.conftest import PASSWORD, key_client
from tests.minds.test_auth_api import assert_error, login

NEW_PASSWORD = "a quite different passphrase 42"
LINK = re.compile(r"(https?://\S+/ui/password-reset/([^/\s]+)/([^/\s]+))")


def drain() -> str:
    """Send the queued reset mail without the worker (``manage.py send_queued_mail``)."""
    out = io.StringIO()
    call_command("send_queued_mail", stdout=out)
    return out.getvalue()


def refuse_smtp(monkeypatch) -> list:
    """Make every SMTP connection fail, and note each one tried."""
    tried = []

    def connect(self, *args, **kwargs):
        tried.append(args)
        raise smtplib.SMTPConnectError(421, b"refused by the test")

    monkeypatch.setattr(smtplib.SMTP, "connect", connect)
    return tried


def signed_in(username: str, password: str = PASSWORD) -> Client:
    """A browser session signed in through the real form (its session records the hash)."""
    client = Client()
    assert client.login(username=username, password=password)
    return client


def tokens(username: str = "alice", password: str = PASSWORD) -> dict:
    response = login(username, password)
    assert response.status_code == 200, response.content
    return response.json()


def me(access: str):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {access}")
    return client.get("/auth/me")


def refresh(refresh_token: str):
    return APIClient().post("/auth/refresh", {"refresh": refresh_token}, format="json")


def assert_every_old_sign_in_ended(old_tokens: dict, other_session: Client) -> None:
    assert me(old_tokens["access"]).status_code == 401
    assert refresh(old_tokens["refresh"]).status_code == 401
    page = other_session.get("/ui/")
    assert page.status_code == 302 and page["Location"].startswith("/ui/login")


def test_a_reset_link_mailed_through_smtp_sets_a_new_password_and_ends_every_sign_in(
        smtp, alice, alice_key):
    old_tokens, other_session = tokens(), signed_in("alice")
    browser = Client()
    response = browser.post("/ui/password-reset", {"email": "ALICE@example.com"})
    assert response.status_code == 302 and response["Location"] == "/ui/password-reset/sent"
    assert smtp.messages == []  # queued: the worker sends it
    assert "sent 1 password-reset mail" in drain()
    assert len(smtp.messages) == 1
    recipients, message = smtp.messages[0]
    assert recipients == ["alice@example.com"]
    assert message["Subject"] == "Reset your Synapse password"
    assert message["From"] == "Synapse <synapse@example.com>"
    link, _uid, _token = smtp.links(LINK)[0]
    assert link.startswith("http://testserver/ui/password-reset/")
    assert '"alice"' in message.get_body(("plain",)).get_content()

    form = browser.get(link)  # Django moves the token into the session, out of the URL
    assert form.status_code == 302 and form["Location"].endswith("/set-password")
    page = browser.get(form["Location"])
    assert page.status_code == 200 and b"Choose a new password" in page.content
    done = browser.post(form["Location"], {"new_password1": NEW_PASSWORD,
                                           "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/ui/password-reset/complete"

    alice.refresh_from_db()
    assert alice.check_password(NEW_PASSWORD) and not alice.check_password(PASSWORD)
    assert_every_old_sign_in_ended(old_tokens, other_session)
    assert login("alice", PASSWORD).status_code == 401
    assert me(tokens("alice", NEW_PASSWORD)["access"]).status_code == 200
    # The mind's credentials are not the person's: the agent keeps working.
    assert key_client(alice_key[1]).get("/memory/recall").status_code == 200
    # The link worked once.
    again = Client().get(link)
    assert again.status_code == 200 and b"This link is not valid" in again.content


def test_the_link_is_built_on_the_public_url_when_one_is_set(smtp, alice, settings):
    settings.PUBLIC_URL = "https://synapse.example.com"
    Client().post("/ui/password-reset", {"email": "alice@example.com"})
    drain()
    assert smtp.links(LINK)[0][0].startswith("https://synapse.example.com/ui/password-reset/")


def test_the_api_answers_the_same_for_an_unknown_address_and_sends_nothing(smtp, alice):
    unknown = APIClient().post("/auth/password-reset", {"email": "nobody@example.com"},
                               format="json")
    known = APIClient().post("/auth/password-reset", {"email": "alice@example.com"},
                             format="json")
    assert unknown.status_code == known.status_code == 202
    assert unknown.json() == known.json()
    drain()
    assert [to for to, _message in smtp.messages] == [["alice@example.com"]]


def test_the_api_sets_the_password_with_the_link_once_and_refuses_bad_tokens(smtp, alice):
    old_tokens, other_session = tokens(), signed_in("alice")
    APIClient().post("/auth/password-reset", {"email": "alice@example.com"}, format="json")
    drain()
    _link, uid, token = smtp.links(LINK)[0]
    confirm = lambda **body: APIClient().post(  # noqa: E731
        "/auth/password-reset/confirm", {"uid": uid, "token": token,
                                         "new_password": NEW_PASSWORD, **body}, format="json")
    weak = assert_error(confirm(new_password="password"), 400)
    assert "new_password" in weak["fields"]
    assert "token" in assert_error(confirm(token=token[:-2] + "xx"), 400)["fields"]
    assert "token" in assert_error(confirm(uid="Mjk5OTk5"), 400)["fields"]
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)  # nothing was changed by a refused request
    ok = confirm()
    assert ok.status_code == 200, ok.content
    assert_every_old_sign_in_ended(old_tokens, other_session)
    assert "token" in assert_error(confirm(new_password="yet another passphrase 7"),
                                   400)["fields"]
    alice.refresh_from_db()
    assert alice.check_password(NEW_PASSWORD)


def test_reset_requests_are_rate_limited_per_client_and_per_mailbox(smtp, alice, bob, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "password_reset": "2/hour"}}
    ask = lambda address, ip="10.0.0.1": APIClient().post(  # noqa: E731
        "/auth/password-reset", {"email": address}, format="json", REMOTE_ADDR=ip)
    assert ask("alice@example.com").status_code == 202
    assert ask("bob@example.com").status_code == 202
    refused = ask("alice@example.com")
    assert_error(refused, 429, "throttled")
    assert int(refused["Retry-After"]) >= 1
    # Another client may not flood alice's mailbox either: one more, then refused.
    assert ask("alice@example.com", "10.0.0.2").status_code == 202
    assert ask("alice@example.com", "10.0.0.3").status_code == 429
    page = Client(REMOTE_ADDR="10.0.0.1").post("/ui/password-reset",
                                               {"email": "bob@example.com"})
    assert page.status_code == 429 and b"Too many reset requests" in page.content
    drain()
    # One queued mail per account at a time: alice's second request joined her first.
    assert sorted(to for to, _message in smtp.messages) == [["alice@example.com"],
                                                            ["bob@example.com"]]


def test_the_request_never_talks_to_smtp_and_the_worker_sends_the_one_mail(
        smtp, alice, monkeypatch):
    tried = refuse_smtp(monkeypatch)
    known = APIClient().post("/auth/password-reset", {"email": "alice@example.com"},
                             format="json")
    unknown = APIClient().post("/auth/password-reset", {"email": "nobody@example.com"},
                               format="json")
    page = Client().post("/ui/password-reset", {"email": "nobody@example.com"})
    assert known.status_code == unknown.status_code == 202 and known.json() == unknown.json()
    assert page.status_code == 302
    assert tried == [] and smtp.messages == []
    # The queue holds who and when (and, in development, the request's origin): no link,
    # no token.
    row = QueuedResetMail.objects.values().get()
    assert row["user_id"] == alice.pk and row["origin"] == "http://testserver"
    assert set(row) == {"id", "user_id", "email", "origin", "created_at", "attempts",
                        "send_after"}

    monkeypatch.undo()
    drain()
    assert [to for to, _message in smtp.messages] == [["alice@example.com"]]
    _link, uid, token = smtp.links(LINK)[0]
    assert token not in str(row)
    assert not QueuedResetMail.objects.exists()
    drain()
    assert len(smtp.messages) == 1
    done = APIClient().post("/auth/password-reset/confirm", {
        "uid": uid, "token": token, "new_password": NEW_PASSWORD}, format="json")
    assert done.status_code == 200, done.content


def test_a_failed_send_is_logged_without_the_link_retried_then_dropped(
        smtp, alice, monkeypatch, caplog):
    APIClient().post("/auth/password-reset", {"email": "alice@example.com"}, format="json")
    tried = refuse_smtp(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="synapse.passwords"):
        drain()
    assert len(tried) == 1
    assert f"password-reset mail for user {alice.pk} not sent (attempt 1 of 5)" in caplog.text
    assert "SMTPConnectError" in caplog.text and "/ui/password-reset/" not in caplog.text
    queued = QueuedResetMail.objects.get()
    assert queued.attempts == 1 and queued.send_after > timezone.now()
    drain()
    assert len(tried) == 1  # not due yet

    monkeypatch.undo()
    QueuedResetMail.objects.update(send_after=timezone.now())
    drain()
    assert len(smtp.messages) == 1 and not QueuedResetMail.objects.exists()

    APIClient().post("/auth/password-reset", {"email": "alice@example.com"}, format="json")
    tried = refuse_smtp(monkeypatch)
    for _attempt in range(5):
        QueuedResetMail.objects.update(send_after=timezone.now() - timedelta(seconds=1))
        drain()
    assert len(tried) == 5 and not QueuedResetMail.objects.exists()
    assert "dropped after 5 attempts" in caplog.text
    assert len(smtp.messages) == 1


def test_a_queued_reset_is_not_sent_to_a_deactivated_account_or_a_changed_address(
        smtp, alice, bob):
    for address in ("alice@example.com", "bob@example.com"):
        APIClient().post("/auth/password-reset", {"email": address}, format="json")
    assert QueuedResetMail.objects.count() == 2
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    bob.email = "bob@elsewhere.example"
    bob.save(update_fields=["email"])
    drain()
    assert smtp.messages == [] and not QueuedResetMail.objects.exists()


def test_in_production_the_link_is_on_the_public_url_whatever_the_host_header(
        smtp, alice, settings, caplog):
    # As with ALLOWED_HOSTS=* (which production now refuses): a stranger's Host gets in.
    settings.PRODUCTION, settings.ALLOWED_HOSTS = True, ["*"]
    settings.PUBLIC_URL = "https://synapse.example.com"
    ask = lambda: Client().post("/ui/password-reset",  # noqa: E731
                                {"email": "alice@example.com"}, HTTP_HOST="evil.example")
    assert ask().status_code == 302
    assert QueuedResetMail.objects.get().origin == ""  # production records no origin
    drain()
    link = smtp.links(LINK)[0][0]
    assert link.startswith("https://synapse.example.com/ui/password-reset/")
    # Without SYNAPSE_PUBLIC_URL (production with EMAIL_HOST refuses to start so): no link
    # at all rather than one on the Host header.
    settings.PUBLIC_URL = ""
    assert ask().status_code == 302
    drain()
    assert "SYNAPSE_PUBLIC_URL is not set" in caplog.text
    assert len(smtp.messages) == 1 and not QueuedResetMail.objects.exists()
    assert not any("evil.example" in body for body in smtp.bodies())


def test_in_development_the_link_is_on_the_origin_the_request_was_made_on(smtp, alice):
    Client().post("/ui/password-reset", {"email": "alice@example.com"},
                  HTTP_HOST="localhost:8000")
    assert QueuedResetMail.objects.get().origin == "http://localhost:8000"
    drain()
    assert smtp.links(LINK)[0][0].startswith("http://localhost:8000/ui/password-reset/")


def test_production_without_smtp_sends_no_link_and_says_why(alice, settings, mailoutbox):
    settings.PRODUCTION, settings.EMAIL_HOST = True, ""
    api = APIClient().post("/auth/password-reset", {"email": "alice@example.com"},
                           format="json")
    assert_error(api, 503, "unavailable")
    assert "EMAIL_HOST" in api.json()["error"]["message"]
    page = Client().post("/ui/password-reset", {"email": "alice@example.com"})
    assert page.status_code == 503 and b"not set up on this server" in page.content
    assert b"Send the link" not in Client().get("/ui/password-reset").content
    assert mailoutbox == []


def test_changing_the_password_over_the_api_ends_every_token_and_session_but_answers_new_ones(
        alice, alice_key):
    old_tokens, other_session = tokens(), signed_in("alice")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {old_tokens['access']}")
    wrong = assert_error(client.post("/auth/password", {
        "current_password": "not it", "new_password": NEW_PASSWORD}, format="json"), 400)
    assert "current_password" in wrong["fields"]
    assert "new_password" in assert_error(client.post("/auth/password", {
        "current_password": PASSWORD, "new_password": "alice"}, format="json"), 400)["fields"]
    changed = client.post("/auth/password", {"current_password": PASSWORD,
                                             "new_password": NEW_PASSWORD}, format="json")
    assert changed.status_code == 200, changed.content
    assert me(changed.json()["access"]).status_code == 200
    assert refresh(changed.json()["refresh"]).status_code == 200
    assert_every_old_sign_in_ended(old_tokens, other_session)
    assert key_client(alice_key[1]).get("/memory/recall").status_code == 200
    # A Mind Key is never a person: it cannot change anyone's password.
    assert_error(key_client(alice_key[1]).post("/auth/password", {
        "current_password": NEW_PASSWORD, "new_password": PASSWORD}, format="json"), 403)


def test_changing_the_password_in_the_web_ui_keeps_this_session_and_ends_the_others(alice):
    browser, other_session, old_tokens = signed_in("alice"), signed_in("alice"), tokens()
    refused = browser.post("/ui/password", {"old_password": "not it",
                                            "new_password1": NEW_PASSWORD,
                                            "new_password2": NEW_PASSWORD})
    assert refused.status_code == 200 and b"has-error" in refused.content
    changed = browser.post("/ui/password", {"old_password": PASSWORD,
                                            "new_password1": NEW_PASSWORD,
                                            "new_password2": NEW_PASSWORD})
    assert changed.status_code == 302 and changed["Location"] == "/ui/password/done"
    assert browser.get("/ui/").status_code == 200
    assert_every_old_sign_in_ended(old_tokens, other_session)
    # The form needs the CSRF token like every other.
    strict = Client(enforce_csrf_checks=True)
    assert strict.login(username="alice", password=NEW_PASSWORD)
    assert strict.post("/ui/password", {"old_password": NEW_PASSWORD,
                                        "new_password1": PASSWORD,
                                        "new_password2": PASSWORD}).status_code == 403
