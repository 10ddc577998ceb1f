"""Every write to accounts, minds, Mind Keys and OAuth connections; and the counted minds
list the API and UI show."""

from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db import connection as database
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from memories.paths import InvalidPath, normalize_prefixes
from minds.keys import generate_key
from minds.models import (
    Invitation,
    Membership,
    Mind,
    MindKey,
    MindQuerySet,
    OAuthConnection,
    Role,
)


def registration_open() -> bool:
    """Whether anyone may open an account (SYNAPSE_ALLOW_REGISTRATION; closed by default in
    production). Invitations will open it for their invitee."""
    return settings.SYNAPSE["ALLOW_REGISTRATION"]


def account_register(*, username: str, password: str, email: str = ""):
    """Create a human account (not staff); the caller has validated the password.

    Returns the user, or None when the username is taken (case-insensitively). Both ways
    take the same work, a password hash included, so neither the answer nor its timing
    tells a caller which usernames exist.
    """
    users = get_user_model().objects
    if users.filter(username__iexact=username).exists():
        make_password(password)
        return None
    try:
        with transaction.atomic():
            return users.create_user(username, email=email, password=password)
    except IntegrityError:  # lost a race with a registration of the same username
        return None


def _count_per_mind(queryset) -> Coalesce:
    """A correlated COUNT(*) of ``queryset`` per mind, as an annotation (one query for the
    whole list, no join fan-out)."""
    counted = (queryset.filter(mind=OuterRef("pk")).order_by().values("mind")
               .annotate(n=Count("*")).values("n"))
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def minds_with_counts(*, member) -> MindQuerySet:
    """The minds ``member`` belongs to, annotated with their ``role``, ``memory_count``
    (current memories), ``unverified_count`` (the verification queue), ``key_count``
    (usable keys), ``member_count`` and ``owner_count`` (is it shared, could they leave):
    what the minds list shows, in the API and the web UI alike. A read, not a write: it
    lives here because it counts memories, and minds.models sits below memories.models."""
    from memories.models import Memory

    current = Memory.objects.current()
    return Mind.objects.of_member(member).annotate(
        memory_count=_count_per_mind(current),
        unverified_count=_count_per_mind(current.awaiting_verification()),
        key_count=_count_per_mind(MindKey.objects.usable()),
        member_count=_count_per_mind(Membership.objects.all()),
        owner_count=_count_per_mind(Membership.objects.filter(role=Role.OWNER)),
    )


def account_minds(*, user) -> MindQuerySet:
    """The minds ``user`` belongs to, with their ``role`` and ``owner_count``: what the
    account page says deleting the account would do (a mind they own with
    ``owner_count`` 1 goes with it). One query."""
    return Mind.objects.of_member(user).annotate(
        owner_count=_count_per_mind(Membership.objects.filter(role=Role.OWNER)),
    ).order_by("name", "created_at")


@transaction.atomic
def mind_create(*, owner, name: str,
                unverified_in_recall: str = Mind.UnverifiedInRecall.MARKED,
                search_language: str = "english", actor=None) -> Mind:
    """A new mind owned by ``owner``, with its quota counters (memories.quotas) and its
    text-search language. A recall policy other than the default is set by ``mind_update``
    in the same transaction, so it is audited as a change (by ``actor``), as it always
    has been."""
    from memories.quotas import create_slots

    mind = Mind.objects.create(name=name, search_language=search_language)
    Membership.objects.create(mind=mind, user=owner, role=Role.OWNER)
    create_slots(mind)
    if unverified_in_recall != mind.unverified_in_recall:
        mind = mind_update(mind=mind, actor=actor, unverified_in_recall=unverified_in_recall)
    return mind


MIND_SETTINGS = ("name", "unverified_in_recall", "search_language", "agents_may_reset")
KEY_SETTINGS = ("name", "scope", "expires_at")


