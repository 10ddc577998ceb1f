"""Agent authentication: a Mind Key or an OAuth access token, one machine principal for
one mind, never a user."""

import copy
import functools
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Exists, F, Func, OuterRef, Value
from django.utils import timezone
from oauth2_provider.models import get_access_token_model
from rest_framework import authentication, exceptions, permissions

from minds.keys import key_matches, parse_lookup
from minds.models import Membership, Mind, MindKey, OAuthConnection, Role
from minds.oauth import RESOURCE_METADATA_PATH, token_checksum
from synapse.origin import public_origin, public_url
from synapse.provenance import InvalidProvenance, provenance_from_headers


@dataclass(frozen=True)
class AgentPrincipal:
    """Who an agent is: one Mind Key, or one OAuth connection (what a human approved for
    an OAuth client), of one mind. Not a Django user, never staff. Both carry a mind, a
    scope (``can_write``) and path prefixes (``reach``), so every agent rule applies to
    both alike."""

    key: MindKey | None = None
    connection: OAuthConnection | None = None

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    is_agent = True

    def __post_init__(self):
        if (self.key is None) == (self.connection is None):
            raise TypeError("An AgentPrincipal is a Mind Key or an OAuth connection.")

    @property
    def credential(self) -> MindKey | OAuthConnection:
        return self.key if self.key is not None else self.connection

    @property
    def mind(self) -> Mind:
        """The credential's mind; when it is path-scoped a copy carrying its prefixes as
        its ``reach``, so every memory query made for it sees only those paths
        (Memory.objects.for_mind). The credential's own instance is never changed."""
        mind = self.credential.mind
        if not self.credential.paths:
            return mind
        scoped = copy.copy(mind)
        scoped.reach = self.reach
        return scoped

    @property
    def reach(self) -> tuple[str, ...]:
        """The path prefixes this credential is limited to; empty, the whole mind."""
        return tuple(self.credential.paths)

    @property
    def can_write(self) -> bool:
        return self.credential.can_write

    @property
    def pk(self) -> str:
        return self.credential.id

    @property
    def bucket(self) -> str:
        """Whose rate-limit budget the requests spend (synapse.throttling)."""
        return f"key:{self.key.pk}" if self.key is not None else f"connection:{self.pk}"

    def __str__(self) -> str:
        if self.key is not None:
            return f"key {self.key.name} (…{self.key.last4})"
        return f"connection {self.connection.client_name}"


def is_agent(principal) -> bool:
    return isinstance(principal, AgentPrincipal)


def reach_of(principal) -> tuple[str, ...]:
    """The path prefixes a principal's writes may land on: a path-scoped key's; empty
    (the whole mind) for every other key and for humans."""
    return principal.reach if is_agent(principal) else ()


def www_authenticate(request, path: str = RESOURCE_METADATA_PATH, **params: str) -> str:
    """The ``WWW-Authenticate`` challenge of a 401 or 403 (RFC 6750, RFC 9728): the
    protected resource metadata URL (``path``) tells an OAuth client where to get a token;
    ``params`` adds ``error`` and ``scope`` (a 403 ``insufficient_scope``)."""
    fields = {"realm": "synapse", "resource_metadata": public_url(request, path), **params}
    return "Bearer " + ", ".join(f'{name}="{value}"' for name, value in fields.items())


class AgentAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer mk_…`` (a Mind Key), ``?key=mk_…`` on reads (GET, HEAD,
    OPTIONS), or ``Authorization: Bearer <OAuth access token>``.

    Returns None when none of these is presented (a JWT has dots: simplejwt tries it next);
    raises on a Mind Key that is malformed, unknown, expired or revoked, whose creator has
    been deactivated or whose mind has no active owner left, or that comes as ``?key=`` on a
    write; and on an access token that is unknown, expired, of a revoked connection, issued
    for another resource, whose approver has been deactivated or whose mind has no active
    owner left.
    """

    keyword = "Bearer"

    def authenticate(self, request):
        plaintext = self._presented_key(request)
        if plaintext is None:
            token = oauth_token_of(request)
            if token is None:
                return None
            connection = authenticate_connection(request, token)
            return AgentPrincipal(connection=connection), connection
        lookup = parse_lookup(plaintext)
        if lookup is None:
            raise exceptions.AuthenticationFailed("Malformed Mind Key.")
        key = key_by_lookup(lookup)
        if key is None or not key_matches(plaintext, key.hashed_secret):
            raise exceptions.AuthenticationFailed("Unknown Mind Key.")
        now = timezone.now()
        if key.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This Mind Key has been revoked.")
        if key.expires_at is not None and key.expires_at <= now:
            raise exceptions.AuthenticationFailed("This Mind Key has expired.")
        # A deactivated account's JWTs stop at once; the keys it handed out stop with them,
        # and so does every key of a mind none of whose owners is active.
        if not key.mind_has_owner or not key.creator_active:
            raise exceptions.AuthenticationFailed(
                "This Mind Key belongs to a deactivated account.")
        self._touch(key, now)
        return AgentPrincipal(key=key), key

    def authenticate_header(self, request):
        return www_authenticate(request)

    @staticmethod
    def _presented_key(request) -> str | None:
        query_key = request.query_params.get("key")
        if query_key and request.method not in permissions.SAFE_METHODS:
            # A key in the URL lands in proxy logs and browser history: tolerated for reads
            # (some agent runtimes cannot send headers), never with a change.
            raise exceptions.AuthenticationFailed(
                "A Mind Key in the query string (?key=) is accepted on reads only: send it "
                "as Authorization: Bearer mk_….")
        header = authentication.get_authorization_header(request).decode("latin-1")
        parts = header.split()
        if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1].startswith("mk_"):
            return parts[1]
        return query_key or None

    @staticmethod
    def _touch(key: MindKey, now) -> None:
        # last_used_at is kept to the minute: one UPDATE a minute per key, not per request.
        resolution = settings.SYNAPSE["KEY_LAST_USED_RESOLUTION_SECONDS"]
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > resolution:
            MindKey.objects.filter(pk=key.pk).update(last_used_at=now)
            key.last_used_at = now


def key_by_lookup(lookup: str) -> MindKey | None:
    """The Mind Key with ``lookup``, its mind loaded, and two flags: ``creator_active``
    (no creator, or an active one) and ``mind_has_owner`` (an owner of the mind is active).
    Every request of an agent starts here, so it is one hand-written query: building the
    ORM's equivalent cost more than running it (bench/results/core.md). Always the primary,
    as every credential read (synapse.db_router)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_key_query(), [Role.OWNER.value, lookup])
        row = cursor.fetchone()
    if row is None:
        return None
    key_fields, mind_fields = _attnames(MindKey), _attnames(Mind)
    key = MindKey.from_db(DEFAULT_DB_ALIAS, key_fields, row[:len(key_fields)])
    end = len(key_fields) + len(mind_fields)
    key.mind = Mind.from_db(DEFAULT_DB_ALIAS, mind_fields, row[len(key_fields):end])
    key.creator_active, key.mind_has_owner = row[end:]
    return key


@functools.cache
def _attnames(model) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)


@functools.cache
def _key_query() -> str:
    """The SQL of :func:`key_by_lookup`, written from the models' metadata once: every
    column of the key and of its mind (in ``_attnames`` order), then the two flags."""
    user = get_user_model()._meta
    active = user.get_field("is_active").column

    def columns(model, alias: str) -> str:
        return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)

    # Names from the models' metadata; the values are parameters.
    return (
        f"SELECT {columns(MindKey, 'k')}, {columns(Mind, 'm')}, "  # noqa: S608
        f'u."{active}" IS NOT FALSE, '
        f'EXISTS (SELECT 1 FROM "{Membership._meta.db_table}" ms '
        f'JOIN "{user.db_table}" o ON o."{user.pk.column}" = ms.user_id '
        f'WHERE ms.mind_id = k.mind_id AND ms.role = %s AND o."{active}") '
        f'FROM "{MindKey._meta.db_table}" k JOIN "{Mind._meta.db_table}" m ON m.id = k.mind_id '
        f'LEFT JOIN "{user.db_table}" u ON u."{user.pk.column}" = k.created_by_id '
        "WHERE k.lookup = %s")


