"""Memory paths: the namespace a memory lives in (``projects/memory-os/decisions``).

One normal form, checked here for every way in (API, UI, MCP, CLI, sync, import) and again
by the database (``memory_path_normal_form``): lower-case segments of ``a-z``, ``0-9``,
``.``, ``_`` and ``-`` that start with a letter or a digit (so never ``.`` or ``..``),
joined by single slashes. The root is the empty path. Input is forgiving only where no
meaning is lost: surrounding whitespace and slashes are dropped and letters lower-cased;
anything else that is not in normal form is refused with the reason.
"""

import re

MAX_PATH_LENGTH = 255
MAX_DEPTH = 8
MAX_SEGMENT_LENGTH = 64
SEGMENT = rf"[a-z0-9][a-z0-9._-]{{0,{MAX_SEGMENT_LENGTH - 1}}}"
# The whole normal form as a POSIX regular expression (PostgreSQL's ``~`` and Python's re).
PATH_PATTERN = rf"^({SEGMENT}(/{SEGMENT}){{0,{MAX_DEPTH - 1}}})?$"
_SEGMENT_RE = re.compile(rf"{SEGMENT}\Z")


class InvalidPath(ValueError):
    """A path that has no normal form; the message says why."""


def normalize_path(value: str) -> str:
    """The normal form of ``value``, or InvalidPath naming what is wrong with it."""
    path = value.strip().strip("/").lower()
    if not path:
        return ""
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidPath(f"A path has at most {MAX_PATH_LENGTH} characters.")
    segments = path.split("/")
    if len(segments) > MAX_DEPTH:
        raise InvalidPath(f"A path has at most {MAX_DEPTH} segments.")
    for segment in segments:
        if not segment:
            raise InvalidPath("A path has no empty segments (no '//').")
        if set(segment) == {"."}:
            raise InvalidPath("A path has no '.' or '..' segments.")
        if len(segment) > MAX_SEGMENT_LENGTH:
            raise InvalidPath(f"A path segment has at most {MAX_SEGMENT_LENGTH} characters.")
        if not _SEGMENT_RE.match(segment):
            raise InvalidPath("Path segments use a-z, 0-9, '.', '_' and '-', and start with "
                              "a letter or a digit.")
    return path


def path_prefixes(path: str) -> list[str]:
    """Every ancestor of ``path`` and the path itself, root first: ``["", "a", "a/b"]``."""
    if not path:
        return [""]
    segments = path.split("/")
    return ["", *("/".join(segments[:depth]) for depth in range(1, len(segments) + 1))]


# A Mind Key may be limited to a few path prefixes (minds.models.MindKey.paths).
MAX_KEY_PATHS = 16


def is_under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or below it, segment by segment (``a/bc`` is not
    under ``a/b``); everything is under the root (``""``). Both in normal form."""
    return not prefix or path == prefix or path.startswith(prefix + "/")


def within_any(path: str, prefixes) -> bool:
    """Whether ``path`` is under one of ``prefixes``; no prefixes means the whole mind."""
    return not prefixes or any(is_under(path, prefix) for prefix in prefixes)


def normalize_prefixes(values) -> list[str]:
    """The path prefixes of a Mind Key in normal form, in the order given: each one
    normalised (normalize_path), duplicates and prefixes below another one left out (the
    broader one covers them), at most MAX_KEY_PATHS. The root is refused: a key without
    prefixes is the one that reaches the whole mind. Raises InvalidPath saying why."""
    normalised = []
    for value in values:
        if not isinstance(value, str):
            raise InvalidPath("Each path prefix is a string.")
        path = normalize_path(value)
        if not path:
            raise InvalidPath("The root is not a path prefix: leave paths empty for a key "
                              "that reaches the whole mind.")
        normalised.append(path)
    kept = [path for index, path in enumerate(normalised)
            if path not in normalised[:index]
            and not any(other != path and is_under(path, other) for other in normalised)]
    if len(kept) > MAX_KEY_PATHS:
        raise InvalidPath(f"A Mind Key has at most {MAX_KEY_PATHS} path prefixes.")
    return kept