@transaction.atomic
def mind_update(*, mind: Mind, actor=None, **fields) -> Mind:
    """Rename a mind or change its settings (name, unverified_in_recall, search_language,
    agents_may_reset);
    audited. A new language re-indexes the mind's memories through the embedding worker
    (memories.text_search)."""
    from memories.audit import record_event

    unknown = set(fields) - set(MIND_SETTINGS)
    if unknown:
        raise TypeError(f"mind_update cannot change {sorted(unknown)}")
    changed = {name: value for name, value in fields.items() if getattr(mind, name) != value}
    if not changed:
        return mind
    before = {name: getattr(mind, name) for name in changed}
    for name, value in changed.items():
        setattr(mind, name, value)
    also = []
    if "search_language" in changed:
        mind.reindex_pending = True
        also.append("reindex_pending")
    mind.save(update_fields=[*changed, *also, "updated_at"])
    record_event(mind=mind, actor=actor, action="mind_update",
                 details={"before": before, "after": changed})
    return mind


@transaction.atomic
def mind_delete(*, mind: Mind, actor=None) -> None:
    """Delete a mind with every memory, version, key and audit event of it."""
    from memories.models import Memory, MemoryVersion

    # Locked first: a write that references the mind waits for the delete, not races it.
    locked = Mind.objects.select_for_update().get(pk=mind.pk)
    # Bulk deletes in dependency order, loading only ids: a large mind never has its
    # contents and vectors pulled into memory just to be deleted.
    MemoryVersion.objects.filter(memory__mind=locked).delete()
    Memory.objects.filter(mind=locked).only("pk").delete()
    locked.delete()


DELETED_USER = "deleted user {number}"


@transaction.atomic
def account_delete(*, user, actor=None) -> str:
    """Delete a human account and everything that belongs to or names the person
    (docs/teams.md, "Your data"):

    - the minds they own alone, through ``mind_delete`` (with everything in them);
    - from the minds they share, their membership (``member_remove``: the keys and
      connections they gave out there are revoked; a key they issued elsewhere stays
      revoked, its ``created_by`` cleared);
    - their sessions, JWT refresh tokens, OAuth tokens and rate-limit counters;
    - invitations to their e-mail address (those to their account go with it; those they
      sent are revoked by ``member_remove`` and stay with the mind, closed, without their
      name);
    - then the user. What they did elsewhere stays in the history under a pseudonym,
      ``deleted user <n>`` (``_pseudonymise``), which it returns."""
    for membership in Membership.objects.filter(user=user).select_related("mind"):
        if membership.role == Role.OWNER and not _other_owners(membership).exists():
            mind_delete(mind=membership.mind, actor=actor)
        else:
            member_remove(membership=membership, actor=actor)
    pseudonym = _pseudonymise(user)
    _end_sign_ins(user)
    if user.email:  # invitations to their account go with it (CASCADE); those they sent
        # stay with their minds, revoked, without them (SET_NULL)
        Invitation.objects.filter(user__isnull=True, email__iexact=user.email).delete()
    user.delete()
    return pseudonym


