"""Human routes: accounts and tokens (``/auth/…``), minds and their keys, members and
invitations (``/minds/…``), the invitations waiting for you (``/invitations…``)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from minds.api import views

# Path converters (not regexes), so the ids match as the <str:…> routes always did; the keys
# are registered under their mind's path, the one nesting this API has.
router = SimpleRouter(trailing_slash=False, use_regex_path=False)
router.register("minds", views.MindViewSet, basename="mind")
router.register("minds/<str:mind_id>/keys", views.MindKeyViewSet, basename="mind-key")
router.register("minds/<str:mind_id>/members", views.MemberViewSet, basename="mind-member")
router.register("minds/<str:mind_id>/invitations", views.MindInvitationViewSet,
                basename="mind-invitation")

urlpatterns = [
    path("auth/register", views.RegisterView.as_view(), name="auth-register"),
    path("auth/login", views.LoginView.as_view(), name="auth-login"),
    path("auth/refresh", views.RefreshView.as_view(), name="auth-refresh"),
    path("auth/logout", views.LogoutView.as_view(), name="auth-logout"),
    path("auth/me", views.MeView.as_view(), name="auth-me"),
    path("auth/export", views.AccountExportView.as_view(), name="auth-export"),
    path("auth/password", views.PasswordChangeView.as_view(), name="auth-password"),
    path("auth/password-reset", views.PasswordResetView.as_view(), name="auth-password-reset"),
    path("auth/password-reset/confirm", views.PasswordResetConfirmView.as_view(),
         name="auth-password-reset-confirm"),
    path("invitations", views.MyInvitationViewSet.as_view({"get": "list"}),
         name="invitations"),
    path("invitations/accept", views.InvitationTokenAcceptView.as_view(),
         name="invitations-accept-token"),
    path("invitations/decline", views.InvitationTokenDeclineView.as_view(),
         name="invitations-decline-token"),
    path("invitations/<str:invitation_id>/accept",
         views.MyInvitationViewSet.as_view({"post": "accept"}, detail=True),
         name="invitation-accept"),
    path("invitations/<str:invitation_id>/decline",
         views.MyInvitationViewSet.as_view({"post": "decline"}, detail=True),
         name="invitation-decline"),
    *router.urls,
]
