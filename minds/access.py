"""Who may do what on a mind: the one permission check of the human API, the web UI and the
admin (docs/teams.md). A person reaches a mind through their membership (minds.models
.Membership); their role says which actions they may take:

- ``read``: memories, versions, citations, search, recall, stats, activity, export;
- ``write``: store, edit, verify/unverify, trash/restore, revert, bulk review, import,
  compaction, sync;
- ``manage``: members and invitations, Mind Keys, OAuth connections, settings, scope reset,
  purge, deletion.

Someone who is not a member never learns the mind exists (a 404, as a missing one); a member
whose role does not allow the action gets a 403 naming the role it needs.
"""

from enum import StrEnum

from django.core.exceptions import PermissionDenied
from django.http import Http404

from minds.models import Mind, MindQuerySet, Role


class Action(StrEnum):
    READ = "read"
    WRITE = "write"
    MANAGE = "manage"


# The least role each action needs; roles are ordered viewer < editor < owner.
LEAST_ROLE = {Action.READ: Role.VIEWER, Action.WRITE: Role.EDITOR, Action.MANAGE: Role.OWNER}
RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.OWNER: 2}
NO_SUCH_MIND = "No such mind."


def allows(role: str | None, action: Action) -> bool:
    """Whether a member with ``role`` may take ``action`` (None: not a member)."""
    return role is not None and RANK[Role(role)] >= RANK[LEAST_ROLE[action]]


def roles_allowed(action: Action) -> list[str]:
    """The roles that may take ``action``, least first (for messages and the API docs)."""
    return [role.value for role in sorted(Role, key=RANK.__getitem__) if allows(role, action)]


def least_role(action: Action) -> str:
    """Who may take ``action``, in words: "viewer or above", "editor or above", "owner"
    (the role line of the API docs, docs/teams.md)."""
    role = LEAST_ROLE[action]
    return role.value if role == max(Role, key=RANK.__getitem__) else f"{role.value} or above"


def refusal(role: str, action: Action) -> str:
    """What a member is told when their role does not allow ``action``."""
    allowed = roles_allowed(action)
    who = " and ".join(f"{name}s" for name in allowed)
    return f"Your role on this mind ({role}) does not allow this: only {who} may."


class RoleRefused(PermissionDenied):
    """A member whose role does not allow the action (403, code ``insufficient_role``)."""


class NoSuchMind(Http404):
    """Not a member of the mind, or no such mind: the same 404 (``No such mind.``)."""


def minds_for(user, action: Action = Action.READ) -> MindQuerySet:
    """The minds ``user`` may take ``action`` on, each annotated with their ``role``."""
    allowed = roles_allowed(action)
    minds = Mind.objects.of_member(user)
    return minds if len(allowed) == len(Role) else minds.filter(role__in=allowed)


def check(mind: Mind, action: Action) -> Mind:
    """``mind`` (read through ``minds_for`` or ``member_mind``, so it carries the person's
    ``role``) if that role allows ``action``; RoleRefused otherwise."""
    if not allows(mind.role, action):
        raise RoleRefused(refusal(mind.role, action))
    return mind


def member_mind(user, mind_id: str, action: Action, *, minds: MindQuerySet | None = None
                ) -> Mind:
    """The mind ``mind_id`` with the person's ``role``, if they may take ``action`` on it:
    NoSuchMind (an Http404) when they are not a member or it does not exist, RoleRefused
    (403) when their role does not allow the action. ``minds`` narrows or annotates the
    lookup (e.g. counts)."""
    queryset = minds if minds is not None else Mind.objects.of_member(user)
    mind = queryset.filter(pk=mind_id).first() if isinstance(mind_id, str) else None
    if mind is None:
        raise NoSuchMind(NO_SUCH_MIND)
    return check(mind, action)
