"""The admin site: Django's, with its sign-in rate-limited on the counters of /ui/login and
``POST /auth/login`` (minds.forms.sign_in_wait)."""

from django.contrib import admin

from minds.forms import AdminSignInForm, refuse_if_limited


class SynapseAdminSite(admin.AdminSite):
    login_form = AdminSignInForm

    def login(self, request, extra_context=None):
        response = super().login(request, extra_context)  # never cached, as Django's
        context = getattr(response, "context_data", None) or {}
        return refuse_if_limited(response, context.get("form"))
