"""Every route of /api/schema/ × every foreign credential: right status, no leak, no foreign write.

The victim is one mind; the attackers are the other user's keys, OAuth tokens, JWT and
session, the same owner's other mind (key and OAuth token), the victim's own read-only key
and read-only OAuth token on writes, its write key and OAuth token on human-only routes,
revoked, expired and malformed keys and tokens, and no credentials at all. Path
and body ids point at the victim's memories, mind and keys; ``q`` searches for the
victim's words. Each body must be free of the victim's canaries and ids (unless the
attacker sent that id), and the victim's rows must be byte-for-byte what they were.

The victim's own path-scoped key (and path-scoped OAuth token) is one more attacker, on
every route: every memory of its mind outside its path is foreign to it (404 by id, absent
from every answer, never written); its in-scope writes are legitimate, so only the rows
outside its scope must be what they were.
"""

import json
import re
from functools import partial
from urllib.parse import urlencode

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from memories.services import memory_store
from minds.authentication import AgentPrincipal
from minds.models import MindKey
from tests.security.conftest import (
    Tenant,
    bearer,
    jwt_for,
    snapshot,
    snapshot_outside_scope,
)
from tests.security.openapi import Operation, load_schema, operations

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TRIED: dict[str, int] = {}


def victim_value(name: str, path: str, victim: Tenant):
    """What to put in a path parameter (or body field) so it points at the victim."""
    lowered = name.lower()
    if "key" in lowered and "idempot" not in lowered:
        return victim.key_ids[0]
    if "mind" in lowered or (lowered == "id" and path.startswith("/minds")):
        return victim.mind.id
    if "version" in lowered:
        return 1
    if lowered == "user_id":
        return victim.owner.pk
    if lowered == "invitation_id":
        return victim.invitation_ids[0]
    return victim.memory_ids[1]


def body_hints(victim: Tenant) -> dict:
    return {"id": victim.memory_ids[1], "ids": victim.memory_ids, "memory_id":
            victim.memory_ids[1], "mind_id": victim.mind.id, "mind": victim.mind.id,
            "key_id": victim.key_ids[0], "content": "matrix probe", "name": "matrix probe",
            "q": victim.word, "query": victim.word, "version": 1, "dry_run": True,
            "within": "7d", "older_than": "1d", "category": "fact", "key": f"{victim.word}_1",
            # Last writer wins in sync: a far-future write would win if it reached the row.
            "updated_at": "2099-01-01T00:00:00Z", "confirm": victim.mind.name}


def body_text(response) -> str:
    raw = (b"".join(response.streaming_content) if response.streaming
           else response.content)
    return raw.decode("utf-8", "replace")


def victim_export(victim: Tenant) -> dict | None:
    """The victim's own backup, rewritten: importing it elsewhere must not touch the victim."""
    response = bearer(victim.write_key).get("/memory/mind-export", {"format": "json"})
    if response.status_code != 200:
        return None
    text = body_text(response).replace("fact number", "fact overwritten")
    return json.loads(text)


def build_request(op: Operation, victim: Tenant, *, add_mind: bool) -> tuple[str, bytes | None]:
    path = op.path
    for name in op.path_params:
        path = path.replace("{" + name + "}", str(victim_value(name, op.path, victim)))
    hints = body_hints(victim)
    query = {}
    for param in op.parameters("query"):
        name = param["name"]
        if name in ("key", "mind"):
            continue
        if name in ("q", "query", "tag"):
            query[name] = victim.word
        elif param.get("required") or name == "confirm":
            query[name] = op.example(param.get("schema", {}), hints, name)
    if add_mind and op.takes_mind:
        query["mind"] = victim.mind.id
    url = path + ("?" + urlencode(query, doseq=True) if query else "")
    body = None
    request_schema = op.request_schema()
    if op.is_write and request_schema is not None:
        if op.path.endswith("-import") and victim.export is not None:
            example = victim.export
        else:
            example = op.example(request_schema, hints)
        if example == {} and request_schema.get("properties"):
            # No required field (e.g. sync's alternatives): send the first list, filled.
            lists = [(name, node) for name, node in request_schema["properties"].items()
                     if op.resolve(node).get("type") == "array"]
            if lists:
                example = {lists[0][0]: op.example(lists[0][1], hints, None)}
        body = json.dumps(example).encode()
    return url, body


