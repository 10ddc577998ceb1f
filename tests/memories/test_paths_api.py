"""``path=`` on every route that takes it, through the API: the path and everything below
it (by segment: ``projects/ab`` is not under ``projects/a``), never another mind's memories
on the same path; a path with no normal form is a 400 in the one error shape on each route;
``memory_type=`` narrows the lists, recall and searches the same way.

ROUTES is the table of the routes that list memories filtered by prefix; OTHER_PATH_ROUTES
those that take a path too but count (stats) or give it another meaning (the timeline:
exactly one path)."""

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from memories.embeddings import embed_batch
from memories.paths import MAX_DEPTH, MAX_PATH_LENGTH, MAX_SEGMENT_LENGTH
from memories.services import memory_store
from minds.authentication import AgentPrincipal
from minds.models import Mind
from minds.services import key_issue, mind_create
from tests.conftest import jwt_client, key_client

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

# key → (path, memory_type) in alice's mind. Every memory is current, unverified (an agent
# wrote it), tagged "shared", says "launch" and expires within the expiring window, so each
# route below could list every one of them: only the filters tell them apart.
ALICE = {
    "root": ("", "semantic"),
    "a": ("projects/a", "semantic"),
    "a_turn": ("projects/a", "episodic"),
    "a_decision": ("projects/a/decisions", "procedural"),
    "ab": ("projects/ab", "semantic"),  # shares the prefix string, not the segment
    "b": ("projects/b", "working"),
    "other": ("other", "semantic"),
}
# Bob's mind has memories on the very same paths.
BOB = {
    "bob_root": ("", "semantic"),
    "bob_a": ("projects/a", "semantic"),
    "bob_a_decision": ("projects/a/decisions", "procedural"),
    "bob_ab": ("projects/ab", "semantic"),
}


def keys_under(memories: dict, path: str, memory_type: str | None = None) -> set[str]:
    return {key for key, (at, kind) in memories.items()
            if (not path or at == path or at.startswith(path + "/"))
            and (memory_type is None or kind == memory_type)}


# -- Reading each route's answer -----------------------------------------------------------

def results(response) -> set[str]:
    return {item["key"] for item in response.json()["results"]}


BLOCK_HEADER = re.compile(r"^\[\d{3}\] ")


def recall_text(response) -> set[str]:
    """The keys of a text recall: the first line of each block after its header line."""
    lines = response.content.decode().splitlines()
    return {lines[number + 1].strip() for number, line in enumerate(lines)
            if BLOCK_HEADER.match(line)}


def recall_json(response) -> set[str]:
    return {item["key"] for item in response.json()["memories"]}


def diff(response) -> set[str]:
    body = response.json()
    assert body["deleted"] == [] and not body["has_more"]
    return {item["key"] for item in body["added"] + body["updated"]}


def streamed(response) -> str:
    return b"".join(response.streaming_content).decode()


def export_json(response) -> set[str]:
    return {item["key"] for item in json.loads(streamed(response))["memories"]}


def export_csv(response) -> set[str]:
    return {row["key"] for row in csv.DictReader(io.StringIO(streamed(response)))}


KEY, HUMAN = "key", "human"  # a Mind Key, or the mind's owner with a JWT (and ?mind=)


@dataclass(frozen=True)
class Route:
    name: str
    auth: str
    url: str
    params: dict
    read: object  # response → the set of keys it lists
    memory_type: bool  # takes memory_type= too
    semantic: bool  # needs the memories embedded

    def __str__(self):
        return self.name


Q = {"q": "launch", "limit": 50}
JSON = {"format": "json"}
CSV = {"format": "csv"}
BUDGET = {"budget": 100_000}

