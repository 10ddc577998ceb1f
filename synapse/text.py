"""Single-line text: the one rule for keys, tags, categories, actors and names, and how
recall shows stored text so that none of it can start a line of its own."""

import argparse
import re

from django.core.exceptions import ValidationError

# C0 and C1 control characters (\n, \r, \v, \f, ESC, NEL, …) and the Unicode line and
# paragraph separators (LS, PS): every character str.splitlines() breaks on is among them.
_LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# What is left of them inside one line of content once it is split: escaped when shown
# (a tab is kept: it cannot start a line).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# Any of _CONTROL or a break splitlines() knows, but the line feed (tabs pass as they are).
_BREAKING_BUT_LF = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
SINGLE_LINE_MESSAGE = "Cannot contain control characters or line breaks."


def breaks_lines(value: str) -> bool:
    """Whether ``value`` holds a control character or any line break."""
    return _LINE_BREAKING.search(value) is not None


def validate_single_line(value: str) -> None:
    """The one rule for single-line text: no control characters, no line breaks.

    A key, tag, category, actor or name that broke a line could forge a block header in
    recall (prompt injection through stored text), so none may hold one, wherever it
    enters (API, sync, import, admin, web UI, management commands).

    A validator for Django forms, model forms and DRF fields alike (DRF turns Django's
    ValidationError into its own); the import reader and the management commands call it
    too. Raises django.core.exceptions.ValidationError."""
    if not isinstance(value, str) or breaks_lines(value):
        raise ValidationError(SINGLE_LINE_MESSAGE, code="single_line")


def single_line_argument(value: str) -> str:
    """An argparse ``type`` for management commands: the same rule, as a usage error."""
    try:
        validate_single_line(value)
    except ValidationError as error:
        raise argparse.ArgumentTypeError(error.messages[0]) from None
    return value


# Showing text: rows written before the single-line rule (or straight into the database)
# are still shown as data, since inline() and indent_lines() never let stored text start a
# line of its own.
def _escape(match: re.Match) -> str:
    character = match.group()
    return f"\\x{ord(character):02x}" if ord(character) < 0x100 else f"\\u{ord(character):04x}"


def inline(value) -> str:
    """``value`` for a header line: control characters and line breaks shown escaped."""
    return _LINE_BREAKING.sub(_escape, str(value))


def indent_lines(text: str, prefix: str = "  ") -> str:
    """Every line of ``text`` behind ``prefix``, whatever breaks it (LS, PS, NEL, \\r, …),
    joined by line feeds, so stored text can never start a line that looks like a header.
    The lines are those of ``str.splitlines()`` (one trailing line break ends the last
    line; nothing is one empty line), each with its control characters escaped."""
    text = text or ""
    if _BREAKING_BUT_LF.search(text) is None:
        # The common case, line feeds alone: nothing to escape, and the lines are those
        # splitlines() finds (recall lays out thousands of these per request).
        if text.endswith("\n"):
            text = text[:-1]
        return prefix + text.replace("\n", "\n" + prefix)
    return "\n".join(prefix + _CONTROL.sub(_escape, line)
                     for line in text.splitlines() or [""])
