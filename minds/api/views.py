"""The human API (SPEC §5): accounts and JWTs, minds, and the Mind Keys of a mind.

Every route here is for humans: a Mind Key is refused with 403 (``HumanOnly``), the
token routes ignore it (they take credentials from the body). A mind or key of another
user is a 404, the same as one that does not exist.
"""

import hashlib

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework_simplejwt.exceptions import InvalidToken, TokenError
from rest_framework_simplejwt.tokens import RefreshToken
from rest_framework_simplejwt.views import TokenObtainPairView, TokenRefreshView

from minds.api.serializers import (
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
    RefreshSerializer,
    RegisteredSerializer,
    RegisterSerializer,
    TokenPairSerializer,
    UserSerializer,
)
from minds.models import Mind, MindKey
from minds.services import (
    account_register,
    key_issue,
    key_revoke,
    mind_create,
    mind_delete,
    mind_update,
    registration_open,
)
from synapse.api import HumanOnly, SynapseAPIView
from synapse.throttling import RateThrottle, ScopeRateThrottle

REALM = 'Bearer realm="synapse"'
# Said whether or not the username was free, so registering tells nobody who has an account.
REGISTERED = ("Unless this username was already taken, the account now exists: sign in with "
              "POST /auth/login. If signing in fails, choose another username.")
ERRORS = {400: OpenApiResponse(description="Invalid input (error shape)"),
          401: OpenApiResponse(description="Missing or wrong credentials"),
          403: OpenApiResponse(description="Mind Keys cannot use human routes"),
          404: OpenApiResponse(description="No such mind or key (or not yours)")}
# Human routes: a JWT or a session. Mind Keys authenticate but are refused (403).
HUMAN_AUTH = [{"jwtAuth": []}, {"cookieAuth": []}]
ME_ERRORS = {401: ERRORS[401], 403: ERRORS[403]}
TOKEN_ERRORS = {400: OpenApiResponse(description="Invalid input (error shape)"),
                401: OpenApiResponse(description="Wrong credentials or invalid token"),
                429: OpenApiResponse(description="Too many attempts; see Retry-After")}


# -- Accounts -----------------------------------------------------------------------------

class LoginAttemptThrottle(RateThrottle):
    """Password attempts on one username from one client address (scope ``login_username``).

    On top of the per-address ``login`` scope (synapse.throttling): guessing one account's
    password is slowed without letting one busy address lock everybody else out. The
    username is hashed into the budget's key, so the table never holds account names.
    """

    def budget(self, request, view):
        username = request.data.get("username") if isinstance(request.data, dict) else None
        digest = hashlib.sha256(str(username or "").strip().lower().encode()).hexdigest()
        return "login_username", f"{self.get_ident(request)}:{digest[:32]}"


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


class MeView(SynapseAPIView):
    permission_classes = [HumanOnly]

    @extend_schema(operation_id="auth_me", auth=HUMAN_AUTH,
                   responses={200: UserSerializer, **ME_ERRORS},
                   tags=["auth"])
    def get(self, request):
        """The signed-in human."""
        return Response(UserSerializer(request.user).data)


# -- Minds --------------------------------------------------------------------------------

def _count(queryset) -> Coalesce:
    """A correlated COUNT per mind (one query for the whole list, no join fan-out)."""
    counted = (queryset.filter(mind=OuterRef("pk")).order_by().values("mind")
               .annotate(n=Count("*")).values("n"))
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


class HumanView(SynapseAPIView):
    """A view over the minds of the signed-in human."""

    permission_classes = [HumanOnly]

    def minds(self):
        from memories.models import Memory

        current = Memory.objects.current()
        now = timezone.now()
        return Mind.objects.owned_by(self.request.user).annotate(
            memory_count=_count(current),
            unverified_count=_count(current.unexpired(now).filter(verified=False)),
            key_count=_count(MindKey.objects.filter(revoked_at__isnull=True).filter(
                Q(expires_at__isnull=True) | Q(expires_at__gt=now))),
        )

    def get_owned_mind(self, mind_id: str) -> Mind:
        mind = self.minds().filter(pk=mind_id).first()
        if mind is None:
            raise exceptions.NotFound("No such mind.")
        return mind