def _pseudonymise(user) -> str:
    """Name ``user`` in every mind's history by a pseudonym, ``deleted user <n>`` (n from a
    sequence of its own, not their id): the audit events they made and the versions they
    wrote keep who did it without saying who that was; audit details naming them (their
    id, username or e-mail address, as a member added, removed or invited) name the
    pseudonym instead. ``Memory.verified_by`` is cleared by the user's deletion (SET_NULL):
    the ``verify`` event still says who."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    from memories.models import AuditEvent, MemoryVersion

    with database.cursor() as cursor:
        cursor.execute("SELECT nextval('minds_deleted_user_seq')")
        pseudonym = DELETED_USER.format(number=cursor.fetchone()[0])
    user_id = str(user.pk)
    AuditEvent.objects.filter(actor_type="user", actor_id=user_id).update(
        actor_id="", actor_label=pseudonym)
    MemoryVersion.objects.filter(recorded_by_type="user", recorded_by_id=user_id).update(
        recorded_by_id="", recorded_by=pseudonym)
    names = {name.lower() for name in (user.get_username(), user.email) if name}
    naming = Q(details__user_id=user.pk)
    for name in names:
        naming |= Q(details__icontains=name)
    for event in AuditEvent.objects.filter(naming).only("pk", "details").iterator():
        scrubbed = _scrub(event.details, user.pk, names, pseudonym)
        if scrubbed != event.details:
            AuditEvent.objects.filter(pk=event.pk).update(details=scrubbed)
    # The admin's own log of changes to the account (its entries by the person go with
    # them: LogEntry.user cascades).
    LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(user),
                            object_id=user_id).update(object_id="", object_repr=pseudonym)
    return pseudonym


def _scrub(value, user_id: int, names: set[str], pseudonym: str):
    """``value`` (audit details) with every ``user_id`` of the person dropped and every
    string that is their username or e-mail address (any case) replaced by the
    pseudonym."""
    if isinstance(value, dict):
        return {key: _scrub(item, user_id, names, pseudonym) for key, item in value.items()
                if not (key == "user_id" and item == user_id)}
    if isinstance(value, list):
        return [_scrub(item, user_id, names, pseudonym) for item in value]
    if isinstance(value, str) and value.lower() in names:
        return pseudonym
    return value


def _end_sign_ins(user) -> None:
    """Every way the person was signed in goes with them: browser sessions (read one by
    one: the session table has no user column), JWT refresh tokens (simplejwt's outstanding
    and blacklisted tokens), OAuth tokens, grants and applications they hold (DOT cascades
    them with the user), and their rate-limit counters (``<scope>:user:<id>``)."""
    from django.contrib.sessions.models import Session
    from rest_framework_simplejwt.token_blacklist.models import OutstandingToken

    from synapse.models import RateLimit

    user_id = str(user.pk)
    theirs = [session.pk for session in Session.objects.iterator(chunk_size=1000)
              if session.get_decoded().get("_auth_user_id") == user_id]
    Session.objects.filter(pk__in=theirs).delete()
    OutstandingToken.objects.filter(user=user).delete()
    RateLimit.objects.filter(key__endswith=f":user:{user_id}").delete()


# -- Members -----------------------------------------------------------------------------

class LastOwner(ValueError):
    """A change that would leave a mind without an owner."""

    def __init__(self):
        super().__init__("A mind keeps at least one owner: make someone else an owner first.")


def _other_owners(membership: Membership):
    return Membership.objects.filter(mind_id=membership.mind_id, role=Role.OWNER).exclude(
        pk=membership.pk)


def _lock_owners(mind_id: str) -> None:
    """Serialise the changes that could remove a mind's last owner (two owners leaving at
    once must not both succeed): they lock the mind's row first."""
    Mind.objects.select_for_update().filter(pk=mind_id).values_list("pk").first()


def _revoke_credentials_of(membership: Membership, actor) -> None:
    """A person who stops being an owner of a mind (removed, left, made editor or viewer,
    account deleted) takes no agent access and no power to invite with them: the Mind Keys
    they issued, the OAuth connections they approved and the open invitations they sent on
    that mind are revoked (docs/teams.md)."""
    _revoke_invitations_of(membership, actor)
    keys = MindKey.objects.filter(mind_id=membership.mind_id, created_by_id=membership.user_id,
                                  revoked_at__isnull=True)
    for key in keys:
        key_revoke(key=key, actor=actor)
    connections = OAuthConnection.objects.usable().filter(
        mind_id=membership.mind_id, approved_by_id=membership.user_id)
    for connection in connections:
        connection_revoke(connection=connection, actor=actor)


def _revoke_invitations_of(membership: Membership, actor) -> None:
    """Only owners invite: the open invitations a departing owner sent on the mind are
    revoked, each audited as ``invitation_revoke`` (as an owner's revocation is, by
    ``actor``, with ``reason`` ``inviter_not_owner``). Locked row by row, so an invitee
    accepting at the same moment either got in first or finds it revoked. (Here, not in
    minds.invitations, which sits above this module; acceptance checks the inviter too:
    minds.invitations.closed_reason.)"""
    from memories.audit import record_event

    sent = (Invitation.objects.open().filter(mind_id=membership.mind_id,
                                             invited_by_id=membership.user_id)
            .select_for_update(of=("self",)).select_related("mind", "user", "invited_by"))
    now = timezone.now()
    for invitation in sent:
        invitation.revoked_at = now
        invitation.save(update_fields=["revoked_at"])
        record_event(mind=invitation.mind, actor=actor, action="invitation_revoke",
                     details={"invitation_id": invitation.id, **invitation.invitee_details,
                              "invited_by": invitation.invited_by.get_username(),
                              "reason": "inviter_not_owner"})


