"""Errors of the rollup: one line for the user, a distinct exit status for a day without history."""

from __future__ import annotations

from mirrorlag.errors import MirrorlagError


class RollupError(MirrorlagError):
    """Bad arguments or a failed Spark job: exit status 2, like every other mirrorlag error."""


class MissingHistoryError(MirrorlagError):
    """A day to roll up has no history (no directory, no segments, or no rows): exit status 3, so
    a scheduler can tell "the sidecar wrote nothing" from a broken job."""

    exit_status = 3


def grpc_status(exc: BaseException) -> str | None:
    """`STATUS: details` of the grpc error behind an exception whose own text is only that
    error's multi-line repr (a Spark Connect client's, when the server is not there or not
    Connect); None otherwise (a server's own error says what went wrong itself)."""
    if not str(exc).lstrip().startswith("<_"):
        return None
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        details, code = getattr(seen, "details", None), getattr(seen, "code", None)
        if callable(details) and callable(code):
            status = code()
            return f"{getattr(status, 'name', status)}: {details()}"
        seen = seen.__cause__ or seen.__context__
    return None
