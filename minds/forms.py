"""Web UI forms for minds and Mind Keys."""

from django import forms
from django.utils import timezone

from minds.models import Mind, MindKey
from synapse.text import validate_single_line


class MindForm(forms.Form):
    name = forms.CharField(max_length=200, strip=True, validators=[validate_single_line],
                           widget=forms.TextInput(attrs={"placeholder": "e.g. Michael's Mind"}))


class MindSettingsForm(forms.Form):
    name = forms.CharField(max_length=200, strip=True, validators=[validate_single_line])
    unverified_in_recall = forms.ChoiceField(
        label="Unverified memories in recall", choices=Mind.UnverifiedInRecall.choices,
        widget=forms.RadioSelect)


class MindDeleteForm(forms.Form):
    """Deleting a mind asks for its name, typed out, as confirmation."""

    confirm_name = forms.CharField(label="Type the mind's name to confirm", strip=False)

    def __init__(self, *args, mind: Mind, **kwargs):
        super().__init__(*args, **kwargs)
        self.mind = mind

    def clean_confirm_name(self) -> str:
        typed = self.cleaned_data["confirm_name"]
        if typed != self.mind.name:
            raise forms.ValidationError("That is not this mind's name; nothing was deleted.")
        return typed


class KeyForm(forms.Form):
    name = forms.CharField(max_length=200, strip=True, validators=[validate_single_line],
                           widget=forms.TextInput(attrs={"placeholder": "e.g. laptop agent"}))
    scope = forms.ChoiceField(choices=MindKey.Scope.choices, initial=MindKey.Scope.WRITE)
    expires_at = forms.DateTimeField(
        required=False, label="Expires (optional, UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"])

    def clean_expires_at(self):
        expires_at = self.cleaned_data["expires_at"]
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return expires_at