@transaction.atomic
def member_add(*, mind: Mind, user, role: str, actor=None) -> Membership:
    """Make ``user`` a member of ``mind`` with ``role`` (an invitation accepted, or an admin
    adding them); already a member, their role changes as ``member_set_role`` would."""
    from memories.audit import record_event

    existing = Membership.objects.filter(mind=mind, user=user).first()
    if existing is not None:
        return member_set_role(membership=existing, role=role, actor=actor)
    membership = Membership.objects.create(mind=mind, user=user, role=role)
    record_event(mind=mind, actor=actor, action="member_add",
                 details={"user_id": user.pk, "username": user.get_username(), "role": role})
    return membership


@transaction.atomic
def member_set_role(*, membership: Membership, role: str, actor=None) -> Membership:
    """Change a member's role; LastOwner when it would leave the mind without an owner. An
    owner made editor or viewer loses the keys and connections they gave out."""
    from memories.audit import record_event

    _lock_owners(membership.mind_id)
    membership = Membership.objects.select_related("mind", "user").get(pk=membership.pk)
    if membership.role == role:
        return membership
    if membership.role == Role.OWNER and not _other_owners(membership).exists():
        raise LastOwner
    before = membership.role
    membership.role = role
    membership.save(update_fields=["role"])
    if before == Role.OWNER:
        _revoke_credentials_of(membership, actor)
    record_event(mind=membership.mind, actor=actor, action="member_role",
                 details={"user_id": membership.user_id,
                          "username": membership.user.get_username(),
                          "before": before, "after": role})
    return membership


@transaction.atomic
def member_remove(*, membership: Membership, actor=None) -> None:
    """Take a member off a mind (an owner removing them, or they leave); LastOwner when
    they are its only owner. The keys and connections they gave out there are revoked."""
    from memories.audit import record_event

    _lock_owners(membership.mind_id)
    membership = Membership.objects.select_related("mind", "user").filter(
        pk=membership.pk).first()
    if membership is None:
        return
    if membership.role == Role.OWNER and not _other_owners(membership).exists():
        raise LastOwner
    if membership.role == Role.OWNER:
        _revoke_credentials_of(membership, actor)
    membership.delete()
    record_event(mind=membership.mind, actor=actor, action="member_remove",
                 details={"user_id": membership.user_id,
                          "username": membership.user.get_username(),
                          "role": membership.role})


def clean_key_paths(values) -> list[str]:
    """The path prefixes of a new key, from what a human entered (API, web UI, admin,
    command): memories.paths.normalize_prefixes, its refusal a ValidationError saying
    why."""
    try:
        return normalize_prefixes(values)
    except InvalidPath as error:
        raise ValidationError(str(error), code="invalid_path") from error


@transaction.atomic
def key_issue(*, mind: Mind, name: str, scope: str = MindKey.Scope.WRITE,
              expires_at: datetime | None = None, created_by=None,
              paths: list[str] | None = None) -> tuple[MindKey, str]:
    """Create a Mind Key; returns the row and the plaintext, which is never stored.

    ``paths`` limits it to those path prefixes (normalised: clean_key_paths, whose
    ValidationError it raises); none, the whole mind. They are fixed for the key's life:
    another reach is another key."""
    from memories.audit import record_event

    paths = clean_key_paths(paths or [])
    new = generate_key()
    key = MindKey.objects.create(mind=mind, name=name, scope=scope, expires_at=expires_at,
                                 paths=paths, lookup=new.lookup, hashed_secret=new.hashed,
                                 last4=new.last4, created_by=created_by)
    details = {"key_id": key.id, "name": name, "scope": scope, "last4": key.last4}
    if paths:
        details["paths"] = paths
    record_event(mind=mind, actor=created_by, action="key_issue", details=details)
    return key, new.plaintext


