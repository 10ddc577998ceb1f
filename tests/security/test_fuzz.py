"""Fuzzing /api/schema/ with schemathesis: no 5xx, and every answer as the schema says.

Every operation gets schema-valid (positive) and schema-breaking (negative) cases, once
as an agent (Mind Key) and once as a human (JWT, acting on her mind). The budget per
operation and mode is ``SYNAPSE_FUZZ_EXAMPLES`` (small in CI; ``make fuzz`` raises it).
Rate limits are lifted (the fuzzer is one very fast client); the limits have their own
tests.
"""

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memories.services import memory_store
from tests.security.conftest import jwt_for
from tests.security.fuzzing import MODES, connection_kept_across_requests, fuzz_operation

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

CHECKS = [schemathesis.checks.not_a_server_error, status_code_conformance,
          content_type_conformance, response_headers_conformance, response_schema_conformance,
          negative_data_rejection]


@pytest.fixture(autouse=True)
def connection_kept(filled):
    """After ``filled``: building the tenants goes through Django's test client (their
    OAuth tokens)."""
    with connection_kept_across_requests():
        yield


@pytest.fixture
def unthrottled(settings):
    rates = dict.fromkeys(("write", "search", "semantic", "recall", "export", "sync", "import",
                           "login"), "100000/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


def with_mind(operation, mind_id: str | None):
    """A ``fill``: a positive case of a route taking ``?mind=`` names the human's mind."""
    if not mind_id or not any(p.name == "mind" for p in operation.query):
        return None

    def fill(case):
        case.query = {**(case.query or {}), "mind": mind_id}
    return fill


def fuzz(headers: dict, mind_id: str | None) -> tuple[int, list[str]]:
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    cases, failures = 0, []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in MODES:
            cases += fuzz_operation(operation, mode, failures, checks=CHECKS,
                                    headers=headers, fill=with_mind(operation, mind_id))
    return cases, failures


@pytest.fixture
def filled(tenants):
    tenant = tenants["a1"]
    for index in range(3):
        memory_store(mind=tenant.mind, actor=tenant.owner, category="project",
                     key=f"fuzz_{index}", content=f"Fuzz seed {index}")
    return tenant


def test_fuzzing_as_an_agent_finds_no_server_error_and_no_schema_violation(filled,
                                                                           unthrottled):
    cases, failures = fuzz({"Authorization": f"Bearer {filled.write_key}"}, None)
    print(f"\nfuzz as agent: {cases} cases, {len(failures)} failures")
    assert cases > 0
    assert not failures, "\n\n".join(failures)


def test_fuzzing_as_a_human_finds_no_server_error_and_no_schema_violation(filled,
                                                                          unthrottled):
    cases, failures = fuzz({"Authorization": f"Bearer {jwt_for(filled.owner)}"},
                           filled.mind.id)
    print(f"\nfuzz as human: {cases} cases, {len(failures)} failures")
    assert cases > 0
    assert not failures, "\n\n".join(failures)
