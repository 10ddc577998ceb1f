"""Serializers of the human API: accounts, minds and Mind Keys (strict input, one output)."""

import hmac

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from rest_framework import exceptions, serializers
from rest_framework_simplejwt.serializers import TokenObtainPairSerializer, TokenRefreshSerializer
from rest_framework_simplejwt.settings import api_settings as jwt_settings
from rest_framework_simplejwt.utils import get_md5_hash_password

from minds.models import SEARCH_LANGUAGES, Invitation, Membership, Mind, MindKey, Role
from minds.services import clean_key_paths
from synapse.api import StrictSerializer, TimestampField
from synapse.text import validate_single_line

# -- Accounts -----------------------------------------------------------------------------

class RegisterSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=512, trim_whitespace=False,
                                     style={"input_type": "password"})
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    invitation = serializers.CharField(
        required=False, max_length=100,
        help_text="The token of an invitation to an e-mail address (the last part of its "
                  "link, inv_…): the account gets that address and joins the mind at once, "
                  "even where open registration is switched off.")

    def validate_username(self, value: str) -> str:
        user_model = get_user_model()
        for validator in user_model._meta.get_field("username").validators:
            try:
                validator(value)
            except DjangoValidationError as error:
                raise serializers.ValidationError(list(error.messages)) from None
        # Whether the name is taken is not checked here: the answer must not tell
        # (minds.services.account_register).
        return value

    def validate(self, attrs):
        candidate = get_user_model()(username=attrs["username"], email=attrs["email"])
        try:
            password_validation.validate_password(attrs["password"], user=candidate)
        except DjangoValidationError as error:
            raise serializers.ValidationError({"password": list(error.messages)}) from None
        return attrs


class RegisteredSerializer(serializers.Serializer):
    """The answer to a registration: the same whether the username was free or taken."""

    username = serializers.CharField()
    detail = serializers.CharField()


class UserSerializer(serializers.ModelSerializer):
    date_joined = TimestampField(read_only=True)
    last_login = TimestampField(read_only=True, allow_null=True)

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "email", "is_staff", "date_joined", "last_login"]
        read_only_fields = fields


class LoginSerializer(StrictSerializer, TokenObtainPairSerializer):
    """``{"username", "password"}``; anything else is refused."""


class RefreshSerializer(StrictSerializer, TokenRefreshSerializer):
    """``{"refresh"}``; anything else is refused. A refresh token dies with its user, with
    the user's deactivation and with a change of the user's password."""

    def validate(self, attrs):
        token = self.token_class(attrs["refresh"])
        user = get_user_model().objects.filter(**{
            jwt_settings.USER_ID_FIELD: token.payload.get(jwt_settings.USER_ID_CLAIM)}).first()
        # The claim is a digest of the password hash at sign-in (SIMPLE_JWT
        # CHECK_REVOKE_TOKEN); tokens without it predate the check and are refused too.
        if user is None or not hmac.compare_digest(
                str(token.payload.get(jwt_settings.REVOKE_TOKEN_CLAIM, "")),
                get_md5_hash_password(user.password)):
            raise exceptions.AuthenticationFailed(
                "This refresh token is no longer valid (its account's password changed or the "
                "account is gone): sign in again.", code="password_changed")
        return super().validate(attrs)


class LogoutSerializer(StrictSerializer):
    refresh = serializers.CharField(max_length=4096)


class TokenPairSerializer(serializers.Serializer):
    access = serializers.CharField()
    refresh = serializers.CharField()


def _new_password_errors(password: str, user) -> None:
    try:
        password_validation.validate_password(password, user=user)
    except DjangoValidationError as error:
        raise serializers.ValidationError({"new_password": list(error.messages)}) from None


class PasswordChangeSerializer(StrictSerializer):
    """``{"current_password", "new_password"}`` of the signed-in human (in the context)."""

    current_password = serializers.CharField(max_length=512, trim_whitespace=False,
                                             style={"input_type": "password"})
    new_password = serializers.CharField(max_length=512, trim_whitespace=False,
                                         style={"input_type": "password"})

    def validate(self, attrs):
        user = self.context["user"]
        if not user.check_password(attrs["current_password"]):
            raise serializers.ValidationError(
                {"current_password": ["This is not the account's current password."]})
        _new_password_errors(attrs["new_password"], user)
        return attrs


class AccountDeleteSerializer(StrictSerializer):
    """``{"confirm", "password"}`` of the signed-in human (in the context): their username,
    typed, and their password."""

    confirm = serializers.CharField(
        max_length=150, trim_whitespace=False,
        help_text="Your username, exactly: deleting your account deletes the minds you own "
                  "alone with everything in them.")
    password = serializers.CharField(max_length=512, trim_whitespace=False,
                                     style={"input_type": "password"})

    def validate(self, attrs):
        user = self.context["user"]
        if attrs["confirm"] != user.get_username():
            raise serializers.ValidationError({"confirm": ["This is not your username."]})
        if not user.check_password(attrs["password"]):
            raise serializers.ValidationError(
                {"password": ["This is not the account's current password."]})
        return attrs