def send(client: APIClient, op: Operation, url: str, body: bytes | None):
    return client.generic(op.method, url, data=body or b"", content_type="application/json")


class QueryKeyClient(APIClient):
    """Sends the Mind Key as ``?key=``, the form some agent runtimes use."""

    def __init__(self, key: str):
        super().__init__()
        self.mind_key = key

    def generic(self, method, path, *args, **kwargs):
        path += ("&" if "?" in path else "?") + urlencode({"key": self.mind_key})
        return super().generic(method, path, *args, **kwargs)


def session_client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def credentials(victim: Tenant, same_owner: Tenant, other_user: Tenant):
    """(name, client, kind): every credential that must not reach the victim's data."""
    yield "other user's Mind Key", bearer(other_user.write_key), "foreign_key"
    yield ("other user's Mind Key in ?key=", QueryKeyClient(other_user.write_key),
           "foreign_query_key")
    yield "other user's read-only Mind Key", bearer(other_user.read_key), "foreign_read_key"
    yield "same owner's other mind's Mind Key", bearer(same_owner.write_key), "foreign_key"
    yield "other user's JWT", bearer(jwt_for(other_user.owner)), "foreign_human"
    yield "other user's session", session_client(other_user.owner), "foreign_human"
    yield "victim's read-only Mind Key", bearer(victim.read_key), "read_only"
    yield "victim's write Mind Key", bearer(victim.write_key), "own_key"
    yield "victim's revoked Mind Key", bearer(victim.revoked_key), "invalid"
    yield "victim's expired Mind Key", bearer(victim.expired_key), "invalid"
    yield "malformed Mind Key", bearer("mk_" + "x" * 10), "invalid"
    # OAuth access tokens (issued through the consent page): one more kind of agent
    # credential, with exactly a Mind Key's reach.
    yield "other user's OAuth token", bearer(other_user.oauth["write"]), "foreign_key"
    yield ("other user's read-only OAuth token", bearer(other_user.oauth["read"]),
           "foreign_read_key")
    yield "same owner's other mind's OAuth token", bearer(same_owner.oauth["write"]), \
        "foreign_key"
    yield "victim's read-only OAuth token", bearer(victim.oauth["read"]), "read_only"
    yield "victim's OAuth token", bearer(victim.oauth["write"]), "own_key"
    yield "victim's revoked OAuth token", bearer(victim.oauth["revoked"]), "invalid"
    yield "victim's expired OAuth token", bearer(victim.oauth["expired"]), "invalid"
    yield "unknown OAuth token", bearer("x" * 30), "invalid"
    yield "no credentials", APIClient(), "none"


def scoped_credentials(victim: Tenant):
    """The victim's own key limited to a path its other memories are not under."""
    yield "victim's path-scoped Mind Key", bearer(victim.scoped_key), "scoped_key"
    yield ("victim's path-scoped Mind Key in ?key=", QueryKeyClient(victim.scoped_key),
           "scoped_query_key")
    yield "victim's path-scoped OAuth token", bearer(victim.oauth["scoped"]), "scoped_key"


