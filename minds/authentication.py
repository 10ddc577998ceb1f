"""Mind Key authentication: a machine principal for one mind, never a user."""

import copy
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from minds.keys import key_matches, parse_lookup
from minds.models import Mind, MindKey


@dataclass(frozen=True)
class AgentPrincipal:
    """Who an agent is: one key of one mind. Not a Django user, never staff."""

    key: MindKey

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    is_agent = True

    @property
    def mind(self) -> Mind:
        """The key's mind; for a path-scoped key a copy carrying its prefixes as its
        ``reach``, so every memory query made for it sees only those paths
        (Memory.objects.for_mind). The key's own instance is never changed."""
        mind = self.key.mind
        if not self.key.paths:
            return mind
        scoped = copy.copy(mind)
        scoped.reach = self.reach
        return scoped

    @property
    def reach(self) -> tuple[str, ...]:
        """The path prefixes this key is limited to; empty, the whole mind."""
        return tuple(self.key.paths)

    @property
    def can_write(self) -> bool:
        return self.key.can_write

    @property
    def pk(self) -> str:
        return self.key.id

    def __str__(self) -> str:
        return f"key {self.key.name} (…{self.key.last4})"


def is_agent(principal) -> bool:
    return isinstance(principal, AgentPrincipal)


def reach_of(principal) -> tuple[str, ...]:
    """The path prefixes a principal's writes may land on: a path-scoped key's; empty
    (the whole mind) for every other key and for humans."""
    return principal.reach if is_agent(principal) else ()


class MindKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer mk_…``, or ``?key=mk_…`` on reads (GET, HEAD, OPTIONS).

    Returns None when neither carries a Mind Key (so JWT can try), raises on a Mind Key
    that is malformed, unknown, expired or revoked, whose creator or mind owner has been
    deactivated, or that comes as ``?key=`` on a write.
    """

    keyword = "Bearer"

    def authenticate(self, request):
        plaintext = self._presented_key(request)
        if plaintext is None:
            return None
        lookup = parse_lookup(plaintext)
        if lookup is None:
            raise exceptions.AuthenticationFailed("Malformed Mind Key.")
        key = (MindKey.objects.select_related("mind__owner", "created_by")
               .filter(lookup=lookup).first())
        if key is None or not key_matches(plaintext, key.hashed_secret):
            raise exceptions.AuthenticationFailed("Unknown Mind Key.")
        now = timezone.now()
        if key.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This Mind Key has been revoked.")
        if key.expires_at is not None and key.expires_at <= now:
            raise exceptions.AuthenticationFailed("This Mind Key has expired.")
        # A deactivated account's JWTs stop at once; the keys it handed out stop with them.
        if not key.mind.owner.is_active or (key.created_by is not None
                                            and not key.created_by.is_active):
            raise exceptions.AuthenticationFailed(
                "This Mind Key belongs to a deactivated account.")
        self._touch(key, now)
        return AgentPrincipal(key=key), key

    def authenticate_header(self, request):
        return f'{self.keyword} realm="synapse"'

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
