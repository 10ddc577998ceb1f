"""The human API: accounts and tokens, minds, and the Mind Keys of a mind (docs/api.md)."""

from django.utils.functional import cached_property
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError
from rest_framework_simplejwt.tokens import RefreshToken
from rest_framework_simplejwt.views import TokenObtainPairView, TokenRefreshView

from minds.access import Action, member_mind
from minds.api.serializers import (
    DetailSerializer,
    IssuedMindKeySerializer,
    LoginSerializer,
    LogoutSerializer,
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
from minds.models import Mind, MindKey
from minds.passwords import mail_configured, password_change, password_reset_send, reset_wait
from minds.services import (
    account_register,
    key_issue,
    key_revoke,
    mind_create,
    mind_delete,
    mind_update,
    minds_with_counts,
    registration_open,
)
from synapse.api import HUMAN_AUTH, HumanOnly, ServiceUnavailable, SynapseAPIView, error_responses
from synapse.api.views import mind_action
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
        or taken: sign in to find out."""
        if not registration_open():
            raise exceptions.PermissionDenied("Registration is switched off on this server.",
                                              code="registration_closed")
        serializer = RegisterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        account_register(**serializer.validated_data)
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

    @extend_schema(operation_id="auth_me", auth=HUMAN_AUTH,
                   responses={200: UserSerializer, **ME_ERRORS},
                   tags=["auth"])
    def get(self, request):
        """The signed-in human."""
        return Response(UserSerializer(request.user).data)


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