def expected_statuses(op: Operation, kind: str) -> set[int] | None:
    """The statuses that are right for this credential on this route; None: any non-5xx."""
    targets_victim = bool(op.path_params)
    if kind in ("none", "invalid"):
        return None if op.is_public else {401}
    if op.is_public:
        return None
    if kind == "read_only":
        return {403} if op.is_write else None
    if kind == "foreign_query_key":
        # ?key= is refused on every write, before whose key it is matters.
        return {401} if op.is_write else expected_statuses(op, "foreign_key")
    if kind == "own_key":
        return {403} if op.is_human_only else None
    if kind == "scoped_query_key":
        return {401} if op.is_write else expected_statuses(op, "scoped_key")
    if kind == "scoped_key":
        # Its own mind, but no memory the paths point at is under its path.
        if op.is_human_only or op.is_whole_mind:
            return {403}
        return {404} if targets_victim else None
    if kind in ("foreign_key", "foreign_read_key"):
        if op.is_human_only or (kind == "foreign_read_key" and op.is_write):
            return {403}
        return {404} if targets_victim or op.takes_mind else None
    if kind == "foreign_human":
        return {404} if targets_victim or op.takes_mind else None
    raise AssertionError(kind)


def applies(op: Operation, kind: str) -> bool:
    # The victim's own keys are only foreign where their power ends.
    if kind == "read_only":
        return op.is_write
    if kind == "own_key":
        return op.is_human_only
    return True


class Rollback(Exception):
    pass


def control_status(op: Operation, victim: Tenant) -> int:
    """What the victim's rightful owner gets for the same request (rolled back at once)."""
    owner = bearer(jwt_for(victim.owner)) if op.is_human_only else bearer(victim.write_key)
    url, body = build_request(op, victim, add_mind=True)
    try:
        with transaction.atomic():
            status = send(owner, op, url, body).status_code
            raise Rollback
    except Rollback:
        return status


def leaked(text: str, victim: Tenant, sent: str, kind: str = "") -> list[str]:
    secrets = victim.secrets_outside_scope if kind.startswith("scoped") else victim.secrets
    return [secret for secret in secrets if secret in text and secret not in sent]


def attack(attackers, schema_ops, controls, victim: Tenant) -> tuple[list[str], int]:
    """Send every route with every credential of ``attackers``: the failures, the count."""
    failures, tried = [], 0
    for name, client, kind in attackers:
        for op in schema_ops:
            if not applies(op, kind):
                continue
            url, body = build_request(op, victim, add_mind=kind != "none")
            response = send(client, op, url, body)
            tried += 1
            where = f"{op.label} as {name} ({url})"
            text = body_text(response)
            sent = url + (body or b"").decode()
            if response.status_code >= 500:
                failures.append(f"{where}: {response.status_code} {text[:200]}")
            expected = expected_statuses(op, kind)
            if expected is not None and controls.get(op.label) == 400:
                # The owner's own request is refused as invalid: so may the attacker's be.
                expected |= {400}
            if expected is not None and response.status_code not in expected:
                failures.append(f"{where}: {response.status_code}, expected {sorted(expected)}"
                                f" {text[:200]}")
            if response.status_code == 401 and not response.has_header("WWW-Authenticate"):
                failures.append(f"{where}: 401 without WWW-Authenticate")
            if leaks := leaked(text, victim, sent, kind):
                failures.append(f"{where}: leaked {leaks} in {text[:300]}")
    return failures, tried


@pytest.mark.parametrize("victim_label, same_owner_label, other_label",
                         [("a1", "a2", "b1"), ("b2", "b1", "a2")])
def test_no_foreign_credential_reaches_the_victims_data(tenants, victim_label, same_owner_label,
                                                        other_label):
    victim, same_owner, other = (tenants[victim_label], tenants[same_owner_label],
                                 tenants[other_label])
    schema_ops = operations(load_schema())
    victim.export = victim_export(victim)
    controls = {op.label: control_status(op, victim) for op in schema_ops if not op.is_public}
    before = snapshot(victim)
    failures, tried = attack(credentials(victim, same_owner, other), schema_ops, controls,
                             victim)
    assert snapshot(victim) == before, "a foreign credential changed the victim's data"
    # The scoped key writes in its own path legitimately: only the rest must stay as it was.
    outside = snapshot_outside_scope(victim)
    scoped_failures, scoped_tried = attack(scoped_credentials(victim), schema_ops, controls,
                                           victim)
    assert snapshot_outside_scope(victim) == outside, \
        "a path-scoped key changed memories outside its path"
    failures += scoped_failures
    tried += scoped_tried
    TRIED[victim_label] = tried
    print(f"\nisolation matrix ({victim_label}): {len(schema_ops)} operations, "
          f"{tried} route × credential requests; the owner's control statuses: {controls}")
    assert not failures, "\n".join(failures)