class AccountExportQuerySerializer(serializers.Serializer):
    include_credentials = serializers.BooleanField(
        default=False, help_text="Credentials content of your minds in plaintext.")


class PasswordResetSerializer(StrictSerializer):
    email = serializers.EmailField(max_length=254)


class PasswordResetConfirmSerializer(StrictSerializer):
    """The ``uid`` and ``token`` of a reset link (``…/password-reset/<uid>/<token>``) and
    the new password."""

    uid = serializers.CharField(max_length=64)
    token = serializers.CharField(max_length=128)
    new_password = serializers.CharField(max_length=512, trim_whitespace=False,
                                         style={"input_type": "password"})

    def validate(self, attrs):
        from django.contrib.auth.tokens import default_token_generator
        from django.utils.http import urlsafe_base64_decode

        try:
            user_id = urlsafe_base64_decode(attrs["uid"]).decode()
            user = get_user_model().objects.filter(pk=int(user_id), is_active=True).first()
        except (ValueError, TypeError, UnicodeDecodeError, OverflowError):
            user = None
        if user is None or not default_token_generator.check_token(user, attrs["token"]):
            raise serializers.ValidationError(
                {"token": ["This reset link is not valid: it was used already, it has "
                           "expired, or the password changed since. Ask for a new one."]})
        _new_password_errors(attrs["new_password"], user)
        attrs["user"] = user
        return attrs


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


# -- Minds --------------------------------------------------------------------------------

class MindSerializer(serializers.ModelSerializer):
    """A mind as the API returns it; counts come from annotations (no query per mind)."""

    memories = serializers.IntegerField(source="memory_count", read_only=True,
                                        help_text="Memories in the mind (current, not in "
                                                  "the trash).")
    unverified = serializers.IntegerField(source="unverified_count", read_only=True,
                                          help_text="Memories waiting for a human to verify "
                                                    "them (the queue).")
    keys = serializers.IntegerField(source="key_count", read_only=True,
                                    help_text="Keys neither revoked nor expired.")
    search_language = serializers.ChoiceField(
        choices=SEARCH_LANGUAGES, read_only=True,
        help_text="The language keyword search stems this mind's memories in (accents "
                  "folded); simple: no stemming.")
    reindex_pending = serializers.BooleanField(
        read_only=True,
        help_text="True while the embedding worker re-indexes the memories after a change "
                  "of search_language; until then keyword search may miss words stemmed "
                  "the old way.")
    agents_may_reset = serializers.BooleanField(
        read_only=True, help_text="Whether a write Mind Key may reset a scope "
                                  "(POST /memory/reset).")
    role = serializers.ChoiceField(
        choices=Role.choices, read_only=True,
        help_text="Your role on this mind: owner (everything: members, keys, connections, "
                  "settings, reset, deletion), editor (store, edit, verify, trash, restore), "
                  "viewer (read only).")
    created_at = TimestampField(read_only=True)
    updated_at = TimestampField(read_only=True)

    class Meta:
        model = Mind
        fields = ["id", "name", "role", "unverified_in_recall", "search_language",
                  "reindex_pending", "agents_may_reset",
                  "memories", "unverified", "keys", "created_at", "updated_at"]
        read_only_fields = fields


SEARCH_LANGUAGE_HELP = ("The language keyword search stems this mind's memories in, accents "
                        "folded (simple: no stemming). Changing it re-indexes the mind's "
                        "memories through the embedding worker (reindex_pending is true until "
                        "it is done); until then keyword search may miss words stemmed the "
                        "old way.")


class MindCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, validators=[validate_single_line])
    unverified_in_recall = serializers.ChoiceField(
        choices=Mind.UnverifiedInRecall.choices, default=Mind.UnverifiedInRecall.MARKED)
    search_language = serializers.ChoiceField(
        choices=SEARCH_LANGUAGES, default="english",
        help_text="The language keyword search stems this mind's memories in, accents "
                  "folded (simple: no stemming). Default english.")


class MindUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False,
                                 validators=[validate_single_line])
    unverified_in_recall = serializers.ChoiceField(
        choices=Mind.UnverifiedInRecall.choices, required=False,
        help_text="marked: unverified memories appear in recall marked [unverified]; "
                  "hidden: they stay out of recall until a human verifies them.")
    search_language = serializers.ChoiceField(choices=SEARCH_LANGUAGES, required=False,
                                              help_text=SEARCH_LANGUAGE_HELP)
    agents_may_reset = serializers.BooleanField(
        required=False, help_text="Let write Mind Keys reset a scope of this mind "
                                  "(POST /memory/reset, a hard purge); default false. The "
                                  "owner always may.")

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Send at least one field to change.")
        return attrs


class MindDeleteQuerySerializer(serializers.Serializer):
    confirm = serializers.CharField(max_length=200, required=False, trim_whitespace=False)


class MindDeleteSerializer(StrictSerializer):
    confirm = serializers.CharField(
        max_length=200, trim_whitespace=False,
        help_text="The mind's name, exactly: deleting removes every memory, version, key "
                  "and audit event of the mind.")


