"""The human API: accounts and tokens, minds, the Mind Keys, members and invitations of a
mind (docs/api.md)."""

from contextlib import contextmanager

from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.functional import cached_property
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError
from rest_framework_simplejwt.tokens import RefreshToken
from rest_framework_simplejwt.views import TokenObtainPairView, TokenRefreshView

from memories.export import export_account
from minds import invitations
from minds.access import Action, member_mind
from minds.api.serializers import (
    AcceptedSerializer,
    AccountDeleteSerializer,
    AccountExportQuerySerializer,
    DetailSerializer,
    InvitationCreateSerializer,
    InvitationSerializer,
    InvitationTokenSerializer,
    InvitedSerializer,
    IssuedMindKeySerializer,
    LoginSerializer,
    LogoutSerializer,
    MemberSerializer,
    MemberUpdateSerializer,
    MindCreateSerializer,
    MindDeleteQuerySerializer,
    MindDeleteSerializer,
    MindKeyCreateSerializer,
    MindKeySerializer,
    MindSerializer,
    MindUpdateSerializer,
    PasswordChangeSerializer,
    PasswordResetConfirmSerializer,
    PasswordResetSerializer,
    RefreshSerializer,
    RegisteredSerializer,
    RegisterSerializer,
    TokenPairSerializer,
    UserSerializer,
)
from minds.models import Invitation, Membership, Mind, MindKey
from minds.passwords import mail_configured, password_change, password_reset_send, reset_wait
from minds.services import (
    LastOwner,
    account_delete,
    account_register,
    key_issue,
    key_revoke,
    member_remove,
    member_set_role,
    mind_create,
    mind_delete,
    mind_update,
    minds_with_counts,
    registration_open,
)
from synapse.api import (
    HUMAN_AUTH,
    Conflict,
    HumanOnly,
    ServiceUnavailable,
    SynapseAPIView,
    error_responses,
)
from synapse.api.views import mind_action
from synapse.origin import link_origin
from synapse.throttling import LoginAttemptThrottle, ScopeRateThrottle

REALM = 'Bearer realm="synapse"'
# Said whether or not the username was free, so registering tells nobody who has an account.
REGISTERED = ("Unless this username was already taken, the account now exists: sign in with "
              "POST /auth/login. If signing in fails, choose another username.")
ERRORS = error_responses(not_found="No such mind or key (or not yours)",
                        forbidden="Mind Keys cannot use human routes")
ME_ERRORS = {401: ERRORS[401], 403: ERRORS[403]}
TOKEN_ERRORS = {400: OpenApiResponse(description="Invalid input (error shape)"),
                401: OpenApiResponse(description="Wrong credentials or invalid token"),
                429: OpenApiResponse(description="Too many attempts; see Retry-After")}


# Every route in this module is for humans: a Mind Key is refused with 403 (``HumanOnly``),
# except on the token routes, which ignore it (they take credentials from the body). A mind
# or key of another user is a 404, the same as a missing one (``HumanViewSet``).

# -- Accounts -----------------------------------------------------------------------------
# Five one-method views rather than one AuthViewSet: four of them authenticate by the body
# and none by a header, /auth/me by the usual credentials; login and refresh are
# simplejwt's own views; and each has its own throttles. As actions of one viewset every
# one of those would be a per-action override.

class TokenRouteMixin:
    """Token routes authenticate by what the body carries, never by a header."""

    authentication_classes = ()
    permission_classes = (AllowAny,)
    www_authenticate_realm = "synapse"

    def get_authenticate_header(self, request):
        return REALM


