"""Human accounts: JWT login and refresh (minds and keys API: minds.api.urls)."""

from drf_spectacular.utils import extend_schema
from rest_framework_simplejwt.views import TokenObtainPairView, TokenRefreshView


@extend_schema(tags=["auth"], operation_id="auth_login")
class LoginView(TokenObtainPairView):
    """Exchange a username and password for an access and a refresh token."""


@extend_schema(tags=["auth"], operation_id="auth_refresh")
class RefreshView(TokenRefreshView):
    """Exchange a refresh token for a new access token (and a new refresh token)."""
