"""Web UI forms for memories: browser, queue and timeline filters, the memory editor,
bulk review."""

from django import forms

from memories.models import Category, MemoryType, Priority
from memories.paths import InvalidPath, normalize_path
from synapse.text import validate_single_line

_ANY = [("", "Any")]
# The formats a datetime-local input sends (with or without seconds), and a typed date.
_DATETIME_INPUTS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]


class PathField(forms.CharField):
    """A memory path (memories.paths), cleaned to its normal form; blank or ``/`` is the
    root. A path with no normal form is a field error that says why."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("max_length", 1000)
        super().__init__(**kwargs)

    def to_python(self, value) -> str:
        try:
            return normalize_path(super().to_python(value) or "")
        except InvalidPath as error:
            raise forms.ValidationError(str(error), code="invalid_path") from error


class MemoryFilterForm(forms.Form):
    """Query parameters of the memory browser; invalid values are ignored, never a 500."""

    q = forms.CharField(required=False, max_length=500, strip=True,
                        widget=forms.SearchInput(attrs={"placeholder": "Search memories…",
                                                        "aria-label": "Search"}))
    category = forms.ChoiceField(required=False, choices=_ANY + list(Category.choices))
    tag = forms.CharField(required=False, max_length=50, strip=True,
                          widget=forms.TextInput(attrs={"placeholder": "any tag"}))
    priority = forms.ChoiceField(required=False, choices=_ANY + list(Priority.choices))
    verified = forms.ChoiceField(required=False, choices=_ANY + [("yes", "Verified"),
                                                                 ("no", "Unverified")])
    memory_type = forms.ChoiceField(required=False, choices=_ANY + list(MemoryType.choices))
    # Shown as a breadcrumb; a path with no normal form is an error message on the page.
    path = PathField(widget=forms.TextInput(attrs={"placeholder": "any path"}))

    def clean_tag(self) -> str:
        return self.cleaned_data["tag"].lower()


class TagsField(forms.CharField):
    """Tags typed as one comma-separated line."""

    def to_python(self, value) -> list[str]:
        text = super().to_python(value) or ""
        return [tag.strip() for tag in text.split(",") if tag.strip()]

    def prepare_value(self, value) -> str:
        if isinstance(value, list | tuple):
            return ", ".join(value)
        return value or ""

    def validate(self, value: list[str]) -> None:
        if len(value) > 20:
            raise forms.ValidationError("At most 20 tags.")
        for tag in value:
            validate_single_line(tag)
        too_long = [tag for tag in value if len(tag) > 50]
        if too_long:
            raise forms.ValidationError(f"Tags are at most 50 characters: {too_long[0][:60]}…")


class MemoryForm(forms.Form):
    """A memory as a human writes it (create or edit); the service sets provenance."""

    category = forms.ChoiceField(choices=Category.choices, initial=Category.NOTE)
    key = forms.RegexField(
        regex=r"^\S(.*\S)?$", max_length=200, required=False,
        validators=[validate_single_line],
        help_text="Stable identifier within the category, e.g. preference_communication. "
                  "Left empty, one is derived from the content.",
        error_messages={"invalid": "The key cannot start or end with spaces."})
    content = forms.CharField(max_length=50_000, strip=False,
                              widget=forms.Textarea(attrs={"rows": 8}))
    tags = TagsField(required=False, help_text="Comma-separated, e.g. person, identity.")
    priority = forms.ChoiceField(choices=Priority.choices, initial=Priority.NORMAL)
    confidence = forms.FloatField(min_value=0.0, max_value=1.0, initial=1.0,
                                  widget=forms.NumberInput(attrs={"step": "0.05"}))
    expires_at = forms.DateTimeField(
        required=False, help_text="After it the memory leaves recall but is kept.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"},
                                   format="%Y-%m-%dT%H:%M"),
        input_formats=_DATETIME_INPUTS)
    memory_type = forms.ChoiceField(
        required=False, label="Type",
        choices=[("", "Default for the category")] + list(MemoryType.choices),
        help_text="Episodic: an event at a moment, on its path's timeline. Working: the "
                  "state of a task (expires after a day unless given an expiry).")
    path = PathField(help_text="Where it lives, e.g. projects/memory-os/decisions; "
                               "empty is the root.")
    # To the second, so an edit that leaves it alone does not move the episode.
    occurred_at = forms.DateTimeField(
        required=False, label="Occurred at (UTC)",
        help_text="Episodic memories only: when it happened. Empty: now.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"},
                                   format="%Y-%m-%dT%H:%M:%S"),
        input_formats=_DATETIME_INPUTS)

    def clean_content(self) -> str:
        content = self.cleaned_data["content"]
        if not content.strip():
            raise forms.ValidationError("Content cannot be empty.")
        return content


class SeenVersionsField(forms.Field):
    """Checkboxes named alike, each ``<memory id>:<version shown>``: id → version."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {
        "required": "Select at least one memory first.",
        "invalid": "This page is out of date (a selection without the version it showed); "
                   "reload it and select again.",
    }

    def to_python(self, value) -> dict[str, int]:
        seen: dict[str, int] = {}
        for item in value or []:
            memory_id, _, version = item.partition(":") if isinstance(item, str) else ("", "", "")
            if not memory_id or not version.isdigit() or not 0 < int(version) < 2**31:
                raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
            seen[memory_id] = int(version)
        return seen

    def validate(self, value: dict[str, int]) -> None:
        super().validate(value)
        if len(value) > 1000:
            raise forms.ValidationError("Select at most 1000 memories at once.")


class VerifySelectionForm(forms.Form):
    """A checkbox selection to verify, unverify or move to the trash; the service scopes
    ids to the mind."""

    ids = SeenVersionsField()


class PlaceFilterForm(forms.Form):
    """Query parameters of the verification queue: a path (and below) and a type."""

    memory_type = forms.ChoiceField(required=False, choices=_ANY + list(MemoryType.choices))
    path = PathField(widget=forms.TextInput(attrs={"placeholder": "any path"}))


class TimelineForm(forms.Form):
    """Query parameters of a timeline page: the path, and where the page starts."""

    path = PathField()
    after = forms.CharField(required=False, max_length=40)
    before = forms.CharField(required=False, max_length=40)
    at = forms.CharField(required=False, max_length=40)
    end = forms.BooleanField(required=False)


class VersionForm(forms.Form):
    """The version a page showed (verify pins it)."""

    version = forms.IntegerField(min_value=1, max_value=2**31 - 1)


class RevertForm(forms.Form):
    version = forms.IntegerField(min_value=1)


class ResetForm(forms.Form):
    """Resetting a scope (a hard purge) asks for the path, typed out twice."""

    path = PathField(label="Path",
                     widget=forms.TextInput(attrs={"placeholder": "e.g. projects/old-client"}),
                     help_text="Every memory at this path and below it.")
    memory_type = forms.ChoiceField(required=False, label="Only of type",
                                    choices=_ANY + list(MemoryType.choices))
    category = forms.ChoiceField(required=False, label="Only of category",
                                 choices=_ANY + list(Category.choices))
    confirm = forms.CharField(label="Type the path again to confirm", max_length=1000,
                              strip=True)

    def clean(self):
        data = super().clean()
        path = data.get("path")
        if not path and "path" not in self.errors:
            self.add_error("path", "Choose a path below the root; resetting a whole mind is "
                                   "not offered.")
        elif path and (data.get("confirm") or "").strip("/").lower() != path:
            self.add_error("confirm", "That is not the same path; nothing was purged.")
        return data
