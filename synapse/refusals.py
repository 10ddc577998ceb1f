"""Refusals a domain module raises; the API answers them in the one error shape."""


class Refusal(Exception):
    """A valid request the server will not carry out: the API answers ``status_code`` with
    ``code``, the message, and ``error_fields()`` added to the error object. Domain modules
    raise it without knowing the API (synapse.api.errors.exception_handler answers it)."""

    status_code = 403
    code = "forbidden"

    def error_fields(self) -> dict:
        return {}