class RegisterView(TokenRouteMixin, SynapseAPIView):
    throttle_scope = "login"

    @extend_schema(operation_id="auth_register", request=RegisterSerializer,
                   responses={201: RegisteredSerializer,
                              403: OpenApiResponse(description="Registration is switched off"),
                              **TOKEN_ERRORS}, tags=["auth"])
    def post(self, request):
        """Create an account (open by default in development, closed in production; see
        SYNAPSE_ALLOW_REGISTRATION). The answer is the same whether the username was free
        or taken: sign in to find out.

        With ``invitation`` (the token of an invitation to an e-mail address) the account is
        created even where registration is closed, gets the invitation's address, and joins
        its mind at once; a taken username is then a 400 (the invitation stays open)."""
        token = request.data.get("invitation") if isinstance(request.data, dict) else None
        if token is None and not registration_open():
            raise exceptions.PermissionDenied("Registration is switched off on this server.",
                                              code="registration_closed")
        serializer = RegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        if "invitation" in fields:
            invitation = invitation_of_token(fields.pop("invitation"))
            with refusals():
                invitations.register_and_accept(invitation=invitation,
                                                username=fields["username"],
                                                password=fields["password"])
            return Response({"username": fields["username"],
                             "detail": f"The account exists and is a {invitation.role} of "
                                       f"{invitation.mind.name}: sign in with POST "
                                       "/auth/login."}, status=status.HTTP_201_CREATED)
        account_register(**fields)
        return Response({"username": serializer.validated_data["username"],
                         "detail": REGISTERED}, status=status.HTTP_201_CREATED)


class LoginView(TokenRouteMixin, SynapseAPIView, TokenObtainPairView):
    serializer_class = LoginSerializer
    throttle_classes = [ScopeRateThrottle, LoginAttemptThrottle]

    @extend_schema(operation_id="auth_login", request=LoginSerializer,
                   responses={200: TokenPairSerializer, **TOKEN_ERRORS}, tags=["auth"])
    def post(self, request, *args, **kwargs):
        """Exchange a username and password for an access and a refresh token."""
        return super().post(request, *args, **kwargs)


class RefreshView(TokenRouteMixin, SynapseAPIView, TokenRefreshView):
    serializer_class = RefreshSerializer

    @extend_schema(operation_id="auth_refresh", request=RefreshSerializer,
                   responses={200: TokenPairSerializer, **TOKEN_ERRORS}, tags=["auth"])
    def post(self, request, *args, **kwargs):
        """A new access token and a new refresh token; the old refresh token stops working."""
        return super().post(request, *args, **kwargs)


class LogoutView(TokenRouteMixin, SynapseAPIView):
    throttle_scope = "login"

    @extend_schema(operation_id="auth_logout", request=LogoutSerializer,
                   responses={204: None, **TOKEN_ERRORS}, tags=["auth"])
    def post(self, request):
        """Blacklist a refresh token: it can no longer be refreshed. Access tokens already
        issued expire on their own (minutes)."""
        serializer = LogoutSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            RefreshToken(serializer.validated_data["refresh"]).blacklist()
        except TokenError as error:
            raise InvalidToken(error.args[0]) from error
        return Response(status=status.HTTP_204_NO_CONTENT)


RESET_SENT = ("If an account has this address, a link to choose a new password is on its "
              "way; it works once, for a limited time.")


class PasswordChangeView(SynapseAPIView):
    permission_classes = [HumanOnly]
    # The current password is a password attempt: the sign-in budget.
    throttle_scope = "login"

    @extend_schema(operation_id="auth_password_change", auth=HUMAN_AUTH,
                   request=PasswordChangeSerializer,
                   responses={200: TokenPairSerializer, **TOKEN_ERRORS,
                              403: ME_ERRORS[403]}, tags=["auth"])
    def post(self, request):
        """Change your password. Every JWT you hold (this one too) and every other browser
        session ends; the answer is a new token pair. Mind Keys and agents' connections
        keep working."""
        serializer = PasswordChangeSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        password_change(user=request.user, new_password=serializer.validated_data["new_password"])
        refresh = RefreshToken.for_user(request.user)
        return Response({"access": str(refresh.access_token), "refresh": str(refresh)})


