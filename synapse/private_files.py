"""Files only their owner may read (secrets, keys, demo credentials): mode 0600 from birth."""

import os
import secrets
from pathlib import Path

# Nothing here imports Django: settings.py uses it.
PRIVATE_MODE = 0o600


def write_private_file(path: Path | str, text: str, *, replace: bool = False) -> bool:
    """Write ``text`` to ``path``, created with mode 0600 (never wider at any moment).

    With ``replace`` false an existing file is kept as it is and False is returned.

    Writing a file and then ``chmod``-ing it leaves a moment in which the file exists with
    the umask's mode (often 0644): another local user who opens it then keeps the
    descriptor, and reads the secret after the chmod. Here the file is created by
    ``os.open(…, O_CREAT | O_EXCL, 0o600)``, so it never has a wider mode (the umask can
    only narrow it). The content goes to a private temporary file beside the target, then
    into place in one step: ``os.link`` when an existing file must be kept (two processes
    starting at once agree on one secret, and neither reads a half-written file),
    ``os.replace`` otherwise."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
            return True
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: create the target itself
            return _create_exclusive(path, text)
        return True
    finally:
        temporary.unlink(missing_ok=True)


def _create_exclusive(path: Path, text: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def read_or_create_secret(path: Path | str, make) -> str:
    """The secret kept in ``path``; the first caller creates it (0600) with ``make()``."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private_file(path, make())
    return path.read_text(encoding="utf-8").strip()