class MindCollectionView(HumanView):
    @extend_schema(operation_id="minds_list", auth=HUMAN_AUTH,
                   responses={200: MindSerializer(many=True), **ERRORS}, tags=["minds"])
    def get(self, request):
        """Your minds, oldest first, with memory, unverified and key counts."""
        return Response(MindSerializer(self.minds().order_by("created_at", "id"),
                                       many=True).data)

    @extend_schema(operation_id="minds_create", auth=HUMAN_AUTH, request=MindCreateSerializer,
                   responses={201: MindSerializer, **ERRORS}, tags=["minds"])
    def post(self, request):
        """Create a mind (a memory space); hand its agents a key with POST /minds/{id}/keys."""
        serializer = MindCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind = mind_create(owner=request.user, name=serializer.validated_data["name"])
        policy = serializer.validated_data["unverified_in_recall"]
        if policy != mind.unverified_in_recall:
            mind = mind_update(mind=mind, actor=request.user, unverified_in_recall=policy)
        return Response(MindSerializer(self.get_owned_mind(mind.id)).data,
                        status=status.HTTP_201_CREATED)


class MindDetailView(HumanView):
    query_serializers = {"DELETE": MindDeleteQuerySerializer}

    @extend_schema(operation_id="minds_get", auth=HUMAN_AUTH,
                   responses={200: MindSerializer, **ERRORS}, tags=["minds"])
    def get(self, request, mind_id: str):
        """One of your minds."""
        return Response(MindSerializer(self.get_owned_mind(mind_id)).data)

    @extend_schema(operation_id="minds_update", auth=HUMAN_AUTH, request=MindUpdateSerializer,
                   responses={200: MindSerializer, **ERRORS}, tags=["minds"])
    def patch(self, request, mind_id: str):
        """Rename a mind or set its recall policy for unverified memories."""
        mind = self.get_owned_mind(mind_id)
        serializer = MindUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mind_update(mind=mind, actor=request.user, **serializer.validated_data)
        return Response(MindSerializer(self.get_owned_mind(mind_id)).data)

    @extend_schema(operation_id="minds_delete", auth=HUMAN_AUTH, request=MindDeleteSerializer,
                   parameters=[OpenApiParameter("confirm", str, required=False,
                                                description="The mind's name (or send it "
                                                "as {\"confirm\": …} in the body).")],
                   responses={204: None, **ERRORS}, tags=["minds"])
    def delete(self, request, mind_id: str):
        """Delete a mind and everything of it. Confirm with the mind's exact name."""
        mind = self.get_owned_mind(mind_id)
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


# -- Mind Keys ----------------------------------------------------------------------------

class MindKeyCollectionView(HumanView):
    @extend_schema(operation_id="keys_list", auth=HUMAN_AUTH,
                   responses={200: MindKeySerializer(many=True), **ERRORS}, tags=["minds"])
    def get(self, request, mind_id: str):
        """The keys of a mind, newest first, revoked ones included (never the secret)."""
        mind = self.get_owned_mind(mind_id)
        keys = MindKey.objects.filter(mind=mind).order_by("-created_at", "-id")
        return Response(MindKeySerializer(keys, many=True).data)

    @extend_schema(operation_id="keys_create", auth=HUMAN_AUTH, request=MindKeyCreateSerializer,
                   responses={201: IssuedMindKeySerializer, **ERRORS}, tags=["minds"])
    def post(self, request, mind_id: str):
        """Issue a key. The answer carries the key itself: store it now, it is never shown
        again."""
        mind = self.get_owned_mind(mind_id)
        serializer = MindKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key, plaintext = key_issue(mind=mind, created_by=request.user,
                                   **serializer.validated_data)
        key.key = plaintext
        return Response(IssuedMindKeySerializer(key).data, status=status.HTTP_201_CREATED)


class MindKeyDetailView(HumanView):
    def get_key(self, mind_id: str, key_id: str) -> MindKey:
        mind = self.get_owned_mind(mind_id)
        key = MindKey.objects.filter(mind=mind, pk=key_id).select_related("mind").first()
        if key is None:
            raise exceptions.NotFound("No such key.")
        return key

    @extend_schema(operation_id="keys_get", auth=HUMAN_AUTH,
                   responses={200: MindKeySerializer, **ERRORS}, tags=["minds"])
    def get(self, request, mind_id: str, key_id: str):
        """One key of a mind (never the secret)."""
        return Response(MindKeySerializer(self.get_key(mind_id, key_id)).data)

    @extend_schema(operation_id="keys_revoke", auth=HUMAN_AUTH,
                   responses={200: MindKeySerializer, **ERRORS}, tags=["minds"])
    def delete(self, request, mind_id: str, key_id: str):
        """Revoke a key: the next request made with it gets a 401. Revoking twice is fine."""
        key = key_revoke(key=self.get_key(mind_id, key_id), actor=request.user)
        return Response(MindKeySerializer(key).data)