@transaction.atomic
def key_update(*, key: MindKey, actor=None, **fields) -> MindKey:
    """Rename a key, change its scope or expiry; a revoked key stays as it is."""
    from memories.audit import record_event

    unknown = set(fields) - set(KEY_SETTINGS)
    if unknown:
        raise TypeError(f"key_update cannot change {sorted(unknown)}")
    key = MindKey.objects.select_for_update().select_related("mind").get(pk=key.pk)
    if key.revoked_at is not None:
        raise ValueError("A revoked key cannot be changed.")
    changed = {name: value for name, value in fields.items() if getattr(key, name) != value}
    if not changed:
        return key
    for name, value in changed.items():
        setattr(key, name, value)
    key.save(update_fields=list(changed))
    details = {"key_id": key.id, "last4": key.last4,
               **{name: (value.isoformat() if isinstance(value, datetime) else value)
                  for name, value in changed.items()}}
    record_event(mind=key.mind, actor=actor, action="key_update", details=details)
    return key


@transaction.atomic
def key_revoke(*, key: MindKey, actor=None) -> MindKey:
    """Revoke a key; the next request made with it gets a 401."""
    from memories.audit import record_event

    # Locked, so two concurrent revokes record one event and keep the first time.
    locked = MindKey.objects.select_for_update().select_related("mind").get(pk=key.pk)
    if locked.revoked_at is None:
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
        record_event(mind=locked.mind, actor=actor, action="key_revoke",
                     details={"key_id": locked.id, "name": locked.name, "last4": locked.last4})
    key.revoked_at = locked.revoked_at
    return locked


def connection_scopes(write: bool) -> list[str]:
    """The scopes of a connection: ``memory:read``, and ``memory:write`` with it (writing
    implies reading, as a write Mind Key's scope does)."""
    return ([OAuthConnection.READ, OAuthConnection.WRITE] if write
            else [OAuthConnection.READ])


@transaction.atomic
def connection_create(*, mind: Mind, application, approved_by, write: bool,
                      paths: list[str] | None, resource: str) -> OAuthConnection:
    """What a human approved on the consent page: ``application`` (an OAuth client) may
    act on ``mind`` with read (and write) access, within ``paths`` (normalised as a key's:
    clean_key_paths, whose ValidationError it raises), for ``resource`` (this server's
    origin). The authorization code django-oauth-toolkit issues next is tied to it
    (minds.oauth.SynapseOAuth2Validator); audited as ``connection_create``."""
    from memories.audit import record_event

    paths = clean_key_paths(paths or [])
    connection = OAuthConnection.objects.create(
        mind=mind, application=application, approved_by=approved_by,
        scopes=connection_scopes(write), paths=paths, resource=resource)
    details = {"connection_id": connection.id, "client": connection.client_name,
               "client_id": application.client_id, "scopes": connection.scopes}
    if paths:
        details["paths"] = paths
    record_event(mind=mind, actor=approved_by, action="connection_create", details=details)
    return connection


@transaction.atomic
def connection_revoke(*, connection: OAuthConnection, actor=None) -> OAuthConnection:
    """Revoke a connection: its access token is refused from the next request on (a 401
    saying so: the token row stays, tied to the revoked connection, until DOT's
    ``cleartokens`` sweeps it after expiry), its refresh token and any unused
    authorization code are deleted; audited once."""
    from oauth2_provider.models import get_refresh_token_model

    from memories.audit import record_event

    locked = (OAuthConnection.objects.select_for_update()
              .select_related("mind", "application").get(pk=connection.pk))
    if locked.revoked_at is None:
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
        if locked.access_token_id is not None:
            get_refresh_token_model().objects.filter(
                access_token_id=locked.access_token_id).delete()
        if locked.grant_id is not None:
            locked.grant.delete()
        record_event(mind=locked.mind, actor=actor, action="connection_revoke",
                     details={"connection_id": locked.id, "client": locked.client_name})
    connection.revoked_at = locked.revoked_at
    return locked
