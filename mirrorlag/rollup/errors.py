"""Errors of the rollup: one line for the user, a distinct exit status for a day without history."""

from __future__ import annotations

from mirrorlag.errors import MirrorlagError


class RollupError(MirrorlagError):
    """Bad arguments or a failed Spark job: exit status 2, like every other mirrorlag error."""


class MissingHistoryError(MirrorlagError):
    """A day to roll up has no history (no directory, no segments, or no rows): exit status 3, so
    a scheduler can tell "the sidecar wrote nothing" from a broken job."""

    exit_status = 3
