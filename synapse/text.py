"""One rule for single-line text (keys, tags, names), shared by the API and the web UI."""

import re

from django.core.exceptions import ValidationError

# Control characters and the Unicode line breaks (NEL, LS, PS): a key, tag or name that
# broke a line could forge a block header in recall (prompt injection through stored text).
_LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def breaks_lines(value: str) -> bool:
    """Whether ``value`` holds a control character or any line break."""
    return _LINE_BREAKING.search(value) is not None


def validate_single_line(value: str) -> None:
    """A form-field validator for the same rule."""
    if breaks_lines(value):
        raise ValidationError("Cannot contain control characters or line breaks.")
