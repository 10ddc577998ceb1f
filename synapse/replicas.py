"""Read replicas for the API: the views whose memory reads may go to a replica, and the mark
each write leaves for read-your-writes (synapse.db_router; docs/scaling.md)."""

import functools

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, ProgrammingError

from synapse import db_router
from synapse.throttling import WRITE_METHODS, principal_ident


def principal_of(request) -> str | None:
    """Whose writes a request marks and whose reads it routes: the Mind Key, OAuth
    connection or user it authenticated as (the rate-limit bucket), or None."""
    ident = principal_ident(request, "")
    return None if ident.startswith("ip:") else ident


def replica_reads(handler):
    """Run a read view's handler with its memory reads on a replica, when one is usable
    and fresher than the caller's last write (db_router.read_alias_for).

    A replica that fails during the handler (gone, a query cancelled by a replay
    conflict, or a table or column a migration just added not replayed yet) costs a retry
    of the handler on the primary, never an error: these views only read (their throttle
    and the key's last use were written before, on the primary). A statement timeout is
    not retried: the primary would take as long."""

    @functools.wraps(handler)
    def wrapper(view, request, *args, **kwargs):
        if not settings.DATABASE_REPLICAS:
            return handler(view, request, *args, **kwargs)
        alias = db_router.read_alias_for(principal_of(request))
        if alias == db_router.PRIMARY:
            return handler(view, request, *args, **kwargs)
        try:
            with db_router.reads_from(alias):
                return handler(view, request, *args, **kwargs)
        except (OperationalError, InterfaceError) as error:
            if _timed_out(error):
                raise
            if _unreachable(error):
                db_router.replica_failed(alias)
        except ProgrammingError as error:
            if _sqlstate(error) not in _NOT_REPLAYED_YET:
                raise
        return handler(view, request, *args, **kwargs)

    return wrapper


# undefined_table, undefined_column, undefined_function: a migration the primary has run
# and the replica not replayed yet.
_NOT_REPLAYED_YET = frozenset({"42P01", "42703", "42883"})


def _sqlstate(error: DatabaseError | InterfaceError) -> str | None:
    return getattr(error.__cause__, "sqlstate", None)


def _timed_out(error: DatabaseError | InterfaceError) -> bool:
    return _sqlstate(error) == "57014"  # query_canceled: statement_timeout


def _unreachable(error: DatabaseError | InterfaceError) -> bool:
    """No SQLSTATE (the connection failed) or a connection exception (class 08), or the
    server shutting down (57P01–57P03)."""
    state = _sqlstate(error)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def mark_write(request) -> None:
    """After a write request of a principal, whatever its answer: its next reads go to
    the primary until a replica holds what it wrote (db_router.note_write)."""
    if request.method not in WRITE_METHODS:
        return
    principal = principal_of(request)
    if principal is not None:
        db_router.note_write(principal)
