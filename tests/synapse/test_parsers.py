"""JSON bodies on every route: nested without limit, they are still a 400 in the error
shape (synapse.parsers; the bulk routes parse with memories.streaming)."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000


def assert_parse_error(response) -> None:
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (400, "parse_error")


@pytest.mark.parametrize("method, path", [
    ("post", "/memory"), ("post", "/memory/bulk-delete"), ("post", "/memory/sync"),
    ("post", "/memory/mind-import"), ("post", "/memory/compact"),
])
def test_deeply_nested_json_is_400_on_agent_routes(agent, method, path):
    response = getattr(agent, method)(path, DEEP, content_type="application/json")
    assert_parse_error(response)


def test_deeply_nested_json_is_400_on_a_memory_update(agent, remember):
    memory = remember(category="note", key="nested", content="x")
    response = agent.put(f"/memory/{memory.id}", DEEP, content_type="application/json")
    assert_parse_error(response)


def test_deeply_nested_json_is_400_on_login_without_credentials(db):
    response = APIClient().post("/auth/login", DEEP, content_type="application/json")
    assert_parse_error(response)


def test_deeply_nested_objects_are_400_too(agent):
    response = agent.post("/memory", '{"a":' * 50_000, content_type="application/json")
    assert_parse_error(response)


def test_deeply_nested_json_to_a_ui_route_is_never_a_500(alice):
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(alice)
    response = client.post("/ui/login", DEEP, content_type="application/json")
    assert response.status_code < 500


@pytest.mark.parametrize("depth", [100, 900])
def test_a_field_nested_deep_enough_to_break_a_validator_is_400(agent, depth):
    # Python's json parses 900 levels, but formatting such a value into a "not a valid
    # choice" message recurses again: refused by depth before any serializer sees it.
    body = '{"category": ' + "[" * depth + "]" * depth + ', "content": "x"}'
    assert_parse_error(agent.post("/memory", body, content_type="application/json"))
