"""What the sidecar's memory is sized from: measured figures (tests/bench/RESULTS.md "Issue 31: the
figures the deployments are sized from") and the history keys' defaults, read from the loader's
tables when called. Every figure is a worst case the deployments must survive: an outage (the
mirror stalled while the sources append: every freshness table full, the source probe's waiting
list of every partition), served (/metrics published, /status rendered), and a history disk that
fails long enough to fill the history buffer."""

from __future__ import annotations

from dataclasses import dataclass

from mirrorlag.config.loader import FLOW_KEYS, GLOBAL_KEYS

MIB = 2**20

# bench_memory's process before any partition (imports, the sidecar built): 128.7 MiB in the
# bench's venv, which has pandas (pyarrow imports it when present: +~35 MiB over the image).
BASE_MIB = 129

# The demo (`mirrorlag demo`, 10 partitions): the sidecar's RSS, as the issue measured it.
DEMO_MIB = 112

# RSS a history row costs while held in memory: Arrow's buffers 125.4 B, RSS growth 94 B
# (bench_history_rows --partitions 10000 --snapshots 50); the larger is used.
HISTORY_ROW_B = 125

HEADROOM = 1.2  # limits over the worst measured case


@dataclass(frozen=True)
class Outage:
    """B a partition over the base, an estate stalled from poll 1 with target progress
    (`bench_memory --partitions N --runs 1 --feed target-progress --stall-after 1`, N = 10000 and
    100000)."""

    served: float  # /metrics published and /status rendered: what an outage holds
    peak: float  # VmHWM: the most it held at once


OUTAGE = {
    10_000: Outage(served=4_348, peak=6_018),
    100_000: Outage(served=2_681, peak=3_709),
}


def _default(key: str) -> float:
    parser, default = {**GLOBAL_KEYS, **FLOW_KEYS}[key]
    return parser(default)


def history_steady_rows(partitions: int) -> int:
    """Rows of the open segment at its largest, with the defaults: a segment closes after
    segment.ms or segment.max.rows; one poll appends a row a partition."""
    polls = _default("mirrorlag.history.segment.ms") / _default("replication.record.lag.metric.refresh.interval")
    return min(int(partitions * polls), int(_default("mirrorlag.history.segment.max.rows")))


def history_max_rows() -> int:
    """What a failing history disk lets pile up before the oldest rows are dropped."""
    return int(_default("mirrorlag.history.buffer.max.rows"))


def outage(partitions: int) -> Outage:
    """The measured figure for `partitions`: the largest measured size at or below it (a smaller
    estate's figure a partition is the larger, its fixed costs spread over fewer, so this errs
    high), else the smallest size measured."""
    sizes = sorted(OUTAGE, reverse=True)
    return OUTAGE[next((s for s in sizes if s <= partitions), sizes[-1])]


def request_mib(partitions: int) -> float:
    """An outage's steady state, history on: the open segment and the closed one being written."""
    history = 2 * history_steady_rows(partitions) * HISTORY_ROW_B
    return BASE_MIB + (outage(partitions).served * partitions + history) / MIB


def limit_mib(partitions: int) -> float:
    """An outage's peak while a failing disk holds the whole history buffer, with headroom."""
    history = max(2 * history_steady_rows(partitions), history_max_rows()) * HISTORY_ROW_B
    return HEADROOM * (BASE_MIB + (outage(partitions).peak * partitions + history) / MIB)
