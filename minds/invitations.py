"""Invitations to a mind: an owner invites an account (by username) or an e-mail address
with a role; the invitee accepts (becoming a member: minds.services.member_add) or
declines; the owner may revoke; each expires (SYNAPSE_INVITATION_DAYS). One place for the
API and the web UI (docs/teams.md).

Who may accept:

- an invitation to an account: that account, signed in (from its mind list, the API, or
  the link);
- an invitation to an e-mail address: whoever holds the link's token (it proves the
  mailbox), signed in as an account with that address (compared case-insensitively), or
  creating an account from the link (its address is the invitation's), which works even
  where open registration is closed. Signed in as an account with another address, the
  link is refused: sign out and create an account, or ask for an invitation by username.

The token is 40 random base62 characters (238 bits) after ``inv_``; only its SHA-256 is
stored, so the link is shown (and mailed) once: inviting again makes a new one.
"""

import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone

from minds.mail import mail_configured
from minds.models import Invitation, Membership, Mind, Role
from minds.services import account_register, member_add
from synapse.ids import random_token

logger = logging.getLogger("synapse.invitations")

TOKEN_PREFIX = "inv_"  # noqa: S105 (a prefix, not a secret)
TOKEN_LENGTH = 40
# At most this many open invitations per mind (expired ones count until revoked or
# refreshed): a bound on the rows and the mail one owner can cause.
MAX_OPEN_PER_MIND = 100
SUBJECT_TEMPLATE = "minds/invitation_subject.txt"
EMAIL_TEMPLATE = "minds/invitation_email.txt"


class InvitationRefused(ValueError):
    """An invitation that cannot be made, accepted or declined; the message says why
    (shown as a 400, or 409 for ``code == "conflict"``)."""

    code = "invalid"


class InvitationConflict(InvitationRefused):
    code = "conflict"


class InvitationGone(InvitationRefused):
    """Accepted, declined, revoked or expired: the message says which."""

    code = "invitation_closed"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def link_path(token: str) -> str:
    """The path of an invitation's link (after synapse.origin.link_origin: in production
    without SYNAPSE_PUBLIC_URL, the link is this path alone)."""
    return f"/ui/invitations/{token}"


def normalize_email(email: str) -> str:
    return email.strip().lower()


def by_token(token: str) -> Invitation | None:
    """The invitation of a link's token (any state), or None."""
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) > 100:
        return None
    return (Invitation.objects.select_related("mind", "invited_by", "user")
            .filter(token_hash=hash_token(token)).first())


def for_user(user):
    """The invitations ``user`` may accept from their mind list: open, unexpired, to their
    account (e-mail invitations need their link)."""
    return (Invitation.objects.pending().from_owners().filter(user=user)
            .select_related("mind", "invited_by").order_by("-created_at", "-id"))


FORMER_OWNER = ("This invitation was sent by someone who is no longer an owner of this "
                "mind: ask a current owner to invite you again.")


def closed_reason(invitation: Invitation) -> str | None:
    """Why ``invitation`` can no longer be answered, or None while it can. Only owners
    invite: one whose inviter is no longer an active owner of the mind (stepped down,
    removed, left, account deleted or deactivated) is closed too, even if it was never
    revoked (minds.services revokes them when an owner stops being one)."""
    reason = {
        Invitation.Status.ACCEPTED: "This invitation has already been accepted.",
        Invitation.Status.DECLINED: "This invitation was declined.",
        Invitation.Status.REVOKED: "This invitation was withdrawn by an owner of the mind.",
        Invitation.Status.EXPIRED: "This invitation has expired: ask an owner of the mind "
                                   "to invite you again.",
    }.get(invitation.status)
    if reason is None and not inviter_is_owner(invitation):
        return FORMER_OWNER
    return reason


def inviter_is_owner(invitation: Invitation) -> bool:
    """Whether who sent ``invitation`` is still an active owner of its mind (one query)."""
    return Invitation.objects.filter(pk=invitation.pk).from_owners().exists()


@dataclass(frozen=True)
class Invited:
    """What inviting answers: the invitation, its link (shown once), and whether the link
    was mailed."""

    invitation: Invitation
    link: str
    emailed: bool
    refreshed: bool


