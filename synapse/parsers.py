"""Request body parsers: JSON that never turns into a 500, and JSON read as it arrives."""

from collections.abc import Iterator

import ijson
from rest_framework import exceptions, parsers, status

# Deeper than any body of the API (an export item is 4 levels deep): refused.
MAX_DEPTH = 64
READ_SIZE = 64 * 1024
_CONTAINERS = (dict, list)


def _too_deep(value) -> bool:
    """Whether ``value`` nests containers more than MAX_DEPTH levels deep (no recursion)."""
    pending = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if depth > MAX_DEPTH:
            return True
        children = current.values() if isinstance(current, dict) else current
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, _CONTAINERS))
    return False


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested too deeply is a 400 like any other bad JSON.

    Python's ``json`` module recurses once per nesting level, so ``[[[[…`` a hundred
    thousand deep raises RecursionError, which DRF does not catch; and a value nested a few
    hundred levels deep can still exhaust the stack later, when a serializer formats it
    into an error message. Every DRF route parses JSON with this class (settings
    ``DEFAULT_PARSER_CLASSES``), which answers both with a 400.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            data = None
            too_deep = True
        else:
            too_deep = isinstance(data, _CONTAINERS) and _too_deep(data)
        if too_deep:
            raise exceptions.ParseError(f"JSON parse error - the body is nested more than "
                                        f"{MAX_DEPTH} levels deep.")
        return data


# -- Reading a body as it arrives ----------------------------------------------------------

class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


class _CappedReader:
    """The request stream, refused with a 413 once more than ``limit`` bytes were read
    (the middleware checks Content-Length; this holds when there is none)."""

    def __init__(self, stream, limit: int):
        self.stream, self.limit, self.read_bytes = stream, limit, 0

    def read(self, size: int = READ_SIZE) -> bytes:
        piece = self.stream.read(min(size, READ_SIZE)) if self.stream is not None else b""
        self.read_bytes += len(piece)
        if self.read_bytes > self.limit:
            raise PayloadTooLarge(f"The request body is larger than {self.limit} bytes.")
        return piece


def _parse_error(error: Exception) -> exceptions.ParseError:
    # ijson's message quotes the body around the fault: keep only its first line.
    reason = str(error).strip().splitlines()[0] if str(error).strip() else "invalid JSON"
    return exceptions.ParseError(f"JSON parse error - {reason}")


class Member:
    """One member of the body's top-level object; read it once, in one of three ways."""

    def __init__(self, name: str, stream: "JSONStream", event: str, value):
        self.name, self.stream, self.event, self.first = name, stream, event, value
        self.consumed = False

    @property
    def is_list(self) -> bool:
        return self.event == "start_array"

    @property
    def is_scalar(self) -> bool:
        return self.event not in ("start_array", "start_map")

    def scalar(self):
        """The value of a member that must be a string, number, boolean or null."""
        self.consumed = True
        return self.first

    def items(self) -> Iterator:
        """The elements of a list member, built one at a time."""
        self.consumed = True
        while True:
            event, value = self.stream.next_event()
            if event == "end_array":
                return
            yield self.stream.build(event, value)

    def skip(self) -> None:
        """Read past the member without building it."""
        if not self.consumed:
            self.consumed = True
            self.stream.skip(self.event)


class JSONStream:
    """A JSON object body read incrementally: :meth:`members` yields each top-level member
    as it arrives. A body that does not parse raises ParseError (400) where the fault is
    met, so callers read it inside their transaction: nothing they wrote survives."""

    def __init__(self, stream, *, limit: int):
        self._events = ijson.basic_parse(_CappedReader(stream, limit), use_float=True,
                                         buf_size=READ_SIZE)

    def next_event(self) -> tuple[str, object]:
        try:
            return next(self._events)
        except StopIteration:
            raise exceptions.ParseError("JSON parse error - the body ended early.") from None
        except ijson.JSONError as error:
            raise _parse_error(error) from None

    def build(self, event: str, value):
        """The whole value that starts with (event, value), at most MAX_DEPTH deep."""
        if event not in ("start_map", "start_array"):
            return value
        builder = ijson.ObjectBuilder()
        builder.event(event, value)
        depth = 1
        while depth:
            event, value = self.next_event()
            if event in ("start_map", "start_array"):
                depth += 1
                if depth > MAX_DEPTH:
                    raise exceptions.ParseError(f"JSON parse error - the body is nested "
                                                f"more than {MAX_DEPTH} levels deep.")
            elif event in ("end_map", "end_array"):
                depth -= 1
            builder.event(event, value)
        return builder.value

    def skip(self, event: str) -> None:
        depth = 1 if event in ("start_map", "start_array") else 0
        while depth:
            event, _value = self.next_event()
            if event in ("start_map", "start_array"):
                depth += 1
            elif event in ("end_map", "end_array"):
                depth -= 1

    def members(self) -> Iterator[Member]:
        """Each member of the top-level object, in body order; what the caller leaves
        unread is skipped. Raises ParseError when the body is not one JSON object."""
        event, _value = self.next_event()
        if event != "start_map":
            raise exceptions.ParseError("JSON parse error - expected a JSON object.")
        while True:
            event, name = self.next_event()
            if event == "end_map":
                break
            member = Member(name, self, *self.next_event())
            yield member
            member.skip()
        try:
            for _trailing in self._events:
                raise exceptions.ParseError("JSON parse error - more after the object.")
        except ijson.JSONError as error:
            raise _parse_error(error) from None


class StreamingJSONParser(parsers.BaseParser):
    """Hands the view a :class:`JSONStream` over the request body instead of parsed data;
    the view's ``max_body_bytes`` caps what is read.

    For the bulk routes (sync, import), whose bodies run to many megabytes: the service
    reads the stream member by member and item by item with ijson (a C parser that keeps
    its own stack), in pieces of ``READ_SIZE`` bytes, so memory holds one item at a time
    whatever the size of the body."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        view = (parser_context or {}).get("view")
        return JSONStream(stream, limit=view.max_body_bytes())