def numbers(value, prefix="") -> dict[str, float]:
    """Every number in a JSON document, by path (timings and clocks left out)."""
    if isinstance(value, dict):
        found = {}
        for key, inner in value.items():
            found.update(numbers(inner, f"{prefix}.{key}"))
        return found
    if isinstance(value, list):
        found = {f"{prefix}.len": len(value)}
        for index, inner in enumerate(value):
            found.update(numbers(inner, f"{prefix}[{index}]"))
        return found
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {}
    if re.search(r"(ms|seconds|time|latency|uptime|_at)$", prefix):
        return {}
    return {prefix: value}


def test_counts_an_agent_sees_do_not_move_when_another_mind_grows(tenants):
    """Stats, queues, backlogs, recall and lists: no number reflects another tenant's data."""
    observer, victim = tenants["b1"], tenants["a1"]
    routes = [op for op in operations(load_schema())
              if op.method == "GET" and not op.path_params and not op.is_public
              and not any(p.get("required") for p in op.parameters("query"))]
    clients = [("Mind Key", bearer(observer.write_key), {}),
               ("JWT", bearer(jwt_for(observer.owner)), {"mind": observer.mind.id})]

    def observe():
        seen = {}
        for name, client, params in clients:
            for op in routes:
                query = {**params, "format": "json"} if op.path.endswith("/recall") else params
                if not op.takes_mind:
                    query = {k: v for k, v in query.items() if k != "mind"}
                response = client.get(op.path, query)
                if response.get("Content-Type", "").startswith("application/json"):
                    seen[f"{name} {op.label}"] = numbers(json.loads(body_text(response)))
        return seen

    before = observe()
    agent = AgentPrincipal(key=MindKey.objects.get(pk=victim.key_ids[0]))
    for index in range(6):
        memory_store(mind=victim.mind, actor=agent, category="context",
                     key=f"growth_{index}", content=f"More {victim.word} {index}")
    after = observe()
    assert before.keys() == after.keys() and before, "no JSON route observed"
    changed = {route: {k: (before[route].get(k), v) for k, v in after[route].items()
                       if before[route].get(k) != v}
               for route in before if before[route] != after[route]}
    assert not changed, f"another mind's writes changed what this one sees: {changed}"


def mcp_arguments(schema: dict, victim_memory_id: str, word: str) -> dict:
    """Arguments for one MCP tool, aimed at the victim's memory and words."""
    arguments = {}
    for name, node in schema.get("properties", {}).items():
        if name not in schema.get("required", []) and name not in ("query", "q", "memory_id"):
            continue
        kind = node.get("type")
        if "memory" in name or name == "id":
            arguments[name] = victim_memory_id
        elif name in ("query", "q"):
            arguments[name] = word
        elif kind == "string":
            arguments[name] = node.get("enum", ["matrix probe"])[0]
        elif kind == "integer":
            arguments[name] = 10
        elif kind == "array":
            arguments[name] = ["probe"]
        elif kind == "boolean":
            arguments[name] = False
    return arguments


