"""Human routes: accounts and tokens (``/auth/…``), minds and their keys (``/minds/…``)."""

from django.urls import path

from minds.api import views

urlpatterns = [
    path("auth/register", views.RegisterView.as_view(), name="auth-register"),
    path("auth/login", views.LoginView.as_view(), name="auth-login"),
    path("auth/refresh", views.RefreshView.as_view(), name="auth-refresh"),
    path("auth/logout", views.LogoutView.as_view(), name="auth-logout"),
    path("auth/me", views.MeView.as_view(), name="auth-me"),
    path("minds", views.MindCollectionView.as_view(), name="minds"),
    path("minds/<str:mind_id>", views.MindDetailView.as_view(), name="mind-detail"),
    path("minds/<str:mind_id>/keys", views.MindKeyCollectionView.as_view(), name="mind-keys"),
    path("minds/<str:mind_id>/keys/<str:key_id>", views.MindKeyDetailView.as_view(),
         name="mind-key-detail"),
]