# -- Mind Keys ----------------------------------------------------------------------------

class MindKeySerializer(serializers.ModelSerializer):
    mind_id = serializers.CharField(read_only=True)
    created_at = TimestampField(read_only=True)
    last_used_at = TimestampField(read_only=True, allow_null=True)
    expires_at = TimestampField(read_only=True, allow_null=True)
    revoked_at = TimestampField(read_only=True, allow_null=True)
    revoked = serializers.BooleanField(source="is_revoked", read_only=True)
    paths = serializers.ListField(child=serializers.CharField(), read_only=True,
                                  help_text="The path prefixes the key is limited to; empty: "
                                  "the whole mind.")

    class Meta:
        model = MindKey
        fields = ["id", "mind_id", "name", "last4", "scope", "paths", "created_at",
                  "last_used_at", "expires_at", "revoked", "revoked_at"]
        read_only_fields = fields


class IssuedMindKeySerializer(MindKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The key itself (mk_…): shown this "
                                "once, stored only as a hash.")

    class Meta(MindKeySerializer.Meta):
        fields = ["id", "key", *MindKeySerializer.Meta.fields[1:]]
        read_only_fields = fields


class MindKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, validators=[validate_single_line])
    scope = serializers.ChoiceField(choices=MindKey.Scope.choices, default=MindKey.Scope.WRITE)
    expires_at = TimestampField(required=False, allow_null=True, default=None)
    paths = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False,
        default=list, max_length=64,
        help_text="Path prefixes the key is limited to (at most 16 once duplicates and "
                  "prefixes below another are left out; never the root): it reads and "
                  "writes only memories at or below one of them. Empty: the whole mind.")

    def validate_paths(self, value):
        return clean_key_paths(value)

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("The expiry must be in the future.")
        return value


# -- Members and invitations --------------------------------------------------------------

class MemberSerializer(serializers.ModelSerializer):
    user_id = serializers.IntegerField(read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)
    role = serializers.ChoiceField(choices=Role.choices, read_only=True)
    created_at = TimestampField(read_only=True, help_text="When they joined the mind.")

    class Meta:
        model = Membership
        fields = ["user_id", "username", "role", "created_at"]
        read_only_fields = fields


class MemberUpdateSerializer(StrictSerializer):
    role = serializers.ChoiceField(
        choices=Role.choices,
        help_text="The new role. Making someone owner and then yourself editor (or leaving) "
                  "transfers ownership; the last owner cannot step down.")


class InvitationSerializer(serializers.ModelSerializer):
    mind_id = serializers.CharField(read_only=True)
    mind_name = serializers.CharField(source="mind.name", read_only=True)
    username = serializers.SerializerMethodField(
        help_text="The invited account, or null for an invitation to an e-mail address.")
    email = serializers.CharField(read_only=True, help_text="The invited address (lower "
                                  "case), or empty for an invitation to an account.")
    invited_by = serializers.SerializerMethodField(help_text="The owner who invited.")
    status = serializers.CharField(read_only=True, help_text="open, expired (inviting again "
                                   "renews it), accepted, declined or revoked.")
    created_at = TimestampField(read_only=True)
    expires_at = TimestampField(read_only=True)

    class Meta:
        model = Invitation
        fields = ["id", "mind_id", "mind_name", "role", "username", "email", "invited_by",
                  "status", "created_at", "expires_at"]
        read_only_fields = fields

    def get_username(self, invitation) -> str | None:
        return invitation.user.get_username() if invitation.user_id else None

    def get_invited_by(self, invitation) -> str | None:
        return invitation.invited_by.get_username() if invitation.invited_by else None


class InvitedSerializer(InvitationSerializer):
    link = serializers.CharField(read_only=True, help_text="The invitation's link, shown "
                                 "this once (only a hash of its token is stored): hand it "
                                 "to the invitee if it was not mailed. On SYNAPSE_PUBLIC_URL "
                                 "(in development without it, the request's origin); in "
                                 "production without it, the path alone, on this server.")
    emailed = serializers.BooleanField(read_only=True, help_text="Whether the link was "
                                       "mailed to the invitee.")

    class Meta(InvitationSerializer.Meta):
        fields = [*InvitationSerializer.Meta.fields, "link", "emailed"]
        read_only_fields = fields


class InvitationCreateSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150, required=False, help_text="Invite an "
                                     "existing account (or give email).")
    email = serializers.EmailField(max_length=254, required=False, help_text="Invite an "
                                   "e-mail address: the link lets its holder create an "
                                   "account.")
    role = serializers.ChoiceField(choices=Role.choices)

    def validate(self, attrs):
        if ("username" in attrs) == ("email" in attrs):
            raise serializers.ValidationError("Send either username or email.")
        return attrs


class InvitationTokenSerializer(StrictSerializer):
    token = serializers.CharField(max_length=100, help_text="The token of the invitation's "
                                  "link (the part after /ui/invitations/).")


class AcceptedSerializer(serializers.Serializer):
    mind_id = serializers.CharField()
    mind_name = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)
