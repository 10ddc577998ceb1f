"""/auth: register, login (rate-limited), refresh with rotation, logout, me; JWT errors."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import AccessToken

from tests.conftest import PASSWORD, key_client

pytestmark = pytest.mark.django_db


def assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["status"] == status
    assert error["message"]
    if code is not None:
        assert error["code"] == code
    return error


def login(username="alice", password=PASSWORD, client=None):
    return (client or APIClient()).post("/auth/login", {"username": username,
                                                        "password": password}, format="json")


# -- register -----------------------------------------------------------------------------

def register(username: str, password: str = PASSWORD, **fields):
    return APIClient().post("/auth/register", {"username": username, "password": password,
                                               **fields}, format="json")


def test_register_creates_a_user_who_can_log_in():
    response = register("carol", email="carol@example.com")
    assert response.status_code == 201
    body = response.json()
    assert body["username"] == "carol" and "sign in" in body["detail"]
    assert "password" not in body
    carol = get_user_model().objects.get(username="carol")
    assert carol.check_password(PASSWORD)
    assert (carol.email, carol.is_staff, carol.is_superuser) == ("carol@example.com", False,
                                                                 False)
    assert login("carol").status_code == 200


def test_register_is_refused_when_switched_off(settings):
    settings.SYNAPSE = {**settings.SYNAPSE, "ALLOW_REGISTRATION": False}
    response = APIClient().post("/auth/register", {"username": "carol", "password": PASSWORD},
                                format="json")
    assert_error(response, 403, "registration_closed")
    assert not get_user_model().objects.filter(username="carol").exists()


@pytest.mark.parametrize("taken", ["alice", "ALICE"])
def test_registering_a_taken_username_answers_like_a_free_one_and_changes_nothing(alice,
                                                                                  taken):
    """Registration does not tell which usernames exist (taken case-insensitively)."""
    password_hash = alice.password
    on_taken = register(taken, password="another strong passphrase 42")
    on_free = register("carol", password="another strong passphrase 42")
    assert (on_taken.status_code, on_free.status_code) == (201, 201)
    assert (on_taken.json()["detail"], set(on_taken.json())) == (
        on_free.json()["detail"], set(on_free.json()))
    alice.refresh_from_db()
    assert alice.password == password_hash
    assert get_user_model().objects.filter(username__iexact="alice").count() == 1
    assert login(taken, password="another strong passphrase 42").status_code == 401
    assert login("carol", password="another strong passphrase 42").status_code == 200


def test_register_refuses_a_weak_password():
    response = APIClient().post("/auth/register", {"username": "carol", "password": "12345"},
                                format="json")
    error = assert_error(response, 400, "invalid")
    assert "password" in error["fields"]
    assert not get_user_model().objects.filter(username="carol").exists()


def test_register_refuses_unknown_fields_such_as_is_staff():
    response = APIClient().post("/auth/register", {"username": "carol", "password": PASSWORD,
                                                   "is_staff": True}, format="json")
    error = assert_error(response, 400, "invalid")
    assert error["fields"] == {"is_staff": ["Unknown field."]}
    assert not get_user_model().objects.filter(username="carol").exists()


# -- login --------------------------------------------------------------------------------

def test_login_returns_an_access_and_a_refresh_token_that_work(alice):
    response = login()
    assert response.status_code == 200
    tokens = response.json()
    assert set(tokens) == {"access", "refresh"}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens['access']}")
    assert client.get("/auth/me").json()["username"] == "alice"


def test_login_with_a_wrong_password_is_401_in_the_error_shape(alice):
    response = login(password="wrong password")
    assert_error(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_login_without_a_password_is_400_naming_it(alice):
    response = APIClient().post("/auth/login", {"username": "alice"}, format="json")
    assert assert_error(response, 400, "invalid")["fields"] == {
        "password": ["This field is required."]}


def test_login_of_an_inactive_user_is_401(alice):
    alice.is_active = False
    alice.save()
    assert_error(login(), 401)


def test_login_ignores_a_mind_key_in_the_header(alice, alice_key):
    response = login(client=key_client(alice_key[1]))
    assert response.status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['access']}")
    assert client.get("/auth/me").json()["username"] == "alice"


def test_repeated_logins_for_one_username_are_rate_limited_with_retry_after(alice, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login_username": "3/min", "login": "100/min"}}
    for _attempt in range(3):
        assert_error(login(password="wrong password"), 401)
    refused = login()
    error = assert_error(refused, 429, "throttled")
    assert int(refused["Retry-After"]) >= 1
    assert "seconds" in error["message"]
    # Another username from the same address still gets its own attempts.
    assert login("bob-does-not-exist").status_code == 401


def test_logins_from_one_address_are_rate_limited_across_usernames(alice, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **rates, "login_username": "100/min", "login": "4/min"}}
    for number in range(4):
        assert login(f"someone{number}").status_code == 401
    refused = login()
    assert_error(refused, 429, "throttled")
    assert "Retry-After" in refused


# -- refresh and logout -------------------------------------------------------------------

def test_refresh_rotates_the_refresh_token(alice):
    tokens = login().json()
    response = APIClient().post("/auth/refresh", {"refresh": tokens["refresh"]}, format="json")
    assert response.status_code == 200
    rotated = response.json()
    assert set(rotated) == {"access", "refresh"}
    assert rotated["refresh"] != tokens["refresh"]
    again = APIClient().post("/auth/refresh", {"refresh": rotated["refresh"]}, format="json")
    assert again.status_code == 200


def test_a_rotated_refresh_token_cannot_be_reused(alice):
    tokens = login().json()
    client = APIClient()
    assert client.post("/auth/refresh", {"refresh": tokens["refresh"]},
                       format="json").status_code == 200
    reused = client.post("/auth/refresh", {"refresh": tokens["refresh"]}, format="json")
    error = assert_error(reused, 401, "token_not_valid")
    assert "blacklisted" in error["message"].lower()
    assert reused["WWW-Authenticate"].startswith("Bearer")


def refresh(token: str):
    return APIClient().post("/auth/refresh", {"refresh": token}, format="json")


def test_a_password_change_ends_every_refresh_token_issued_before_it(alice):
    before = login().json()
    rotated = refresh(login().json()["refresh"]).json()  # rotation keeps the claim
    alice.set_password("a brand new passphrase 77")  # as the admin and changepassword do
    alice.save()
    for token in (before["refresh"], rotated["refresh"]):
        assert_error(refresh(token), 401, "password_changed")
    # Access tokens issued before the change stop too; signing in again works.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {before['access']}")
    assert client.get("/auth/me").status_code == 401
    fresh = login(password="a brand new passphrase 77").json()
    assert refresh(fresh["refresh"]).status_code == 200


def test_a_refresh_token_of_a_deleted_user_is_401_not_500(alice):
    tokens = login().json()
    alice.delete()
    assert_error(refresh(tokens["refresh"]), 401)


def test_logout_blacklists_the_refresh_token(alice):
    tokens = login().json()
    response = APIClient().post("/auth/logout", {"refresh": tokens["refresh"]}, format="json")
    assert response.status_code == 204
    reused = APIClient().post("/auth/refresh", {"refresh": tokens["refresh"]}, format="json")
    assert_error(reused, 401, "token_not_valid")


def test_logout_with_a_garbage_token_is_401():
    response = APIClient().post("/auth/logout", {"refresh": "not-a-token"}, format="json")
    assert_error(response, 401, "token_not_valid")


def test_logout_with_an_access_token_instead_of_a_refresh_token_is_401(alice):
    tokens = login().json()
    response = APIClient().post("/auth/logout", {"refresh": tokens["access"]}, format="json")
    assert_error(response, 401, "token_not_valid")


def test_logout_without_a_refresh_token_is_400_naming_it():
    response = APIClient().post("/auth/logout", {}, format="json")
    assert assert_error(response, 400, "invalid")["fields"] == {
        "refresh": ["This field is required."]}


def test_refresh_with_unknown_fields_is_400(alice):
    tokens = login().json()
    response = APIClient().post("/auth/refresh", {"refresh": tokens["refresh"], "x": 1},
                                format="json")
    assert assert_error(response, 400, "invalid")["fields"] == {"x": ["Unknown field."]}


# -- access tokens and /auth/me -----------------------------------------------------------

def test_me_describes_the_signed_in_human(human, alice):
    body = human.get("/auth/me").json()
    assert body["id"] == alice.pk
    assert (body["username"], body["email"], body["is_staff"]) == (
        "alice", "alice@example.com", False)


def test_me_without_credentials_is_401_with_www_authenticate():
    response = APIClient().get("/auth/me")
    assert_error(response, 401, "not_authenticated")
    assert "WWW-Authenticate" in response


def test_me_with_a_mind_key_is_403(agent):
    assert_error(agent.get("/auth/me"), 403, "permission_denied")


def test_an_expired_access_token_is_401_in_the_error_shape(alice):
    token = AccessToken.for_user(alice)
    token.set_exp(lifetime=-timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.get("/auth/me")
    error = assert_error(response, 401, "token_not_valid")
    assert set(error) == {"status", "code", "message"}
    assert error["message"] == "Given token not valid for any token type (Token is expired)"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_tampered_access_token_is_401(alice):
    token = str(AccessToken.for_user(alice))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token[:-2]}xx")
    assert_error(client.get("/auth/me"), 401, "token_not_valid")


def test_a_refresh_token_is_not_accepted_as_an_access_token(alice):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {login().json()['refresh']}")
    assert_error(client.get("/auth/me"), 401, "token_not_valid")


def test_an_access_token_of_a_deleted_user_is_401(alice):
    token = AccessToken.for_user(alice)
    alice.delete()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/auth/me").status_code == 401


def test_a_deactivated_user_cannot_refresh(alice):
    tokens = login().json()
    alice.is_active = False
    alice.save()
    response = APIClient().post("/auth/refresh", {"refresh": tokens["refresh"]}, format="json")
    assert_error(response, 401)