class PasswordResetView(TokenRouteMixin, SynapseAPIView):
    throttle_classes = ()  # reset_wait spends its budgets (per address and per mailbox)

    @extend_schema(operation_id="auth_password_reset", request=PasswordResetSerializer,
                   responses={202: DetailSerializer, **TOKEN_ERRORS,
                              503: OpenApiResponse(description="E-mail is not set up on "
                                                               "this server")},
                   tags=["auth"])
    def post(self, request):
        """Mail a link to choose a new password to the accounts with this address. The
        answer is the same whether or not one has it."""
        if not mail_configured():
            raise ServiceUnavailable("Password reset by e-mail is not set up on this server "
                                     "(EMAIL_HOST); ask its administrator.")
        serializer = PasswordResetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        email = serializer.validated_data["email"]
        wait = reset_wait(request, email)
        if wait is not None:
            raise exceptions.Throttled(wait)
        password_reset_send(request, email)
        return Response({"detail": RESET_SENT}, status=status.HTTP_202_ACCEPTED)


class PasswordResetConfirmView(TokenRouteMixin, SynapseAPIView):
    throttle_scope = "login"

    @extend_schema(operation_id="auth_password_reset_confirm",
                   request=PasswordResetConfirmSerializer,
                   responses={200: DetailSerializer, **TOKEN_ERRORS}, tags=["auth"])
    def post(self, request):
        """Set a new password with the ``uid`` and ``token`` of a reset link; every sign-in
        of the account ends, and the link stops working."""
        serializer = PasswordResetConfirmSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        password_change(user=serializer.validated_data["user"],
                        new_password=serializer.validated_data["new_password"])
        return Response({"detail": "Password changed: sign in with it (POST /auth/login)."})