# Every route whose path= means "this path and everything below it".
ROUTES = [
    #     name                        auth   url                        params
    #     read          memory_type= semantic
    Route("list",                     KEY,   "/memory",                 {},
          results,      True,        False),
    Route("recall text",              KEY,   "/memory/recall",          {},
          recall_text,  True,        False),
    Route("recall text, budget",      KEY,   "/memory/recall",          BUDGET,
          recall_text,  True,        False),
    Route("recall json",              KEY,   "/memory/recall",          JSON,
          recall_json,  True,        False),
    Route("recall json, budget",      KEY,   "/memory/recall",          {**JSON, **BUDGET},
          recall_json,  True,        False),
    Route("recall ranked by q",       KEY,   "/memory/recall",          {**JSON, "q": "launch"},
          recall_json,  True,        True),
    Route("search keyword",           KEY,   "/memory/search",          Q,
          results,      True,        False),
    Route("search semantic",          KEY,   "/memory/search",          {**Q, "mode": "semantic"},
          results,      True,        True),
    Route("search hybrid",            KEY,   "/memory/search",          {**Q, "mode": "hybrid"},
          results,      True,        True),
    Route("semantic-search",          KEY,   "/memory/semantic-search", Q,
          results,      True,        True),
    Route("by-tag",                   KEY,   "/memory/by-tag",          {"tag": "shared"},
          results,      True,        False),
    Route("expiring",                 KEY,   "/memory/expiring",        {},
          results,      True,        False),
    Route("queue",                    KEY,   "/memory/unverified",      {},
          results,      True,        False),
    Route("queue",                    HUMAN, "/memory/unverified",      {},
          results,      True,        False),
    Route("diff",                     KEY,   "/memory/diff",            {},
          diff,         False,       False),
    Route("diff",                     HUMAN, "/memory/diff",            {},
          diff,         False,       False),
    Route("export json",              KEY,   "/memory/mind-export",     {},
          export_json,  False,       False),
    Route("export json",              HUMAN, "/memory/mind-export",     {},
          export_json,  False,       False),
    Route("export csv",               KEY,   "/memory/mind-export",     CSV,
          export_csv,   False,       False),
    Route("export csv, /mind/export", KEY,   "/mind/export",            CSV,
          export_csv,   False,       False),
]
# stats counts rather than lists (its own tests below); the timeline takes exactly one path.
OTHER_PATH_ROUTES = [
    Route("stats",                    KEY,   "/memory/stats",           {},
          None,         True,        False),
    Route("stats",                    HUMAN, "/memory/stats",           {},
          None,         True,        False),
    Route("timeline",                 KEY,   "/memory/timeline",        {},
          None,         False,       False),
]


def route_id(route: Route) -> str:
    return f"{route.name} ({route.auth})"


@dataclass
class Caller:
    """A mind and its two kinds of callers: its agent (Mind Key) and its owner (JWT)."""

    mind: Mind
    agent: object
    owner: object
    principal: AgentPrincipal

    def get(self, url: str, params: dict, *, human: bool = False):
        if human:
            return self.owner.get(url, {**params, "mind": self.mind.id})
        return self.agent.get(url, params)

    def ask(self, route: Route, **params):
        return self.get(route.url, {**route.params, **params}, human=route.auth == HUMAN)

    def keys(self, route: Route, **params) -> set[str]:
        response = self.ask(route, **params)
        assert response.status_code == 200, response.content
        return route.read(response)


def make_caller(name: str) -> Caller:
    # No password: hashing one costs a second, and a JWT needs none.
    owner = get_user_model().objects.create_user(name, email=f"{name}@example.com")
    mind = mind_create(owner=owner, name=f"{name.title()}'s Mind")
    key, plaintext = key_issue(mind=mind, name=f"{name} agent", created_by=owner)
    return Caller(mind=mind, agent=key_client(plaintext), owner=jwt_client(owner),
                  principal=AgentPrincipal(key=key))


def fill(caller: Caller, memories: dict, *, embed: bool) -> Caller:
    expires = timezone.now() + timedelta(days=2)
    for key, (path, memory_type) in memories.items():
        moment = {"occurred_at": T0} if memory_type == "episodic" else {}
        memory_store(mind=caller.mind, actor=caller.principal, category="note", key=key,
                     content=f"The launch plan, as kept at {path or 'the root'} ({key})",
                     tags=["shared"], expires_at=expires, expires_given=True,
                     memory_type=memory_type, path=path, **moment)
    if embed:
        embed_batch(limit=100, mind=caller.mind)  # the real model, loaded once a process
    return caller