def invite(*, mind: Mind, actor, role: str, origin: str, username: str = "",
           email: str = "") -> Invited:
    """Invite an account (``username``) or an e-mail address to ``mind`` with ``role``, as
    ``actor`` (an owner: the caller checked MANAGE). An open invitation to the same invitee
    is refreshed: new token, new expiry, the new role. The link is mailed when the server
    can send mail (minds.mail.mail_configured) and the invitee has an address; a
    failed delivery is logged (without the link) and the answer says it was not mailed.

    InvitationRefused: no such account, a current member, too many open invitations."""
    invitation, token, refreshed = _invite(mind=mind, actor=actor, role=role,
                                           username=username, email=email)
    link = origin + link_path(token)
    return Invited(invitation=invitation, link=link, refreshed=refreshed,
                   emailed=_mail(invitation, link))


@transaction.atomic
def _invite(*, mind, actor, role, username, email):
    from memories.audit import record_event

    if role not in Role.values:
        raise InvitationRefused(f"Unknown role {role!r}.")
    if bool(username) == bool(email):
        raise InvitationRefused("Invite either a username or an e-mail address.")
    # Serialised per mind: two invitations at once cannot pass the limit or collide.
    Mind.objects.select_for_update().filter(pk=mind.pk).values_list("pk").first()
    user = None
    if username:
        user = get_user_model().objects.filter(username__iexact=username.strip(),
                                               is_active=True).first()
        if user is None:
            raise InvitationRefused(f"There is no account named {username.strip()!r}.")
        if Membership.objects.filter(mind=mind, user=user).exists():
            raise InvitationRefused(f"{user.get_username()} is already a member of this mind.")
        existing = Invitation.objects.open().filter(mind=mind, user=user)
    else:
        email = normalize_email(email)
        if Membership.objects.filter(mind=mind, user__email__iexact=email).exists():
            raise InvitationRefused("A member of this mind already has this address.")
        existing = Invitation.objects.open().filter(mind=mind, user__isnull=True, email=email)
    invitation = existing.select_for_update().first()
    token = TOKEN_PREFIX + random_token(TOKEN_LENGTH)
    expires_at = timezone.now() + timedelta(days=settings.SYNAPSE["INVITATION_DAYS"])
    refreshed = invitation is not None
    if refreshed:
        invitation.role, invitation.invited_by = role, actor
        invitation.token_hash, invitation.expires_at = hash_token(token), expires_at
        invitation.save(update_fields=["role", "invited_by", "token_hash", "expires_at"])
    else:
        if Invitation.objects.open().filter(mind=mind).count() >= MAX_OPEN_PER_MIND:
            raise InvitationConflict(
                f"This mind already has {MAX_OPEN_PER_MIND} open invitations: revoke some "
                "first.")
        invitation = Invitation.objects.create(
            mind=mind, role=role, user=user, email="" if user else email, invited_by=actor,
            token_hash=hash_token(token), expires_at=expires_at)
    record_event(mind=mind, actor=actor, action="invitation_create",
                 details={"invitation_id": invitation.id, **invitation.invitee_details,
                          "role": role, "refreshed": refreshed})
    return invitation, token, refreshed


def _mail(invitation: Invitation, link: str) -> bool:
    """Mail the link to the invitee, if this server sends mail and they have an address."""
    address = invitation.user.email if invitation.user_id else invitation.email
    if not address or not mail_configured():
        return False
    inviter = invitation.invited_by.get_username() if invitation.invited_by else "An owner"
    context = {"invitation": invitation, "mind": invitation.mind, "inviter": inviter,
               "link": link, "days": settings.SYNAPSE["INVITATION_DAYS"],
               "for_account": bool(invitation.user_id)}
    subject = " ".join(render_to_string(SUBJECT_TEMPLATE, context).split())
    try:
        send_mail(subject, render_to_string(EMAIL_TEMPLATE, context),
                  settings.DEFAULT_FROM_EMAIL, [address])
    except Exception as error:  # noqa: BLE001 (SMTP errors are many; the owner gets the link)
        logger.warning("invitation %s not mailed: %s", invitation.id,
                       error.__class__.__name__)
        return False
    return True


