"""Two tenants for the security tests: two users, each with two filled minds and every kind of key
and OAuth token.

Every memory carries a canary token that no request ever sends, so finding one in a
response body written for another tenant proves a leak, whatever route produced it. Each
mind also has a path-scoped key and one memory in its scope (``zq<label>scope``): to that
key every other memory of its own mind is as foreign as another tenant's.
"""

from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import AccessToken
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken

from memories.embeddings import embed_batch
from memories.models import AuditEvent, Memory, MemoryTombstone, MemoryVersion, under_any
from memories.services import memory_delete, memory_store
from minds.authentication import AgentPrincipal
from minds.invitations import invite
from minds.models import Invitation, Membership, Mind, MindKey, OAuthConnection
from minds.oauth import token_checksum
from minds.services import connection_revoke, key_issue, key_revoke, mind_create
from tests.conftest import make_user, session_client
from tests.minds.oauth_flow import connect, register

CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "note"]


@dataclass
class Tenant:
    """One mind, its owner, its keys and what it holds."""

    label: str
    word: str
    canary: str
    owner: object
    mind: Mind
    write_key: str
    read_key: str
    revoked_key: str
    expired_key: str
    scoped_key: str = ""
    scope: str = ""
    # OAuth access tokens of this mind (issued through the consent page): read and write,
    # read only, limited to ``scope``, revoked, expired.
    oauth: dict[str, str] = field(default_factory=dict)
    key_ids: list[str] = field(default_factory=list)
    invitation_ids: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    scoped_ids: list[str] = field(default_factory=list)
    export: dict | None = None

    @property
    def scoped_canary(self) -> str:
        return f"zq{self.label}inscope"

    @property
    def secrets(self) -> list[str]:
        """Strings that only this tenant's data contains and no request ever carries."""
        return [self.canary, self.scoped_canary, *self.memory_ids, *self.scoped_ids,
                self.mind.id, *self.key_ids, *self.connection_ids, *self.invitation_ids]

    @property
    def connection_ids(self) -> list[str]:
        return list(OAuthConnection.objects.filter(mind=self.mind).values_list("id", flat=True))

    @property
    def secrets_outside_scope(self) -> list[str]:
        """What the path-scoped key of this very mind must never see: the memories outside
        its scope (its own mind's id and its in-scope memory it may)."""
        return [self.canary, *self.memory_ids]


def fill(label: str, word: str, owner, count: int) -> Tenant:
    mind = mind_create(owner=owner, name=f"Mind of {label} zq{label}mind")
    canary = f"zq{label}canary"
    write_row, write_key = key_issue(mind=mind, name="writer", created_by=owner)
    read_row, read_key = key_issue(mind=mind, name="reader", scope="read", created_by=owner)
    revoked_row, revoked_key = key_issue(mind=mind, name="revoked", created_by=owner)
    key_revoke(key=revoked_row, actor=owner)
    expired_row, expired_key = key_issue(mind=mind, name="expired", created_by=owner,
                                         expires_at=timezone.now() + timedelta(seconds=1))
    MindKey.objects.filter(pk=expired_row.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1))
    tenant = Tenant(label, word, canary, owner, mind, write_key, read_key, revoked_key,
                    expired_key, key_ids=[write_row.id, read_row.id, revoked_row.id,
                                          expired_row.id])
    agent = AgentPrincipal(key=write_row)
    for index in range(count):
        actor = owner if index % 3 == 0 else agent
        memory = memory_store(
            mind=mind, actor=actor, category=CATEGORIES[index % len(CATEGORIES)],
            key=f"{word}_{index}", content=f"The {word} fact number {index}: {canary}{index} "
            f"is kept by {canary}.", tags=[word, f"{canary}tag", "shared"],
            priority="critical" if index == 0 else "normal").memory
        tenant.memory_ids.append(memory.id)
    # History, trash and a secret: every lifecycle state is there to leak.
    memory_store(mind=mind, actor=agent, category="fact", key=f"{word}_1",
                 content=f"The {word} fact number 1, revised: {canary}rev.")
    trashed = memory_store(mind=mind, actor=agent, category="note", key=f"{word}_trashed",
                           content=f"A trashed {word} note {canary}trash.").memory
    memory_delete(memory=trashed, actor=agent)
    secret = memory_store(mind=mind, actor=owner, category="credentials", key=f"{word}_token",
                          content=f"token {canary}credential").memory
    tenant.memory_ids += [trashed.id, secret.id]
    # A key limited to one path, and a memory there; everything above is outside it.
    tenant.scope = f"zq{label}scope"
    scoped_row, tenant.scoped_key = key_issue(mind=mind, name="scoped", created_by=owner,
                                              paths=[tenant.scope])
    inside = memory_store(mind=mind, actor=owner, category="fact", key=f"{word}_inside",
                          content=f"The {word} note in scope {tenant.scoped_canary}.",
                          path=tenant.scope, tags=[word, "shared"]).memory
    tenant.scoped_ids.append(inside.id)
    tenant.key_ids.append(scoped_row.id)
    # An open invitation, for the routes of one (its id a secret like the keys').
    invited = invite(mind=mind, actor=owner, role="viewer", origin="http://testserver",
                     email=f"invitee.{label}@example.com")
    tenant.invitation_ids.append(invited.invitation.id)
    issue_oauth_tokens(tenant)
    return tenant