def call_every_tool(server_url: str, key: str, victim_id: str, word: str,
                    canary: str) -> list[dict]:
    """Every tool /mcp lists, called with ``key`` on the victim's memory and words; no
    answer may carry ``canary``. The answers, by tool."""
    import httpx

    headers = {"Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {key}"}

    def rpc(method: str, params: dict, ident: int) -> dict:
        response = httpx.post(f"{server_url}/mcp", headers=headers, timeout=60, json={
            "jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert response.status_code == 200, response.text[:300]
        assert canary not in response.text, (method, params, response.text)
        return response.json()

    tools = rpc("tools/list", {}, 1)["result"]["tools"]
    assert {"recall", "search", "get_memory"} <= {tool["name"] for tool in tools}
    answers = []
    for ident, tool in enumerate(tools, start=2):
        arguments = mcp_arguments(tool.get("inputSchema", {}), victim_id, word)
        answers.append(rpc("tools/call", {"name": tool["name"], "arguments": arguments},
                           ident))
    return answers


def store_canary(server_url: str, key: str, canary: str, **fields) -> str:
    import httpx

    stored = httpx.post(f"{server_url}/memory", json={
        "category": "fact", "key": f"mcp_{canary}",
        "content": f"The xylophone plan {canary} is private", **fields},
        headers={"Authorization": f"Bearer {key}"})
    assert stored.status_code in (200, 201), stored.text
    return stored.json()["id"]


def test_no_mcp_tool_reaches_another_minds_memory(live_cluster):
    """Every tool /mcp lists, called with another mind's key on the victim's memory."""
    from tests.security.live import Server

    attacker_mind = live_cluster.manage("create_mind", "Attacker", "--owner",
                                        live_cluster.username)
    attacker_key = live_cluster.manage("issue_key", attacker_mind, "--name", "attacker")
    server = Server(live_cluster, workers=1, threads=2)
    try:
        canary = "zqmcpcanary"
        victim_id = store_canary(server.url, live_cluster.key, canary)
        tools = call_every_tool(server.url, attacker_key, victim_id, "xylophone", canary)
        print(f"\nMCP isolation: {len(tools)} tools called with another mind's key")
    finally:
        server.stop()


def test_no_mcp_tool_reaches_a_memory_outside_a_scoped_keys_path(live_cluster):
    """Every tool /mcp lists, called with a path-scoped key of the same mind on a memory
    outside its path; the memory in its path stays usable through the tools."""
    import httpx

    from tests.security.live import Server

    scoped_key = live_cluster.manage("issue_key", live_cluster.mind_id, "--name", "scoped",
                                     "--path", "zqmcpscope")
    server = Server(live_cluster, workers=1, threads=2)
    try:
        canary = "zqmcpoutside"
        victim_id = store_canary(server.url, live_cluster.key, canary, path="zqmcpsibling")
        # Stored by the scoped key without a path: in its path.
        inside_id = store_canary(server.url, scoped_key, "zqmcpinside")
        call_every_tool(server.url, scoped_key, victim_id, "xylophone", canary)
        recall = httpx.post(f"{server.url}/mcp", timeout=60, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_memory", "arguments": {"memory_id": inside_id}}},
            headers={"Accept": "application/json, text/event-stream",
                     "Authorization": f"Bearer {scoped_key}"})
        assert "zqmcpinside" in recall.text and "zqmcpscope" in recall.text
        outside = httpx.get(f"{server.url}/memory/{victim_id}",
                            headers={"Authorization": f"Bearer {live_cluster.key}"}).json()
        assert outside["content"] == f"The xylophone plan {canary} is private"
        assert outside["version"] == 1
    finally:
        server.stop()


def ui_paths(victim: Tenant, mind_id: str) -> list[str]:
    """Every /ui/ route with a mind in it, pointed at ``mind_id`` and the victim's objects."""
    from synapse.ui_urls import urlpatterns

    paths = []
    for pattern in urlpatterns:
        route = str(pattern.pattern)
        if "<str:mind_id>" not in route:
            continue
        for action in (["verify", "unverify", "delete", "restore"]
                       if "<str:action>" in route else [None]):
            path = (route.replace("<str:mind_id>", mind_id)
                    .replace("<str:memory_id>", victim.memory_ids[1])
                    .replace("<str:key_id>", victim.key_ids[0])
                    .replace("<str:connection_id>", victim.connection_ids[0])
                    .replace("<str:invitation_id>", victim.invitation_ids[0])
                    .replace("<int:user_id>", str(victim.owner.pk)))
            path = path.replace("<str:action>", action) if action else path
            assert "<" not in path, f"ui_paths does not fill {route}"
            paths.append("/ui/" + path)
    return paths


def test_no_web_page_shows_or_changes_another_users_mind(tenants):
    """Every /ui/ page, GET and POST, from another user's session: 404, nothing leaks, nothing
    changes; also with the attacker's own mind in the path and the victim's memory after it."""
    from django.test import Client

    victim, other = tenants["a1"], tenants["b1"]
    client = Client()
    client.force_login(other.owner)
    before = snapshot(victim)
    failures, tried = [], 0
    form = {"content": "ui probe", "category": "fact", "key": "ui_probe", "name": "ui probe",
            "confirm": victim.mind.name, "ids": victim.memory_ids, "scope": "write"}
    own_mind_foreign_object = [path for path in ui_paths(victim, other.mind.id)
                               if any(object_id in path for object_id in (
                                   victim.memory_ids[1], victim.key_ids[0],
                                   victim.connection_ids[0], victim.invitation_ids[0]))]
    for path in ui_paths(victim, victim.mind.id) + own_mind_foreign_object:
        for method in ("get", "post"):
            response = getattr(client, method)(path, form if method == "post" else None)
            tried += 1
            text = response.content.decode("utf-8", "replace")
            if response.status_code not in (404, 405):
                failures.append(f"{method.upper()} {path}: {response.status_code}")
            if leaks := leaked(text, victim, path + json.dumps(form)):
                failures.append(f"{method.upper()} {path}: leaked {leaks}")
    assert snapshot(victim) == before, "another user's session changed the victim's data"
    print(f"\nweb UI isolation: {tried} page requests from another user's session")
    assert tried and not failures, "\n".join(failures)


# -- Roles: every human route × owner, editor, viewer and a non-member of the mind ----------

def required_action(op: Operation):
    """What the route's OpenAPI role line says it needs (an Action), or None when it names
    no mind ("any signed-in person"); a route without the line fails the test."""
    from minds.access import Action, least_role
    from synapse.api.schema import ANY_SIGNED_IN, ROLE_PREFIX

    lines = [line for line in op.spec.get("description", "").splitlines()
             if line.startswith(ROLE_PREFIX)]
    assert len(lines) == 1, f"{op.label}: no role line in its description"
    said = lines[0].removeprefix(ROLE_PREFIX).removesuffix(".")
    by_words = {least_role(action): action for action in Action}
    assert said in by_words or said == ANY_SIGNED_IN, f"{op.label}: unknown role line {said!r}"
    return by_words.get(said)


def documented_role(op: Operation) -> str:
    """The least role docs/teams.md ("Roles") gives the route, written out independently of
    the views, so a declaration loosened by mistake fails here rather than moving the
    role line and the check together."""
    if re.match(r"^/minds/{mind_id}/(keys|invitations)", op.path) or (
            op.path == "/memory/reset") or (
            op.path.startswith("/minds/{mind_id}") and op.method in ("PATCH", "DELETE")):
        return "owner"
    if op.path.startswith(("/auth/", "/minds", "/invitations")) and "{mind_id}" not in op.path:
        return "any"
    return "viewer" if op.method == "GET" else "editor"


def is_human_route(op: Operation) -> bool:
    """Whether a person (JWT or session) may call it at all."""
    return any("jwtAuth" in requirement for requirement in op.spec.get("security", []))


def rolled_back(request, *args):
    """``request(*args)``'s response, its effects undone (an allowed write must not change
    the world the next role sees)."""
    try:
        with transaction.atomic():
            response = request(*args)
            body_text(response)
            raise Rollback(response)
    except Rollback as undone:
        return undone.args[0]


def role_verdict(role: str, action, control: int, response, text: str,
                 sent: str, team) -> str | None:
    """Why ``response`` is wrong for ``role`` on a route needing ``action`` (None: right).
    An allowed role gets what the owner got; a member whose role may not, a 403
    ``insufficient_role``; a non-member, a 404 without a byte of the mind."""
    from minds.access import allows

    status = response.status_code
    if role == "non-member":
        leaks = [secret for secret in team.secrets if secret in text and secret not in sent]
        if leaks:
            return f"leaked {leaks} in {text[:300]}"
        if action is not None and status != 404:
            return f"{status}, expected 404 {text[:200]}"
        if action is None and status != control:
            return f"{status}, the owner got {control} {text[:200]}"
        return None
    if action is None or allows(role, action):
        return None if status == control else f"{status}, the owner got {control} {text[:200]}"
    if status != 403 or '"insufficient_role"' not in text:
        return f"{status}, expected 403 insufficient_role {text[:200]}"
    return None


def test_every_human_route_gives_each_role_exactly_what_it_allows(team):
    """Each operation a person may call, as the owner, an editor, a viewer and a signed-in
    non-member: allowed roles get what the owner gets (their writes rolled back), refused
    members a 403 ``insufficient_role`` and no change, non-members a 404 and not a byte of
    the mind. What each route allows is read from its OpenAPI role line, so the docs and
    the check cannot drift apart."""
    from minds.access import LEAST_ROLE, allows
    from tests.security.conftest import ROLES, team_snapshot

    victim = team.tenant
    schema_ops = [op for op in operations(load_schema()) if is_human_route(op)]
    victim.export = victim_export(victim)
    clients = {role: bearer(jwt_for(team.people[role])) for role in ROLES}
    before = team_snapshot(team)
    failures, tried = [], 0
    for op in schema_ops:
        action = required_action(op)
        said = "any" if action is None else LEAST_ROLE[action]
        if said != documented_role(op):
            failures.append(f"{op.label}: needs {said}, docs/teams.md says "
                            f"{documented_role(op)}")
        url, body = build_request(op, victim, add_mind=True)
        sent = url + (body or b"").decode()
        control = rolled_back(send, clients["owner"], op, url, body).status_code
        # (A 404 can be right for the owner: an object in the path the fixture lacks.)
        if action is not None and control == 403:
            failures.append(f"{op.label}: the owner's own request got {control}")
        for role in ROLES[1:]:
            refused = action is not None and not allows(
                None if role == "non-member" else role, action)
            # A refused request runs for real: the snapshot below proves it wrote nothing.
            response = (send if refused else partial(rolled_back, send))(
                clients[role], op, url, body)
            tried += 1
            if why := role_verdict(role, action, control, response, body_text(response),
                                   sent, team):
                failures.append(f"{op.label} as {role} ({url}): {why}")
    if team_snapshot(team) != before:
        failures.append("a refused role changed the mind")
    print(f"\nrole matrix (API): {len(schema_ops)} human operations × {len(ROLES)} roles, "
          f"{tried} requests besides the owner's")
    assert len(schema_ops) > 40 and not failures, "\n".join(failures)


def ui_required_action(path: str, method: str):
    """What a /ui/ page needs, as its view declares it (minds.views.MindView.mind_action)."""
    from django.urls import resolve

    from minds.access import Action

    view = resolve(path).func.view_class
    declared = view.mind_action
    if isinstance(declared, dict):
        declared = declared.get(method.upper())
    if declared is not None:
        return declared
    return Action.READ if method == "get" else Action.WRITE


# Pages that must need a mind's owner whatever their view says (the role table of
# docs/teams.md), so a declaration loosened by mistake fails here too.
OWNER_PAGES = {"keys", "key-revoke", "connections", "connection-revoke", "connect",
               "settings", "mind-delete", "reset"}


def test_every_web_page_and_form_gives_each_role_exactly_what_it_allows(team):
    """Every /ui/minds/<id>/… page, GET and POST, as the owner, an editor, a viewer and a
    signed-in non-member: allowed roles get what the owner gets (writes rolled back),
    refused members the 403 page and no change, non-members the 404 page and not a byte
    of the mind."""
    from django.test import Client
    from django.urls import resolve

    from minds.access import Action, allows
    from tests.security.conftest import ROLES, team_snapshot

    victim = team.tenant
    clients = {}
    for role in ROLES:
        clients[role] = Client()
        clients[role].force_login(team.people[role])
    form = {"content": "ui probe", "category": "fact", "key": "ui_probe", "name": "ui probe",
            "confirm": victim.mind.name, "ids": [f"{victim.memory_ids[1]}:1"],
            "version": "1", "scope": "write", "path": "ui/probe"}
    before = team_snapshot(team)
    failures, tried = [], 0
    for path in ui_paths(victim, victim.mind.id):
        for method in ("get", "post"):
            action = ui_required_action(path, method)
            if resolve(path).url_name in OWNER_PAGES and action != Action.MANAGE:
                failures.append(f"{method.upper()} {path}: declared {action}, not manage")
            data = form if method == "post" else None
            control = rolled_back(getattr(clients["owner"], method), path, data).status_code
            for role in ROLES[1:]:
                refused = not allows(None if role == "non-member" else role, action)
                request = getattr(clients[role], method)
                response = request(path, data) if refused and control != 405 else \
                    rolled_back(request, path, data)
                tried += 1
                text = response.content.decode("utf-8", "replace")
                status = response.status_code
                where = f"{method.upper()} {path} as {role}"
                if control == 405:
                    why = None if status == 405 else f"{status}, the owner got 405"
                elif role == "non-member":
                    why = None if status == 404 else f"{status}, expected 404"
                elif refused:
                    why = None if status == 403 and "Not allowed" in text else \
                        f"{status}, expected the 403 page"
                else:
                    why = None if status == control else f"{status}, the owner got {control}"
                if why:
                    failures.append(f"{where}: {why}")
                if role == "non-member" and (leaks := [
                        secret for secret in team.secrets
                        if secret in text and secret not in path + json.dumps(form)]):
                    failures.append(f"{where}: leaked {leaks}")
    if team_snapshot(team) != before:
        failures.append("a refused role changed the mind")
    print(f"\nrole matrix (web UI): {tried} page requests besides the owner's")
    assert tried and not failures, "\n".join(failures)


def test_membership_changes_leave_agents_keys_alone_but_a_removed_owners(team):
    """Removing an editor revokes nothing; removing an owner revokes the Mind Keys they
    issued on the mind (and only those): docs/teams.md, "Roles"."""
    from minds.models import Membership, Role
    from minds.services import key_issue, member_add, member_remove, member_set_role

    victim = team.tenant
    owner, editor = team.people["owner"], team.people["editor"]
    keys = [victim.write_key, victim.read_key, victim.scoped_key]
    member_remove(membership=Membership.objects.get(mind=victim.mind, user=editor),
                  actor=owner)
    assert [bearer(key).get("/memory/stats").status_code for key in keys] == [200] * 3
    assert bearer(victim.oauth["write"]).get("/memory/stats").status_code == 200
    # A second owner's keys go with them; the first owner's stay.
    viewer = team.people["viewer"]
    member_set_role(membership=Membership.objects.get(mind=victim.mind, user=viewer),
                    role=Role.OWNER, actor=owner)
    _row, second_owners_key = key_issue(mind=victim.mind, name="second", created_by=viewer)
    assert bearer(second_owners_key).get("/memory/stats").status_code == 200
    member_remove(membership=Membership.objects.get(mind=victim.mind, user=viewer),
                  actor=owner)
    assert bearer(second_owners_key).get("/memory/stats").status_code == 401
    assert [bearer(key).get("/memory/stats").status_code for key in keys] == [200] * 3
    # The first owner removed (another owner remains): their keys and connections end.
    member_add(mind=victim.mind, user=viewer, role=Role.OWNER, actor=owner)
    member_remove(membership=Membership.objects.get(mind=victim.mind, user=owner),
                  actor=viewer)
    assert [bearer(key).get("/memory/stats").status_code for key in keys] == [401] * 3
    assert bearer(victim.oauth["write"]).get("/memory/stats").status_code == 401