def _locked(invitation: Invitation) -> Invitation:
    """The invitation again, locked; InvitationGone when it can no longer be answered."""
    locked = (Invitation.objects.select_for_update(of=("self",))
              .select_related("mind", "user").get(pk=invitation.pk))
    reason = closed_reason(locked)
    if reason is not None:
        raise InvitationGone(reason)
    return locked


def may_answer(invitation: Invitation, user, *, with_token: bool) -> str | None:
    """None when ``user`` may accept or decline ``invitation``; otherwise why not."""
    if invitation.user_id is not None:
        if invitation.user_id != user.pk:
            return "This invitation is for another account."
        return None
    if not with_token:
        return "An invitation to an e-mail address is accepted from its link."
    if normalize_email(user.email or "") != invitation.email:
        return (f"This invitation is for {invitation.email}, and you are signed in as "
                f"{user.get_username()} with another address: sign out and create an "
                "account from the link, or ask an owner to invite your username.")
    return None


@transaction.atomic
def accept(*, invitation: Invitation, user, with_token: bool = False) -> Membership:
    """``user`` accepts: they become a member with the invitation's role (``member_add``,
    audited with them as the actor) and the invitation is closed, in one transaction.
    InvitationRefused when they may not (``may_answer``) or are a member already."""
    locked = _locked(invitation)
    reason = may_answer(locked, user, with_token=with_token)
    if reason is not None:
        raise InvitationRefused(reason)
    current = Membership.objects.filter(mind_id=locked.mind_id, user=user).first()
    if current is not None:
        raise InvitationConflict(f"You are already a member of this mind ({current.role}).")
    membership = member_add(mind=locked.mind, user=user, role=locked.role, actor=user)
    locked.accepted_at, locked.user = timezone.now(), user
    locked.save(update_fields=["accepted_at", "user"])
    invitation.accepted_at = locked.accepted_at
    return membership


@transaction.atomic
def decline(*, invitation: Invitation, user=None, with_token: bool = False) -> Invitation:
    """The invitee declines (signed in as ``user``, or holding the link's token)."""
    from memories.audit import record_event

    locked = _locked(invitation)
    if user is not None and not with_token:
        reason = may_answer(locked, user, with_token=False)
        if reason is not None:
            raise InvitationRefused(reason)
    elif not with_token:
        raise InvitationRefused("Sign in, or use the invitation's link, to decline it.")
    locked.declined_at = timezone.now()
    locked.save(update_fields=["declined_at"])
    record_event(mind=locked.mind, actor=user, action="invitation_decline",
                 details={"invitation_id": locked.id, **locked.invitee_details})
    invitation.declined_at = locked.declined_at
    return locked


@transaction.atomic
def revoke(*, invitation: Invitation, actor) -> Invitation:
    """An owner withdraws an invitation (the caller checked MANAGE); its link stops working.
    Revoking a closed one changes nothing."""
    from memories.audit import record_event

    locked = (Invitation.objects.select_for_update(of=("self",))
              .select_related("mind", "user").get(pk=invitation.pk))
    if locked.accepted_at or locked.declined_at or locked.revoked_at:
        return locked
    locked.revoked_at = timezone.now()
    locked.save(update_fields=["revoked_at"])
    record_event(mind=locked.mind, actor=actor, action="invitation_revoke",
                 details={"invitation_id": locked.id, **locked.invitee_details})
    return locked


class UsernameTaken(InvitationRefused):
    def __init__(self):
        super().__init__("This username is taken: choose another.")


@transaction.atomic
def register_and_accept(*, invitation: Invitation, username: str, password: str):
    """Create an account from an e-mail invitation's link (its address is the
    invitation's; the caller validated the password) and accept the invitation with it,
    in one transaction: open registration need not be. Returns (user, membership);
    UsernameTaken leaves the invitation open."""
    locked = _locked(invitation)
    if locked.user_id is not None:
        raise InvitationRefused("This invitation is for an existing account: sign in as "
                                f"{locked.user.get_username()} to accept it.")
    user = account_register(username=username, password=password, email=locked.email)
    if user is None:
        raise UsernameTaken
    return user, accept(invitation=locked, user=user, with_token=True)