class MeView(SynapseAPIView):
    permission_classes = [HumanOnly]
    # The password of a deletion is a password attempt: the sign-in budget.
    throttle_scope = {"DELETE": "login"}

    @extend_schema(operation_id="auth_me", auth=HUMAN_AUTH,
                   responses={200: UserSerializer, **ME_ERRORS},
                   tags=["auth"])
    def get(self, request):
        """The signed-in human."""
        return Response(UserSerializer(request.user).data)

    @extend_schema(operation_id="auth_me_delete", auth=HUMAN_AUTH,
                   request=AccountDeleteSerializer,
                   responses={204: None, **TOKEN_ERRORS, 403: ME_ERRORS[403]}, tags=["auth"])
    def delete(self, request):
        """Delete your account, confirmed with your username (``confirm``) and your
        password. The minds you own alone are deleted with everything in them; from the
        minds you share with another owner you leave (the Mind Keys and connections you
        gave out there are revoked); what you did in them stays in their history as
        "deleted user <n>". Every sign-in of yours ends. Export first: GET /auth/export."""
        serializer = AccountDeleteSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        account_delete(user=request.user, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccountExportView(SynapseAPIView):
    permission_classes = [HumanOnly]
    throttle_scope = "export"
    query_serializer = AccountExportQuerySerializer

    @extend_schema(operation_id="auth_export", auth=HUMAN_AUTH,
                   parameters=[AccountExportQuerySerializer],
                   responses={(200, "application/json"): OpenApiTypes.OBJECT,
                              400: TOKEN_ERRORS[400], **ME_ERRORS, 429: TOKEN_ERRORS[429]},
                   tags=["auth"])
    def get(self, request):
        """Everything you own, streamed as one JSON document: your account, memberships
        with roles, the Mind Keys you issued (never their secrets) and the connections you
        approved, and every mind you own in exactly the format of GET /mind/export (each
        imports with POST /memory/mind-import)."""
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response = StreamingHttpResponse(
            export_account(user=request.user, reveal=self.query["include_credentials"]),
            content_type="application/json")
        response["Content-Disposition"] = (
            f'attachment; filename="synapse-account-{request.user.pk}-{stamp}.json"')
        return response


# -- Minds and their keys -----------------------------------------------------------------

class HumanViewSet(viewsets.ViewSetMixin, SynapseAPIView):
    """A viewset for the signed-in human, with the strict query parameters of every route.

    Objects are looked up in ``get_queryset()`` only, so another user's is a 404 named by
    ``not_found``, the same as a missing one. (Not DRF's GenericViewSet: its serializer
    machinery is unused here, and OPTIONS would ask it for a ``serializer_class``.)"""

    permission_classes = [HumanOnly]
    resource_name = ""
    not_found = "Not found."

    def get_view_name(self):
        # What OPTIONS has always named these routes: "Mind Collection", "Mind Key Detail".
        return f"{self.resource_name} {'Detail' if self.detail else 'Collection'}"

    def get_queryset(self):
        raise NotImplementedError

    def get_object(self):
        obj = self.get_queryset().filter(pk=self.kwargs[self.lookup_url_kwarg]).first()
        if obj is None:
            raise exceptions.NotFound(self.not_found)
        return obj


@extend_schema(tags=["minds"], auth=HUMAN_AUTH)
class MindViewSet(HumanViewSet):
    resource_name = "Mind"
    lookup_url_kwarg = "mind_id"
    not_found = "No such mind."
    query_serializers = {"DELETE": MindDeleteQuerySerializer}
    # What each action does to the mind in its path (minds.access; the OpenAPI role line
    # reads it too). list and create name no mind: any signed-in person.
    mind_action = {"retrieve": Action.READ, "partial_update": Action.MANAGE,
                   "destroy": Action.MANAGE}

    def get_queryset(self):
        return minds_with_counts(member=self.request.user)

    def get_mind(self) -> Mind:
        """The mind in the path with its counts, if the human's role allows what the
        action does (404 for a non-member, 403 for a role that does not: minds.access)."""
        return member_mind(self.request.user, self.kwargs["mind_id"],
                           mind_action(self, self.request.method), minds=self.get_queryset())

    @extend_schema(operation_id="minds_list", responses={200: MindSerializer(many=True),
                                                         **ERRORS})
    def list(self, request):
        """The minds you are a member of (yours and those shared with you), oldest first,
        with your role and their memory, unverified and key counts."""
        minds = self.get_queryset().order_by("created_at", "id")
        return Response(MindSerializer(minds, many=True).data)

    @extend_schema(operation_id="minds_create", request=MindCreateSerializer,
                   responses={201: MindSerializer, **ERRORS})
    def create(self, request):
        """Create a mind (a memory space); hand its agents a key with POST /minds/{id}/keys."""
        serializer = MindCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind = mind_create(owner=request.user, actor=request.user, **serializer.validated_data)
        # Read back through the queryset: the answer carries the counts.
        return Response(MindSerializer(self.get_queryset().get(pk=mind.pk)).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="minds_get", responses={200: MindSerializer, **ERRORS})
    def retrieve(self, request, mind_id: str):
        """One of your minds."""
        return Response(MindSerializer(self.get_mind()).data)

    @extend_schema(operation_id="minds_update", request=MindUpdateSerializer,
                   responses={200: MindSerializer, **ERRORS})
    def partial_update(self, request, mind_id: str):
        """Rename a mind, set its recall policy for unverified memories or its search
        language (a new language re-indexes its memories in the background)."""
        mind = self.get_mind()
        serializer = MindUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind_update(mind=mind, actor=request.user, **serializer.validated_data)
        return Response(MindSerializer(self.get_mind()).data)

    @extend_schema(operation_id="minds_delete", request=MindDeleteSerializer,
                   parameters=[OpenApiParameter("confirm", str, required=False,
                                                description="The mind's name (or send it "
                                                "as {\"confirm\": …} in the body).")],
                   responses={204: None, **ERRORS})
    def destroy(self, request, mind_id: str):
        """Delete a mind and everything of it, for every member. Confirm with the mind's
        exact name."""
        mind = self.get_mind()
        confirm = self.query.get("confirm")
        if request.data:
            serializer = MindDeleteSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            confirm = serializer.validated_data["confirm"]
        if confirm is None:
            raise exceptions.ValidationError({"confirm": [
                "Deleting a mind removes every memory of it: confirm with its name, "
                "{\"confirm\": \"<name>\"} or ?confirm=<name>."]})
        if confirm != mind.name:
            raise exceptions.ValidationError({"confirm": ["This is not the mind's name."]})
        mind_delete(mind=mind, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["minds"], auth=HUMAN_AUTH)
class MindKeyViewSet(HumanViewSet):
    # The keys of one mind, registered under minds/<mind_id>/keys (minds.api.urls).
    resource_name = "Mind Key"
    lookup_url_kwarg = "key_id"
    not_found = "No such key."
    # Keys are the owners' (minds.access): every action.
    mind_action = Action.MANAGE

    @cached_property
    def mind(self) -> Mind:
        """The mind in the path, if the signed-in human owns it (404 for a non-member, 403
        for an editor or viewer)."""
        return member_mind(self.request.user, self.kwargs["mind_id"],
                           mind_action(self, self.request.method))

    def get_queryset(self):
        return MindKey.objects.filter(mind=self.mind).select_related("mind")

    @extend_schema(operation_id="keys_list", responses={200: MindKeySerializer(many=True),
                                                        **ERRORS})
    def list(self, request, mind_id: str):
        """The keys of a mind, newest first, revoked ones included (never the
        secret)."""
        keys = self.get_queryset().order_by("-created_at", "-id")
        return Response(MindKeySerializer(keys, many=True).data)

    @extend_schema(operation_id="keys_create", request=MindKeyCreateSerializer,
                   responses={201: IssuedMindKeySerializer, **ERRORS})
    def create(self, request, mind_id: str):
        """Issue a key. The answer carries the key itself: store it now, it is never shown
        again."""
        serializer = MindKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key, plaintext = key_issue(mind=self.mind, created_by=request.user,
                                   **serializer.validated_data)
        key.key = plaintext
        return Response(IssuedMindKeySerializer(key).data, status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="keys_get", responses={200: MindKeySerializer, **ERRORS})
    def retrieve(self, request, mind_id: str, key_id: str):
        """One key of a mind (never the secret)."""
        return Response(MindKeySerializer(self.get_object()).data)

    @extend_schema(operation_id="keys_revoke", responses={200: MindKeySerializer, **ERRORS})
    def destroy(self, request, mind_id: str, key_id: str):
        """Revoke a key: the next request made with it gets a 401. Revoking twice is
        fine."""
        key = key_revoke(key=self.get_object(), actor=request.user)
        return Response(MindKeySerializer(key).data)


# -- Members and invitations --------------------------------------------------------------

MEMBER_ERRORS = {**error_responses(not_found="No such mind or member (or not yours)",
                                   forbidden="Your role does not allow this, or Mind Keys"),
                 409: OpenApiResponse(description="last_owner: a mind keeps at least one "
                                                  "owner (error shape)")}
INVITATION_ERRORS = {**error_responses(not_found="No such mind or invitation (or not yours)",
                                       forbidden="Your role does not allow this, or Mind "
                                                 "Keys"),
                     409: OpenApiResponse(description="Conflicts with the invitation's state "
                                                      "(error shape)"),
                     429: OpenApiResponse(description="Too many invitations; see "
                                                      "Retry-After")}


@contextmanager
def refusals():
    """Service refusals of members and invitations, as API errors: LastOwner a 409
    ``last_owner``, an invitation that is closed or conflicts a 409, any other refusal
    a 400."""
    try:
        yield
    except LastOwner as error:
        raise Conflict(str(error), code="last_owner") from error
    except (invitations.InvitationConflict, invitations.InvitationGone) as error:
        raise Conflict(str(error), code=error.code) from error
    except invitations.InvitationRefused as error:
        raise exceptions.ValidationError({"non_field_errors": [str(error)]}) from error


def invitation_of_token(token: str) -> Invitation:
    invitation = invitations.by_token(token)
    if invitation is None:
        raise exceptions.NotFound("No such invitation: check the link.")
    return invitation


USER_ID = OpenApiParameter("user_id", int, OpenApiParameter.PATH,
                          description="The member's user id (GET /minds/{mind_id}/members).")


@extend_schema(tags=["members"], auth=HUMAN_AUTH)
class MemberViewSet(HumanViewSet):
    """The members of one mind, registered under minds/<mind_id>/members."""

    resource_name = "Member"
    lookup_url_kwarg = "user_id"
    not_found = "No such member."
    # minds.access, and the OpenAPI role line: anyone on the mind sees who else is; changing
    # or removing a member is the owners' (removing yourself is leaving: ``destroy``).
    mind_action = {"list": Action.READ, "partial_update": Action.MANAGE,
                   "destroy": Action.MANAGE}

    def mind(self, action: Action | None = None) -> Mind:
        return member_mind(self.request.user, self.kwargs["mind_id"],
                           action or mind_action(self, self.request.method))

    def user_id(self) -> int | None:
        """The user id in the path (a number; anything else matches no member)."""
        value = self.kwargs["user_id"]
        return int(value) if value.isascii() and value.isdigit() and len(value) < 19 else None

    def get_object(self, mind: Mind) -> Membership:
        membership = (Membership.objects.filter(mind=mind, user_id=self.user_id())
                      .select_related("user").first())
        if membership is None:
            raise exceptions.NotFound(self.not_found)
        return membership

    @extend_schema(operation_id="members_list",
                   responses={200: MemberSerializer(many=True), **MEMBER_ERRORS})
    def list(self, request, mind_id: str):
        """Who is on the mind, with their roles, oldest member first."""
        members = Membership.objects.filter(mind=self.mind()).select_related("user")
        return Response(MemberSerializer(members, many=True).data)

    @extend_schema(operation_id="members_update", request=MemberUpdateSerializer,
                   parameters=[USER_ID],
                   responses={200: MemberSerializer, **MEMBER_ERRORS})
    def partial_update(self, request, mind_id: str, user_id: str):
        """Change a member's role. Making another member owner, then yourself editor or
        viewer (or leaving), transfers ownership; the last owner cannot step down (409). An
        owner who stops being one has the Mind Keys they issued and the connections they
        approved on this mind revoked."""
        membership = self.get_object(self.mind())
        serializer = MemberUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with refusals():
            membership = member_set_role(membership=membership, actor=request.user,
                                         **serializer.validated_data)
        return Response(MemberSerializer(membership).data)

    @extend_schema(operation_id="members_remove", parameters=[USER_ID],
                   responses={204: None, **MEMBER_ERRORS})
    def destroy(self, request, mind_id: str, user_id: str):
        """Remove a member, or leave the mind: with your own user id, any role may (the
        last owner cannot: 409). A departing owner's keys and connections on this mind are
        revoked."""
        leaving = self.user_id() == request.user.pk
        membership = self.get_object(self.mind(Action.READ if leaving else None))
        with refusals():
            member_remove(membership=membership, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["members"], auth=HUMAN_AUTH)
class MindInvitationViewSet(HumanViewSet):
    """The invitations of one mind, registered under minds/<mind_id>/invitations: owners
    only."""

    resource_name = "Invitation"
    lookup_url_kwarg = "invitation_id"
    not_found = "No such invitation."
    throttle_scope = {"POST": "invite"}
    mind_action = Action.MANAGE  # every action

    @cached_property
    def mind(self) -> Mind:
        return member_mind(self.request.user, self.kwargs["mind_id"],
                           mind_action(self, self.request.method))

    def get_queryset(self):
        return Invitation.objects.filter(mind=self.mind).select_related(
            "mind", "user", "invited_by")

    @extend_schema(operation_id="invitations_list",
                   responses={200: InvitationSerializer(many=True), **INVITATION_ERRORS})
    def list(self, request, mind_id: str):
        """The open invitations of the mind (expired ones too, until revoked or renewed),
        newest first; never their links."""
        pending = self.get_queryset().open().order_by("-created_at", "-id")
        return Response(InvitationSerializer(pending, many=True).data)

    @extend_schema(operation_id="invitations_create", request=InvitationCreateSerializer,
                   responses={201: InvitedSerializer, **INVITATION_ERRORS})
    def create(self, request, mind_id: str):
        """Invite an account (``username``) or an e-mail address (``email``) with a role.
        The answer carries the link, shown this once: it is mailed when the server sends
        mail and the invitee has an address (``emailed``); otherwise hand it over yourself.
        Inviting the same invitee again renews the open invitation (new link, new expiry,
        the new role). A current member is a 400. Rate limited (``invite``)."""
        mind = self.mind  # the role first: a refused request is refused whatever it sent
        serializer = InvitationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with refusals():
            invited = invitations.invite(mind=mind, actor=request.user,
                                         origin=link_origin(request),
                                         **serializer.validated_data)
        invitation = invited.invitation
        invitation.link, invitation.emailed = invited.link, invited.emailed
        return Response(InvitedSerializer(invitation).data, status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="invitations_revoke",
                   responses={200: InvitationSerializer, **INVITATION_ERRORS})
    def destroy(self, request, mind_id: str, invitation_id: str):
        """Revoke an invitation: its link stops working. Revoking a closed one changes
        nothing."""
        invitation = invitations.revoke(invitation=self.get_object(), actor=request.user)
        return Response(InvitationSerializer(invitation).data)


@extend_schema(tags=["members"], auth=HUMAN_AUTH)
class MyInvitationViewSet(HumanViewSet):
    """The invitations waiting for the signed-in human, and answering them."""

    resource_name = "Invitation"
    lookup_url_kwarg = "invitation_id"
    not_found = "No such invitation."

    def get_queryset(self):
        # Any state, so answering a closed one says why (409) rather than a 404.
        return Invitation.objects.filter(user=self.request.user).select_related(
            "mind", "user", "invited_by")

    @extend_schema(operation_id="my_invitations_list",
                   responses={200: InvitationSerializer(many=True), **INVITATION_ERRORS})
    def list(self, request):
        """Invitations to your account that you may accept or decline, newest first.
        (Invitations to an e-mail address are answered from their link.)"""
        pending = invitations.for_user(request.user).select_related("user")
        return Response(InvitationSerializer(pending, many=True).data)

    def answered(self, invitation: Invitation) -> Response:
        return Response({"mind_id": invitation.mind_id, "mind_name": invitation.mind.name,
                         "role": invitation.role})

    @extend_schema(operation_id="my_invitations_accept", request=None,
                   responses={200: AcceptedSerializer, **INVITATION_ERRORS})
    def accept(self, request, invitation_id: str):
        """Accept an invitation to your account: you become a member of its mind."""
        invitation = self.get_object()
        with refusals():
            invitations.accept(invitation=invitation, user=request.user)
        return self.answered(invitation)

    @extend_schema(operation_id="my_invitations_decline", request=None,
                   responses={200: AcceptedSerializer, **INVITATION_ERRORS})
    def decline(self, request, invitation_id: str):
        """Decline an invitation to your account."""
        invitation = self.get_object()
        with refusals():
            invitations.decline(invitation=invitation, user=request.user)
        return self.answered(invitation)


class InvitationTokenView(SynapseAPIView):
    """Answer an invitation by its link's token (``answer``: accept or decline)."""

    permission_classes = [HumanOnly]
    answer = "accept"

    def post(self, request):
        serializer = InvitationTokenSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        invitation = invitation_of_token(serializer.validated_data["token"])
        with refusals():
            if self.answer == "accept":
                invitations.accept(invitation=invitation, user=request.user, with_token=True)
            else:
                invitations.decline(invitation=invitation, user=request.user,
                                    with_token=True)
        return Response({"mind_id": invitation.mind_id, "mind_name": invitation.mind.name,
                         "role": invitation.role})


class InvitationTokenAcceptView(InvitationTokenView):
    @extend_schema(operation_id="invitations_accept_token", auth=HUMAN_AUTH,
                   request=InvitationTokenSerializer,
                   responses={200: AcceptedSerializer, **INVITATION_ERRORS},
                   tags=["members"])
    def post(self, request):
        """Accept an invitation with its link's token: an invitation to your account, or
        to an e-mail address that is your account's (no account yet? POST /auth/register
        with ``invitation``)."""
        return super().post(request)


class InvitationTokenDeclineView(InvitationTokenView):
    answer = "decline"

    @extend_schema(operation_id="invitations_decline_token", auth=HUMAN_AUTH,
                   request=InvitationTokenSerializer,
                   responses={200: AcceptedSerializer, **INVITATION_ERRORS},
                   tags=["members"])
    def post(self, request):
        """Decline an invitation with its link's token."""
        return super().post(request)
