"""What the schemathesis runs share (test_fuzz.py: the public API; test_fuzz_oauth.py: the
OAuth endpoints): the budget, one operation fuzzed in one generation mode, and the test
connection kept across raw WSGI requests."""

import os
from contextlib import contextmanager

from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

# Examples per operation and generation mode: small in CI, raised by `make fuzz`.
EXAMPLES = int(os.environ.get("SYNAPSE_FUZZ_EXAMPLES", "6"))
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


@contextmanager
def connection_kept_across_requests():
    """Like Django's test client: a raw WSGIHandler would close the test's connection (and
    its transaction) at the end of every request. Enter it after any setup that goes
    through Django's test client, which connects the signals again when each of its
    requests ends."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def fuzz_operation(operation, mode, failures: list[str], *, checks, headers=None,
                   fill=None, label_extra: str = "") -> int:
    """Run ``operation`` in generation ``mode`` with ``checks``, collecting each distinct
    failure in ``failures``; return how many cases were sent. ``fill`` may adjust a
    positive case before it is sent (a mind's id, a registered client's)."""
    label = f"{operation.method.upper()} {operation.path}{label_extra} [{mode}]"
    sent, seen = 0, set()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        nonlocal sent
        if fill is not None and mode is GenerationMode.POSITIVE:
            fill(case)
        sent += 1
        try:
            # Each case in its own savepoint, as each request is its own transaction in
            # production: one failed statement must not poison the cases after it.
            with transaction.atomic():
                case.call_and_validate(headers=headers, checks=checks)
        except (Exception, BaseExceptionGroup) as error:  # noqa: BLE001 - reported together
            text = str(error).strip()
            signature = text.splitlines()[0] if text else type(error).__name__
            if signature not in seen:
                seen.add(signature)
                failures.append(f"{label}: {text[:1500]}")

    try:
        run()
    except Unsatisfiable:
        # An operation with nothing to break — no parameter, no body, no credentials (a
        # metadata document, the public GET /mcp/config/autonomous-agent) — has no
        # negative case at all. (Credentials a route takes are among its headers or
        # cookies.)
        breakable = [*operation.path_parameters, *operation.query, *operation.headers,
                     *operation.cookies, *operation.body]
        if mode is not GenerationMode.NEGATIVE or breakable:
            raise
    return sent
