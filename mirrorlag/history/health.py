"""Failure state of one background job, logged once per change and never per attempt: a full disk
retried every second must not fill the log it shares with the sidecar."""

from __future__ import annotations

import logging
import threading
from typing import Callable


class FailureState:
    def __init__(self, log: logging.Logger, what: str, redact: Callable[[str], str] = str) -> None:
        self._log = log
        self._what = what  # e.g. "writing segments"
        self._redact = redact  # masks secrets a client library may put in its error text
        self._lock = threading.Lock()
        self._failures = 0  # consecutive
        self._last_error = ""
        self._last_kind: tuple[str, int | None] | None = None

    @property
    def failing(self) -> bool:
        return self._failures > 0

    @property
    def last_error(self) -> str:
        return self._last_error

    def failed(self, err: BaseException, detail: str = "") -> None:
        text = self._redact(_describe(err))
        # The kind, not the text: file names differ on every attempt.
        kind = (type(err).__name__, getattr(err, "errno", None))
        with self._lock:
            first = self._failures == 0
            changed = kind != self._last_kind
            self._failures += 1
            self._last_error = text
            self._last_kind = kind
        if first:
            self._log.error("history: %s failed: %s%s; retrying with backoff", self._what, text, detail)
        elif changed:  # a different reason is a different state (e.g. ENOSPC became EACCES)
            self._log.error("history: %s still failing, now: %s", self._what, text)

    def succeeded(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, 0
            self._last_error = ""
            self._last_kind = None
        if failures:
            self._log.warning("history: %s recovered after %d failed attempt(s)", self._what, failures)


def _describe(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        where = f": {err.filename}" if err.filename else ""
        return f"[Errno {err.errno}] {err.strerror}{where}"
    return f"{type(err).__name__}: {err}"