def issue_oauth_tokens(tenant: Tenant) -> None:
    """The owner approves one OAuth client on the consent page five times."""
    browser = session_client(tenant.owner)
    client_id = register().json()["client_id"]

    def token(**options) -> str:
        return connect(browser, tenant.mind, client_id=client_id, **options)["access_token"]

    tenant.oauth = {"write": token(), "read": token(access="memory:read"),
                    "scoped": token(paths=tenant.scope), "revoked": token(),
                    "expired": token()}
    revoked = OAuthConnection.objects.get(
        access_token__token_checksum=token_checksum(tenant.oauth["revoked"]))
    connection_revoke(connection=revoked, actor=tenant.owner)
    AccessToken.objects.filter(token_checksum=token_checksum(tenant.oauth["expired"])).update(
        expires=timezone.now() - timedelta(minutes=1))


@pytest.fixture
def tenants(db) -> dict[str, Tenant]:
    """a1, a2 (owned by one user) and b1, b2 (owned by another), embedded for semantic search."""
    first, second = make_user("tenant_a"), make_user("tenant_b")
    world = {"a1": fill("a1", "quokka", first, 9), "a2": fill("a2", "narwhal", first, 5),
             "b1": fill("b1", "axolotl", second, 7), "b2": fill("b2", "pangolin", second, 4)}
    while embed_batch(limit=200):
        pass
    return world


def snapshot(tenant: Tenant) -> dict:
    """Everything stored for one mind (minus key last-use times, which reads update), its
    members and invitations included."""
    mind = Mind.objects.filter(pk=tenant.mind.pk).values().first()
    memories = list(Memory.objects.for_mind(tenant.mind).order_by("id").values(
        "id", "category", "key", "content", "tags", "priority", "source", "verified",
        "confidence", "expires_at", "version", "created_at", "updated_at", "deleted_at",
        "superseded_at", "embedding_pending"))
    versions = list(MemoryVersion.objects.filter(memory__mind=tenant.mind)
                    .order_by("memory_id", "version").values())
    audit = list(AuditEvent.objects.filter(mind=tenant.mind).order_by("id").values("id"))
    keys = list(MindKey.objects.filter(mind=tenant.mind).order_by("id").values(
        "id", "name", "scope", "expires_at", "revoked_at", "hashed_secret"))
    members = list(Membership.objects.filter(mind=tenant.mind).order_by("id").values(
        "user_id", "role"))
    invitations = list(Invitation.objects.filter(mind=tenant.mind).order_by("id").values(
        "id", "role", "token_hash", "expires_at", "revoked_at"))
    return {"mind": mind, "memories": memories, "versions": versions, "audit": audit,
            "keys": keys, "members": members, "invitations": invitations}


def snapshot_outside_scope(tenant: Tenant) -> dict:
    """Everything stored for one mind that its path-scoped key must not change: the mind,
    its keys, and its memories (with their versions) and tombstones outside the scope."""
    outside = ~under_any([tenant.scope])
    whole = snapshot(tenant)
    memories = list(Memory.objects.for_mind(tenant.mind).filter(outside).order_by("id").values(
        "id", "category", "key", "content", "tags", "priority", "source", "verified",
        "confidence", "expires_at", "version", "path", "created_at", "updated_at",
        "deleted_at", "superseded_at", "embedding_pending"))
    versions = list(MemoryVersion.objects.filter(memory__mind=tenant.mind,
                                                 memory__in=[m["id"] for m in memories])
                    .order_by("memory_id", "version").values())
    tombstones = list(MemoryTombstone.objects.filter(outside, mind=tenant.mind)
                      .order_by("id").values())
    return {"mind": whole["mind"], "keys": whole["keys"], "memories": memories,
            "versions": versions, "tombstones": tombstones}


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def jwt_for(user) -> str:
    return str(RefreshToken.for_user(user).access_token)


@pytest.fixture(scope="session")
def live_cluster():
    """A migrated throwaway cluster with a user, a mind and a Mind Key (tests.security.live)."""
    from tests.security.live import destroy_cluster, make_cluster

    cluster = make_cluster()
    yield cluster
    destroy_cluster(cluster)


@dataclass
class Team:
    """One filled mind (``tenant``, owned by ``people["owner"]``) with an editor and a viewer
    on it, and a signed-in person who is no member of it (with a mind of their own)."""

    tenant: Tenant
    people: dict[str, object]
    outsider_tenant: Tenant

    @property
    def secrets(self) -> list[str]:
        """What a non-member must never see: the tenant's canaries and ids, and its name."""
        return [*self.tenant.secrets, self.tenant.mind.name]


ROLES = ("owner", "editor", "viewer", "non-member")


@pytest.fixture
def team(db) -> Team:
    """The role matrix's cast (tests/security/test_isolation_matrix.py)."""
    from minds.models import Role
    from minds.services import member_add

    owner, editor, viewer, outsider = (make_user(f"team_{role.replace('-', '_')}")
                                       for role in ROLES)
    tenant = fill("t1", "wombat", owner, 6)
    member_add(mind=tenant.mind, user=editor, role=Role.EDITOR, actor=owner)
    member_add(mind=tenant.mind, user=viewer, role=Role.VIEWER, actor=owner)
    outsider_tenant = fill("t2", "dugong", outsider, 3)
    while embed_batch(limit=200):
        pass
    return Team(tenant, dict(zip(ROLES, (owner, editor, viewer, outsider), strict=True)),
                outsider_tenant)


def team_snapshot(team: Team) -> dict:
    """``snapshot`` of the team's mind (with its members and invitations) plus row counts
    of what a refused write could add (a refused role changes nothing)."""
    mind = team.tenant.mind
    return {**snapshot(team.tenant),
            "tombstones": MemoryTombstone.objects.filter(mind=mind).count(),
            "connections": list(OAuthConnection.objects.filter(mind=mind).order_by("id")
                                .values("id", "revoked_at"))}
