"""An agent cannot write server-set fields: every writable route refuses them, rows unchanged.

For each write route of /api/schema/ an agent first sends a plausible body inside a
savepoint that is rolled back (so the route is shown to accept the body as such), then
the same body plus one server-set field: it must be refused with a 400 naming the field,
and the mind's rows re-read from the database must be exactly as before.
"""

import json

import pytest
from django.db import transaction

from memories.models import Memory
from tests.security.conftest import bearer, snapshot
from tests.security.openapi import load_schema, operations

pytestmark = pytest.mark.django_db

SERVER_SET = {"verified": True, "source": "user", "mind_id": "m_someoneelse", "id": "mem_forged1",
              "version": 99, "created_at": "2001-01-01T00:00:00Z",
              "updated_at": "2001-01-01T00:00:00Z"}


class Rollback(Exception):
    pass


def own_value(name: str, path: str, tenant):
    lowered = name.lower()
    if "key" in lowered:
        return tenant.key_ids[0]
    if "mind" in lowered:
        return tenant.mind.id
    return tenant.memory_ids[1]


def agent_write_routes(schema):
    return [op for op in operations(schema) if op.method in ("POST", "PUT", "PATCH")
            and not op.is_public and not op.is_human_only and op.request_schema() is not None]


def test_every_writable_route_refuses_server_set_fields_from_an_agent(tenants):
    tenant = tenants["a1"]
    agent = bearer(tenant.write_key)
    schema = load_schema()
    routes = agent_write_routes(schema)
    assert any(op.label == "POST /memory" for op in routes)
    hints = {"content": "A property probe", "category": "fact", "key": "property_probe",
             "name": "probe", "dry_run": True, "version": 1}
    failures, accepted_bases, tried = [], [], 0
    for op in routes:
        path = op.path
        for name in op.path_params:
            path = path.replace("{" + name + "}", own_value(name, op.path, tenant))
        base = op.example(op.request_schema(), hints)
        if not isinstance(base, dict):
            continue
        try:
            with transaction.atomic():
                base_status = agent.generic(op.method, path, json.dumps(base),
                                            content_type="application/json").status_code
                raise Rollback
        except Rollback:
            pass
        if base_status < 400:
            accepted_bases.append(op.label)
        before = snapshot(tenant)
        for field, value in SERVER_SET.items():
            response = agent.generic(op.method, path, json.dumps({**base, field: value}),
                                     content_type="application/json")
            tried += 1
            error = response.json().get("error", {}) if response.status_code >= 400 else {}
            if response.status_code != 400 or field not in error.get("fields", {}):
                failures.append(f"{op.label} with {field}={value!r}: {response.status_code} "
                                f"{response.content[:200]!r}")
            if snapshot(tenant) != before:
                failures.append(f"{op.label} with {field}={value!r} changed stored rows")
                before = snapshot(tenant)
    print(f"\nproperty authorization: {len(routes)} write routes × {len(SERVER_SET)} fields = "
          f"{tried} requests; bodies accepted without the field on: {accepted_bases}")
    assert {"POST /memory", "PUT /memory/{memory_id}"} <= set(accepted_bases)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("field, value", list(SERVER_SET.items()))
def test_agent_update_with_server_set_field_leaves_the_row_as_it_was(tenants, field, value):
    tenant = tenants["a1"]
    memory_id = tenant.memory_ids[2]
    before = Memory.objects.filter(pk=memory_id).values().get()
    response = bearer(tenant.write_key).put(f"/memory/{memory_id}",
                                            {"content": "rewritten", field: value}, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert Memory.objects.filter(pk=memory_id).values().get() == before
