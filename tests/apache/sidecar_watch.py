"""Watching a running sidecar poll by poll through its `/status`, as an SRE's dashboard would."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.helpers import status

# The sidecar's cadence in this tier: MM2's defaults scaled down (poll 15 s -> 1 s, max 30 -> 5 s,
# TTL 20 -> 2 s), large enough against a loaded two-core machine's scheduling delays.
POLL_S, MAX_S, TTL_S = 1.0, 5.0, 2.0


def sidecar_properties(path: Path, port: int, extra: str = "") -> Path:
    path.write_text(f"mirrorlag.http.listener = 127.0.0.1:{port}\n"
                    f"replication.record.lag.metric.refresh.interval = {int(POLL_S * 1000)}\n"
                    f"replication.lag.time.max.ms = {int(MAX_S * 1000)}\n"
                    f"replication.record.lag.metric.last.replicated.offset.ttl = {int(TTL_S * 1000)}\n"
                    f"{extra}")
    return path


@dataclass
class Poll:
    taken_at: float  # the poll's wall time, as /status says
    rows: dict[int, dict]  # partition -> its /status row, for the watched topic


@dataclass
class PollWatch:
    """Every poll of `topic` the sidecar publishes, each once, in order."""

    port: int
    topic: str
    polls: list[Poll] = field(default_factory=list)

    def next(self, timeout: float = 15.0) -> Poll:
        """The next poll after the last one seen."""
        deadline = time.monotonic() + timeout
        last = self.polls[-1].taken_at if self.polls else 0.0
        while time.monotonic() < deadline:
            doc = status(self.port)
            taken_at = doc.get("taken_at")
            if taken_at is not None and taken_at > last:
                rows = {r["partition"]: r for r in doc["partitions"] if r["topic"] == self.topic}
                if rows:
                    poll = Poll(taken_at, rows)
                    self.polls.append(poll)
                    return poll
            time.sleep(0.1)
        raise AssertionError(f"no new poll of {self.topic} within {timeout} s: {self.polls[-3:]}")

    def until(self, done: Callable[[Poll], bool], timeout: float, what: str) -> Poll:
        """Polls until one satisfies `done`; fails naming `what` with the polls seen."""
        deadline = time.monotonic() + timeout
        start = len(self.polls)
        while time.monotonic() < deadline:
            poll = self.next()
            if done(poll):
                return poll
        raise AssertionError(f"{what}: not within {timeout} s; polls seen: "
                             + "; ".join(self.describe(p) for p in self.polls[start:]))

    @staticmethod
    def describe(poll: Poll) -> str:
        return f"{poll.taken_at:.1f} " + ", ".join(
            f"p{p} {r['state']} leo={r['leo']} lro={r['lro']}({r['lro_feed']}) lag={r['record_lag']} "
            f"t={r['time_lag_s']} start={r['log_start']} lost={r['records_lost']}+{r['records_lost_unverified']}"
            for p, r in sorted(poll.rows.items()))
