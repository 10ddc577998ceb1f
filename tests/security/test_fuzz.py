"""Fuzzing /api/schema/ with schemathesis: no 5xx, and every answer as the schema says.

Every operation gets schema-valid (positive) and schema-breaking (negative) cases, once
as an agent (Mind Key) and once as a human (JWT, acting on her mind). The budget per
operation and mode is ``SYNAPSE_FUZZ_EXAMPLES`` (small in CI; ``make fuzz`` raises it).
Rate limits are lifted (the fuzzer is one very fast client); the limits have their own
tests.
"""

import os

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memories.services import memory_store
from tests.security.conftest import jwt_for

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

EXAMPLES = int(os.environ.get("SYNAPSE_FUZZ_EXAMPLES", "6"))
CHECKS = [schemathesis.checks.not_a_server_error, status_code_conformance,
          content_type_conformance, response_headers_conformance, response_schema_conformance,
          negative_data_rejection]


@pytest.fixture(autouse=True)
def connection_kept_across_requests(filled):
    """Like Django's test client: a raw WSGIHandler would close the test's connection
    (and its transaction) at the end of every request. After ``filled``: building the
    tenants goes through Django's test client (their OAuth tokens), which connects the
    signals again when each of its requests ends."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def unthrottled(settings):
    rates = dict.fromkeys(("write", "search", "semantic", "recall", "export", "sync", "import",
                           "login"), "100000/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


def fuzz_operation(operation, mode, headers: dict, mind_id: str | None,
                   failures: list[str]) -> int:
    """Run one operation in one generation mode; return how many cases were sent."""
    takes_mind = any(p.name == "mind" for p in operation.query)
    label = f"{operation.method.upper()} {operation.path} [{mode}]"
    sent, seen = 0, set()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        nonlocal sent
        if mind_id and takes_mind and mode is GenerationMode.POSITIVE:
            case.query = {**(case.query or {}), "mind": mind_id}
        sent += 1
        try:
            # Each case in its own savepoint, as each request is its own transaction in
            # production: one failed statement must not poison the cases after it.
            with transaction.atomic():
                case.call_and_validate(headers=headers, checks=CHECKS)
        except (Exception, BaseExceptionGroup) as error:  # noqa: BLE001 - reported together
            text = str(error).strip()
            signature = text.splitlines()[0] if text else type(error).__name__
            if signature not in seen:
                seen.add(signature)
                failures.append(f"{label}: {text[:1500]}")

    try:
        run()
    except Unsatisfiable:
        # An operation with nothing to break — no parameter, no body, no credentials (the
        # public GET /mcp/config/autonomous-agent) — has no negative case at all.
        # (Credentials a route takes are among its headers or cookies.)
        breakable = [*operation.path_parameters, *operation.query, *operation.headers,
                     *operation.cookies, *operation.body]
        if mode is not GenerationMode.NEGATIVE or breakable:
            raise
    return sent


def fuzz(headers: dict, mind_id: str | None) -> tuple[int, list[str]]:
    schema = schemathesis.openapi.from_wsgi("/api/schema/", WSGIHandler())
    cases, failures = 0, []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            cases += fuzz_operation(operation, mode, headers, mind_id, failures)
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