@pytest.fixture
def places(db):
    """``places(route)``: alice's and bob's minds filled (ALICE, BOB), embedded when the
    route searches by meaning."""
    return lambda route=None: (
        fill(make_caller("alice"), ALICE, embed=getattr(route, "semantic", True)),
        fill(make_caller("bob"), BOB, embed=getattr(route, "semantic", True)))


@pytest.fixture
def caller(db) -> Caller:
    """An empty mind (for refusals)."""
    return make_caller("carol")


# -- The prefix, on every route ---------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_a_path_lists_that_path_and_below_and_nothing_else(places, route):
    alice, bob = places(route)
    # Without a path the route lists the whole mind (so the filter is what narrows it) …
    assert alice.keys(route) == set(ALICE)
    # … with one, that path and below: not projects/ab, not bob's memories on projects/a.
    assert alice.keys(route, path="projects/a") == {"a", "a_turn", "a_decision"}
    assert alice.keys(route, path="projects/a/decisions") == {"a_decision"}
    assert alice.keys(route, path="projects/ab") == {"ab"}
    assert alice.keys(route, path="projects") == keys_under(ALICE, "projects")
    assert alice.keys(route, path="projects/c") == set()
    assert alice.keys(route, path="proj") == set()  # a prefix of a segment is nothing
    assert bob.keys(route, path="projects/a") == {"bob_a", "bob_a_decision"}


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_a_path_is_taken_in_its_normal_form(places, route):
    alice, _bob = places(route)
    for given in ("/Projects/A/", "PROJECTS/a", " projects/a/ "):
        assert alice.keys(route, path=given) == {"a", "a_turn", "a_decision"}, given
    # Blank and "/" are the root: the whole mind.
    assert alice.keys(route, path="") == set(ALICE)
    assert alice.keys(route, path="/") == set(ALICE)


@pytest.mark.parametrize("route", [r for r in ROUTES if r.memory_type], ids=route_id)
def test_memory_type_narrows_alone_and_with_a_path(places, route):
    alice, bob = places(route)
    assert alice.keys(route, memory_type="procedural") == {"a_decision"}
    assert alice.keys(route, memory_type="semantic") == keys_under(ALICE, "", "semantic")
    assert alice.keys(route, memory_type="semantic", path="projects/a") == {"a"}
    assert alice.keys(route, memory_type="episodic", path="projects/a") == {"a_turn"}
    assert alice.keys(route, memory_type="working", path="projects/a") == set()
    assert alice.keys(route, memory_type="working") == {"b"}
    assert alice.keys(route, memory_type="identity") == set()
    assert bob.keys(route, memory_type="procedural") == {"bob_a_decision"}


@pytest.mark.parametrize("route", [r for r in ROUTES + OTHER_PATH_ROUTES if r.memory_type],
                         ids=route_id)
def test_an_unknown_memory_type_is_400_naming_it(caller, route):
    response = caller.ask(route, memory_type="dream")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["status"], error["code"]) == (400, "invalid")
    assert list(error["fields"]) == ["memory_type"]


@pytest.mark.parametrize("route", [r for r in ROUTES + OTHER_PATH_ROUTES
                                   if not r.memory_type], ids=route_id)
def test_routes_without_a_type_filter_refuse_one_rather_than_ignore_it(caller, route):
    response = caller.ask(route, memory_type="semantic")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["memory_type"]


# -- Recall names the path -------------------------------------------------------------------

@pytest.mark.parametrize("params", [{}, BUDGET], ids=["whole", "budget"])
def test_recall_text_names_the_path_under_the_mind(places, params):
    alice, _bob = places()
    lines = alice.agent.get("/memory/recall", {**params, "path": "/Projects/A"}
                            ).content.decode().splitlines()
    assert lines[:3] == ["Mind: Alice's Mind", "Path: projects/a",
                         "Memories: 3 total (0 verified, 3 unverified)"]
    whole = alice.agent.get("/memory/recall", params).content.decode()
    assert "Path:" not in whole
    assert f"Memories: {len(ALICE)} total" in whole