# Settings and older imports name the class by its first credential.
MindKeyAuthentication = AgentAuthentication


def active_owner_exists(mind_path: str) -> Exists:
    """Whether the mind at ``mind_path`` still has an owner whose account is active: an
    annotation, so the credential and this come back in one query."""
    return Exists(Membership.objects.filter(mind=OuterRef(mind_path), role=Role.OWNER,
                                            user__is_active=True))


def oauth_token_of(request) -> str | None:
    """The OAuth access token of ``Authorization: Bearer …``: neither a Mind Key (mk_…)
    nor a JWT (which has dots); None when there is none."""
    parts = authentication.get_authorization_header(request).decode("latin-1").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    token = parts[1]
    if token.startswith("mk_") or "." in token:
        return None
    return token


def authenticate_connection(request, token: str) -> OAuthConnection:
    """The connection an OAuth access token acts for; AuthenticationFailed when the token
    is unknown or expired, its connection revoked, its resource (RFC 8707) not this
    server's origin, the approving human deactivated, or no active owner left."""
    access = (get_access_token_model().objects
              .select_related("synapse_connection__mind",
                              "synapse_connection__application",
                              "synapse_connection__approved_by")
              .annotate(mind_has_owner=active_owner_exists("synapse_connection__mind"))
              .filter(token_checksum=token_checksum(token)).first())
    connection = getattr(access, "synapse_connection", None) if access is not None else None
    if connection is None:
        raise exceptions.AuthenticationFailed("Unknown OAuth access token.")
    if connection.revoked_at is not None:
        raise exceptions.AuthenticationFailed("This OAuth connection has been revoked.")
    now = timezone.now()
    if access.expires <= now:
        raise exceptions.AuthenticationFailed(
            "This OAuth access token has expired: refresh it.")
    origin = public_origin(request)
    if connection.resource != origin or list(access.resource or []) != [origin]:
        raise exceptions.AuthenticationFailed(
            f"This OAuth access token was issued for another resource, not {origin}.")
    if not access.mind_has_owner or (connection.approved_by is not None
                                     and not connection.approved_by.is_active):
        raise exceptions.AuthenticationFailed(
            "This OAuth connection belongs to a deactivated account.")
    _touch_connection(connection, now, _instance_of(request))
    return connection


def _instance_of(request) -> str:
    try:
        return provenance_from_headers(request.headers).agent_instance
    except InvalidProvenance:  # the view answers 400 naming the header
        return ""


def _touch_connection(connection: OAuthConnection, now, instance: str) -> None:
    """last_used_at to the minute (as keys), and the agent instance ids seen (the first
    OAuthConnection.MAX_INSTANCE_IDS distinct ones): at most one UPDATE per minute, plus
    one per new instance id."""
    resolution = settings.SYNAPSE["KEY_LAST_USED_RESOLUTION_SECONDS"]
    stale = (connection.last_used_at is None
             or (now - connection.last_used_at).total_seconds() > resolution)
    new_instance = (instance and instance not in connection.instance_ids
                    and len(connection.instance_ids) < OAuthConnection.MAX_INSTANCE_IDS)
    if not (stale or new_instance):
        return
    changes = {"last_used_at": now}
    rows = OAuthConnection.objects.filter(pk=connection.pk)
    if new_instance:
        # Appended in the statement itself: concurrent requests never lose an id.
        rows.exclude(instance_ids__contains=[instance]).filter(
            instance_ids__len__lt=OAuthConnection.MAX_INSTANCE_IDS).update(
            instance_ids=Func(F("instance_ids"), Value(instance), function="array_append",
                              output_field=OAuthConnection._meta.get_field("instance_ids")))
        connection.instance_ids = [*connection.instance_ids, instance]
    rows.update(**changes)
    connection.last_used_at = now
