"""Web UI routes (``/ui/…``): server-rendered pages for the humans who own the minds."""

from django.contrib.auth import views as auth_views
from django.urls import path

from memories import queue_views
from memories import views as memory_views
from minds import views as mind_views

app_name = "ui"

mind = "minds/<str:mind_id>"
memory = f"{mind}/memories/<str:memory_id>"

urlpatterns = [
    path("login", mind_views.SignInView.as_view(), name="login"),
    path("logout", auth_views.LogoutView.as_view(), name="logout"),
    path("password", mind_views.PasswordChangeView.as_view(), name="password-change"),
    path("password/done", auth_views.PasswordChangeDoneView.as_view(),
         name="password-change-done"),
    path("password-reset", mind_views.PasswordResetView.as_view(), name="password-reset"),
    path("password-reset/sent", auth_views.PasswordResetDoneView.as_view(),
         name="password-reset-sent"),
    path("password-reset/<uidb64>/<token>", mind_views.PasswordResetConfirmView.as_view(),
         name="password-reset-confirm"),
    path("password-reset/complete", auth_views.PasswordResetCompleteView.as_view(),
         name="password-reset-complete"),
    path("account", mind_views.AccountView.as_view(), name="account"),
    path("account/export", mind_views.AccountExportView.as_view(), name="account-export"),
    path("account/delete", mind_views.AccountDeleteView.as_view(), name="account-delete"),
    path("", mind_views.MindListView.as_view(), name="minds"),
    path("invitations/<str:token>", mind_views.InvitationLinkView.as_view(),
         name="invitation"),
    path("invitations/<str:invitation_id>/accept",
         mind_views.InvitationAnswerView.as_view(answer="accept"), name="invitation-accept"),
    path("invitations/<str:invitation_id>/decline",
         mind_views.InvitationAnswerView.as_view(answer="decline"),
         name="invitation-decline"),
    path(f"{mind}/", memory_views.MemoryBrowserView.as_view(), name="browser"),
    path(f"{mind}/memories/new", memory_views.MemoryCreateView.as_view(), name="memory-new"),
    path(f"{mind}/queue", queue_views.QueueView.as_view(), name="queue"),
    path(f"{mind}/queue/verify", queue_views.BulkVerifyView.as_view(), name="bulk-verify"),
    path(f"{mind}/queue/unverify", queue_views.BulkUnverifyView.as_view(),
         name="bulk-unverify"),
    path(f"{mind}/queue/trash", queue_views.BulkTrashView.as_view(), name="bulk-trash"),
    path(f"{mind}/timeline", memory_views.TimelineView.as_view(), name="timeline"),
    path(f"{mind}/trash", memory_views.TrashView.as_view(), name="trash"),
    path(f"{mind}/stats", memory_views.StatsView.as_view(), name="stats"),
    path(f"{mind}/activity", memory_views.ActivityView.as_view(), name="activity"),
    path(f"{mind}/reset", memory_views.ResetView.as_view(), name="reset"),
    path(f"{mind}/keys", mind_views.KeysView.as_view(), name="keys"),
    path(f"{mind}/keys/<str:key_id>/revoke", mind_views.KeyRevokeView.as_view(),
         name="key-revoke"),
    path(f"{mind}/apps", mind_views.ConnectionsView.as_view(), name="connections"),
    path(f"{mind}/apps/<str:connection_id>/revoke", mind_views.ConnectionRevokeView.as_view(),
         name="connection-revoke"),
    path(f"{mind}/connect", mind_views.ConnectView.as_view(), name="connect"),
    path(f"{mind}/members", mind_views.MembersView.as_view(), name="members"),
    path(f"{mind}/members/<int:user_id>/role", mind_views.MemberRoleView.as_view(),
         name="member-role"),
    path(f"{mind}/members/<int:user_id>/remove", mind_views.MemberRemoveView.as_view(),
         name="member-remove"),
    path(f"{mind}/invitations/<str:invitation_id>/revoke",
         mind_views.InvitationRevokeView.as_view(), name="invitation-revoke"),
    path(f"{mind}/leave", mind_views.LeaveView.as_view(), name="leave"),
    path(f"{mind}/settings", mind_views.MindSettingsView.as_view(), name="settings"),
    path(f"{mind}/delete", mind_views.MindDeleteView.as_view(), name="mind-delete"),
    path(memory, memory_views.MemoryDetailView.as_view(), name="memory"),
    path(f"{memory}/edit", memory_views.MemoryEditView.as_view(), name="memory-edit"),
    path(f"{memory}/<str:action>", memory_views.MemoryActionView.as_view(),
         name="memory-action"),
]
