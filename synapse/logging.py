"""Log redaction: Mind Keys, bearer tokens, ``?key=`` values, OAuth codes, tokens, secrets
and verifiers, and invitation tokens (in the path of an invitation's link) never reach a log
line, not even inside a traceback."""

import logging
import re

_PATTERNS = [
    (re.compile(r"mk_[A-Za-z0-9]{4,}"), "mk_[redacted]"),
    # An invitation's token (minds.invitations): "Bad Request: /ui/invitations/inv_…".
    (re.compile(r"\binv_[A-Za-z0-9]{4,}"), "inv_[redacted]"),
    (re.compile(r"(?i)([?&]key=)[^&\s\"']+"), r"\1[redacted]"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1[redacted]"),
    (re.compile(r"(?i)(\"?(?:password|refresh|access)\"?\s*[:=]\s*\"?)[^\"&\s,}]+"),
     r"\1[redacted]"),
    # OAuth (form bodies, redirect URLs, JSON): the code of an authorization response and
    # everything the token endpoint takes or gives.
    (re.compile(r"(?i)([?&]code=)[^&\s\"']+"), r"\1[redacted]"),
    (re.compile(r"(?i)(\"?(?:access_token|refresh_token|client_secret|code_verifier|token)"
                r"\"?\s*[:=]\s*\"?)[^\"&\s,}']+"), r"\1[redacted]"),
]


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactSecretsFilter(logging.Filter):
    """Rewrites the message (and its arguments) of every record it sees, and its traceback.

    A handler formats ``exc_info`` only after its filters ran, so the traceback (whose
    exception messages may quote a key or a token) is formatted here, redacted, and left
    in ``exc_text``, which the formatter then prints instead of formatting it again."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logged as it is
            return True
        record.msg = redact(message)
        record.args = None
        return True
