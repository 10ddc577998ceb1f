"""Minds (tenants) and the Mind Keys that let agents act on one of them."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone
from oauth2_provider.settings import oauth2_settings

from synapse.ids import new_connection_id, new_invitation_id, new_key_id, new_mind_id


class Role(models.TextChoices):
    """What a member may do on a mind (minds.access says which action needs which)."""

    OWNER = "owner", "owner"
    EDITOR = "editor", "editor"
    VIEWER = "viewer", "viewer"


class MindQuerySet(models.QuerySet):
    def of_member(self, user) -> "MindQuerySet":
        """The minds ``user`` is a member of, each annotated with their ``role``: what
        minds.access narrows by action; views reach minds only through it."""
        return self.filter(memberships__user=user).annotate(role=F("memberships__role"))

    def owned_by(self, user) -> "MindQuerySet":
        """The minds ``user`` owns (alone or with other owners)."""
        return self.of_member(user).filter(role=Role.OWNER)


# The text-search languages a mind may use: PostgreSQL's Snowball configurations of every
# supported release (15 and later), plus ``simple`` (no stemming, any language). Each has
# a ``synapse_<language>`` configuration that folds accents first (memories migration
# 0011, docs/search.md, "Languages").
SEARCH_LANGUAGES = (
    "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish",
    "french", "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian",
    "lithuanian", "nepali", "norwegian", "portuguese", "romanian", "russian", "serbian",
    "simple", "spanish", "swedish", "tamil", "turkish", "yiddish")


def search_config(language: str) -> str:
    """The text-search configuration of a language (``synapse_german``)."""
    return f"synapse_{language}"


class Mind(models.Model):
    class UnverifiedInRecall(models.TextChoices):
        MARKED = "marked", "shown, marked [unverified]"
        HIDDEN = "hidden", "left out until a human verifies them"

    id = models.CharField(primary_key=True, max_length=40, default=new_mind_id, editable=False)
    name = models.CharField(max_length=200)
    # Its people are its memberships (Membership): owners, editors, viewers.
    unverified_in_recall = models.CharField(max_length=10, choices=UnverifiedInRecall.choices,
                                            default=UnverifiedInRecall.MARKED)
    # How its memories are stemmed for keyword search; a change re-indexes them through
    # the embedding worker (memories.text_search), which clears ``reindex_pending``.
    search_language = models.CharField(
        max_length=20, default="english",
        choices=[(language, language.capitalize()) for language in SEARCH_LANGUAGES])
    reindex_pending = models.BooleanField(default=False, editable=False)
    # Whether a write Mind Key may reset a scope of this mind (POST /memory/reset, a hard
    # purge): off by default; the owner may always.
    agents_may_reset = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = MindQuerySet.as_manager()

    # Never stored: the path prefixes the credentials of the request reach, when a
    # path-scoped Mind Key acts on this instance (minds.authentication.AgentPrincipal sets
    # it from MindKey.paths); empty, the whole mind. Memory.objects.for_mind() and
    # MemoryTombstone.objects.for_mind() narrow every query to it (docs/security.md).
    reach: tuple[str, ...] = ()

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def search_config(self) -> str:
        return search_config(self.search_language)

    def owners(self) -> models.QuerySet:
        """The people who own this mind (at least one: minds.services keeps it so)."""
        from django.contrib.auth import get_user_model

        return get_user_model().objects.filter(memberships__mind=self,
                                               memberships__role=Role.OWNER)


class Membership(models.Model):
    """One person's role on one mind. Every mind has at least one owner
    (minds.members keeps it so)."""

    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["mind", "user"],
                                               name="membership_unique")]
        indexes = [models.Index(fields=["user", "mind"], name="membership_user_mind")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.mind_id}"


class InvitationQuerySet(models.QuerySet):
    def open(self) -> "InvitationQuerySet":
        """Neither accepted, declined nor revoked (expired ones included: inviting again
        refreshes them)."""
        return self.filter(accepted_at__isnull=True, declined_at__isnull=True,
                           revoked_at__isnull=True)

    def pending(self) -> "InvitationQuerySet":
        """Open and not expired: what an invitee may still accept."""
        return self.open().filter(expires_at__gt=timezone.now())

    def from_owners(self) -> "InvitationQuerySet":
        """Those whose inviter is still an active owner of the mind: only owners invite, so
        an invitation from someone who is no longer one (or whose account is gone or
        inactive) cannot be taken up (minds.invitations.closed_reason)."""
        return self.filter(Exists(Membership.objects.filter(
            mind=OuterRef("mind"), user=OuterRef("invited_by"), role=Role.OWNER,
            user__is_active=True)))


OPEN_INVITATION = Q(accepted_at__isnull=True, declined_at__isnull=True, revoked_at__isnull=True)


class Invitation(models.Model):
    """An owner asks someone to join a mind with a role (minds.invitations, docs/teams.md):
    an existing account (``user``) or an e-mail address (``email``, lower-case). The link's
    secret token is never stored, only its SHA-256 (``token_hash``). At most one open
    invitation per mind and invitee: inviting again refreshes it."""

    class Status(models.TextChoices):
        OPEN = "open", "open"
        EXPIRED = "expired", "expired"
        ACCEPTED = "accepted", "accepted"
        DECLINED = "declined", "declined"
        REVOKED = "revoked", "revoked"

    id = models.CharField(primary_key=True, max_length=40, default=new_invitation_id,
                          editable=False)
    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(max_length=254, blank=True, default="")
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True, editable=False)
    declined_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(user__isnull=False) | ~Q(email=""),
                                   name="invitation_has_invitee"),
            models.UniqueConstraint(fields=["mind", "user"], condition=OPEN_INVITATION,
                                    name="invitation_open_user"),
            models.UniqueConstraint(fields=["mind", "email"],
                                    condition=OPEN_INVITATION & Q(user__isnull=True),
                                    name="invitation_open_email"),
        ]

    def __str__(self) -> str:
        return f"{self.invitee} as {self.role} of {self.mind_id}"

    @property
    def invitee(self) -> str:
        """Whom it is for: the username, or the e-mail address."""
        return self.user.get_username() if self.user_id else self.email

    @property
    def invitee_details(self) -> dict:
        """Whom it is for, as audit details name them (never the token)."""
        if self.user_id:
            return {"user_id": self.user_id, "username": self.user.get_username()}
        return {"email": self.email}

    @property
    def status(self) -> str:
        if self.accepted_at:
            return self.Status.ACCEPTED
        if self.declined_at:
            return self.Status.DECLINED
        if self.revoked_at:
            return self.Status.REVOKED
        if self.expires_at <= timezone.now():
            return self.Status.EXPIRED
        return self.Status.OPEN


class MindKeyQuerySet(models.QuerySet):
    def usable(self) -> "MindKeyQuerySet":
        """Keys that are neither revoked nor expired."""
        return self.filter(revoked_at__isnull=True).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


class MindKey(models.Model):
    class Scope(models.TextChoices):
        WRITE = "write", "read and write"
        READ = "read", "read only"

    id = models.CharField(primary_key=True, max_length=40, default=new_key_id, editable=False)
    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=200)
    lookup = models.CharField(max_length=20, unique=True, editable=False)
    hashed_secret = models.CharField(max_length=64, editable=False)
    last4 = models.CharField(max_length=4, editable=False)
    scope = models.CharField(max_length=5, choices=Scope.choices, default=Scope.WRITE)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The path prefixes this key reaches, fixed when it is issued (normalised by
    # minds.services.clean_key_paths: memories.paths.normalize_prefixes); empty, the whole
    # mind. A store without a path lands on the first one. (255: memories.paths'
    # MAX_PATH_LENGTH; minds.models imports no memories module.)
    paths = ArrayField(models.CharField(max_length=255), default=list, blank=True)

    objects = MindKeyQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.name} (…{self.last4})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def can_write(self) -> bool:
        return self.scope == self.Scope.WRITE

    @property
    def is_path_scoped(self) -> bool:
        return bool(self.paths)


class OAuthConnectionQuerySet(models.QuerySet):
    def usable(self) -> "OAuthConnectionQuerySet":
        return self.filter(revoked_at__isnull=True)


class OAuthConnection(models.Model):
    """What a human approved on the consent page (/oauth/authorize): one OAuth client may
    act on one of their minds with these scopes and paths, for this resource (the server's
    origin). The tokens django-oauth-toolkit issues for it point here (``access_token``,
    ``grant``: the current ones; a refresh rotates them); revoking it ends them at once.

    An agent authenticated with its access token has exactly the powers a Mind Key with
    the same scope and paths has (minds.authentication.AgentPrincipal)."""

    READ = "memory:read"
    WRITE = "memory:write"
    # How many distinct X-Synapse-Agent-Instance values are remembered per connection.
    MAX_INSTANCE_IDS = 20

    id = models.CharField(primary_key=True, max_length=40, default=new_connection_id,
                          editable=False)
    mind = models.ForeignKey(Mind, on_delete=models.CASCADE, related_name="connections")
    application = models.ForeignKey(oauth2_settings.APPLICATION_MODEL,
                                    on_delete=models.CASCADE, related_name="synapse_connections")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    # "memory:read", and "memory:write" when writes were granted (write implies read).
    scopes = ArrayField(models.CharField(max_length=20), default=list)
    # As MindKey.paths: normalised prefixes (minds.services.clean_key_paths); empty, the
    # whole mind.
    paths = ArrayField(models.CharField(max_length=255), default=list, blank=True)
    # RFC 8707: the origin the tokens are for; a request reaching another origin refuses them.
    resource = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    instance_ids = ArrayField(models.CharField(max_length=200), default=list, blank=True,
                              editable=False)
    grant = models.OneToOneField(oauth2_settings.GRANT_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="synapse_connection",
                                 editable=False)
    access_token = models.OneToOneField(
        oauth2_settings.ACCESS_TOKEN_MODEL, null=True, blank=True,
        on_delete=models.SET_NULL, related_name="synapse_connection", editable=False)

    objects = OAuthConnectionQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.client_name} → {self.mind.name}"

    @property
    def client_name(self) -> str:
        return self.application.name or self.application.client_id

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def can_write(self) -> bool:
        return self.WRITE in self.scopes


class QueuedResetMail(models.Model):
    """A password-reset mail to send (minds.passwords): the request only adds this row, and
    the embedding worker (or ``manage.py send_queued_mail``) builds the link and mails it,
    so an address with an account is answered as fast as one without. Never the link or its
    token: who, the address asked for (re-checked at send time), when, and in development
    the origin the request was made on (synapse.origin.link_origin). One per account."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="+")
    email = models.EmailField(max_length=254)
    origin = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveSmallIntegerField(default=0)
    send_after = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"reset mail for user {self.user_id}"