def test_recall_json_counts_only_the_path(places):
    alice, _bob = places()
    body = alice.agent.get("/memory/recall", {**JSON, "path": "projects/a"}).json()
    assert (body["total"], body["verified"], body["unverified"]) == (3, 0, 3)


# -- stats -----------------------------------------------------------------------------------

def by_type(memories: dict, path: str) -> dict:
    counts = dict.fromkeys(("semantic", "episodic", "procedural", "working", "identity"), 0)
    for key in keys_under(memories, path):
        counts[memories[key][1]] += 1
    return counts


@pytest.mark.parametrize("route", OTHER_PATH_ROUTES[:2], ids=route_id)
def test_stats_count_only_the_path_and_below(places, route):
    alice, bob = places(route)
    for path in ("projects/a", "projects/ab", "projects", "projects/a/decisions"):
        body = alice.ask(route, path=path).json()
        expected = keys_under(ALICE, path)
        assert (body["total"], body["unverified"]) == (len(expected), len(expected)), path
        assert body["by_memory_type"] == by_type(ALICE, path), path
        assert body["by_category"]["note"] == len(expected)
        assert body["purged"] is None  # narrowed: tombstones are not counted
    whole = alice.ask(route).json()
    assert whole["total"] == len(ALICE) and whole["purged"] == 0
    assert bob.ask(route, path="projects/a").json()["total"] == 2


def test_stats_count_one_type_under_a_path(places):
    alice, _bob = places()
    body = alice.agent.get("/memory/stats", {"path": "projects/a",
                                             "memory_type": "episodic"}).json()
    assert body["total"] == 1
    assert body["by_memory_type"] == {"semantic": 0, "episodic": 1, "procedural": 0,
                                      "working": 0, "identity": 0}


# -- Paths with no normal form: 400 on every route -------------------------------------------

SEGMENT_RULE = ("Path segments use a-z, 0-9, '.', '_' and '-', and start with a letter or a "
                "digit.")
BAD_PATHS = [
    pytest.param("projects//a", "A path has no empty segments (no '//').", id="empty-segment"),
    pytest.param("projects/../a", "A path has no '.' or '..' segments.", id="dotdot"),
    pytest.param("./projects", "A path has no '.' or '..' segments.", id="dot"),
    pytest.param("projects/my project", SEGMENT_RULE, id="space"),
    pytest.param("projects/-a", SEGMENT_RULE, id="leading-dash"),
    pytest.param("projets/café", SEGMENT_RULE, id="not-ascii"),
    pytest.param("/".join(["s"] * (MAX_DEPTH + 1)),
                 f"A path has at most {MAX_DEPTH} segments.", id="too-deep"),
    pytest.param("x" * (MAX_SEGMENT_LENGTH + 1),
                 f"A path segment has at most {MAX_SEGMENT_LENGTH} characters.",
                 id="segment-too-long"),
    pytest.param("/".join(["x" * 60] * 5),
                 f"A path has at most {MAX_PATH_LENGTH} characters.", id="too-long"),
]


@pytest.mark.parametrize("route", ROUTES + OTHER_PATH_ROUTES, ids=route_id)
@pytest.mark.parametrize(("path", "reason"), BAD_PATHS)
def test_a_path_with_no_normal_form_is_400_in_the_error_shape(caller, route, path, reason):
    response = caller.ask(route, path=path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"error": {"status": 400, "code": "invalid",
                                         "message": f"path: {reason}",
                                         "fields": {"path": [reason]}}}


def test_a_path_longer_than_its_limit_is_refused_before_it_is_trimmed(alice_key):
    """The schema's maxLength holds for the text as sent: 1,000 separators after a valid
    path were trimmed away first and the request accepted (found by tests/security/
    test_fuzz.py on GET /memory/by-tag)."""
    agent = key_client(alice_key[1])
    padded = "projects/a" + "\x1d" * 1_000
    for url, params in (("/memory/by-tag", {"tag": "x"}), ("/memory", {})):
        refused = agent.get(url, {**params, "path": padded})
        assert refused.status_code == 400, (url, refused.content)
        assert "path" in refused.json()["error"]["fields"]
    assert agent.get("/memory/by-tag", {"tag": "x", "path": " projects/a "}).status_code == 200
