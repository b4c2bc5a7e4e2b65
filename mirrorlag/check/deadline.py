"""A point in time (monotonic clock) that a bounded command must answer by."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() by which the answer is due
    seconds: float  # the bound as the user gave it, for messages

    @classmethod
    def after(cls, seconds: float, started: float | None = None) -> Deadline:
        """`seconds` after `started` (a time.monotonic() reading; default now)."""
        return cls((time.monotonic() if started is None else started) + seconds, seconds)

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

