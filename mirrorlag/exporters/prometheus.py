"""Prometheus exposition, rendered once per poll so a scrape only copies bytes.

Per-partition series are written directly from the snapshot's columns: at 100k partitions and a
dozen series each, prometheus_client's per-sample objects would outlast the poll interval, and
even a Python expression per line costs a large share of a poll, so the lines are made
column-wise in C with pyarrow, a family at a time: the family's numpy column
becomes an Arrow array without a copy, Arrow's cast writes the numbers (int64 exactly, floats as
the shortest text that parses back to the same float: 1.0 as `1`, 1e21 as `1e+21`), they are
joined with the label texts (an Arrow array per set of rows' keys, rebuilt only when the keys
change), and the family's text is copied once from Arrow's buffer into the chunk: no Python
object per line. A float column holding an infinity is formatted in Python instead, with
Prometheus's spelling (+Inf, -Inf). The small per-flow and self metrics go through a
prometheus_client collector. Unknown values have no series (unknown is never 0); a GONE
partition shows once in `mirrorlag_partition_state` and its label sets then go.

Labels (docs/design.md §3): a partition's series carry the source `topic`; MM2's own metrics tag the
remote topic, so `mirrorlag_topic_info{source,target,topic,remote_topic} 1` (one series per topic,
its text made once per topic set) joins the two in PromQL without a label on every partition
series. No series carries a label whose value changes from poll to poll: which feed gave a
partition's LRO is counted per flow in `mirrorlag_flow_partitions_by_lro_feed{feed}`.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Callable, Iterator, Mapping, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mirrorlag import __version__
from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.config.settings import FlowSettings
from mirrorlag.history import HistoryStats
from mirrorlag.interfaces import PollStats
from mirrorlag.model import FLAG_FIELDS, STATES, FlowId, PartitionKey, RowColumns, Snapshot, State

RECORD_LAG_HELP = (
    "Records the mirror still has to copy: source log-end offset - (last replicated offset + 1), "
    "0 when caught up (KIP-971 replication-record-lag, which reads 1 when caught up), 0 too when "
    "only transaction markers or aborted records remain. An offset distance: compaction gaps and "
    "markers between records make it an upper bound on records."
)

# Distribution buckets across a flow's partitions (KAFKA-8833's histograms, for a mirror).
RECORD_LAG_BUCKETS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
T = TypeVar("T")
Pieces = tuple["bytes | pa.Buffer", ...]  # a family's text as bytes-like pieces
_WRITERS = 2  # threads writing the per-partition families: one writes while the other's family is compressed
TIME_LAG_BUCKETS = (0, 1, 5, 15, 30, 60, 300, 900, 3_600)


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    field: str  # the snapshot column it shows
    detail: bool = False  # only with mirrorlag.metrics.detail = full
    positive_only: bool = False  # a series only where the value is > 0
    kip971: bool = False  # KIP-971's own series: every partition's while the estate is under the cap

    def values(self, cols: RowColumns) -> tuple[np.ndarray, np.ndarray]:
        """The family's value per row and where it has a series."""
        if self.field in FLAG_FIELDS:  # a flag: 1 where set, no series elsewhere
            flags = getattr(cols, self.field)
            return np.ones(len(flags), np.int64), flags
        values, valid = cols.column(self.field)
        return values, (valid & (values > 0)) if self.positive_only else valid


_GONE = STATES.index(State.GONE)
_IN_SYNC = STATES.index(State.IN_SYNC)
_STATE_TEXTS = pa.array([state.value for state in STATES], pa.string())
_FLOW_OF_KEY = itemgetter(0, 1)  # PartitionKey -> (source, target), without a FlowId per row
_TOPIC_OF_KEY = itemgetter(0, 1, 2)  # PartitionKey -> (source, target, topic)

FAMILIES: tuple[Family, ...] = (
    Family("mirrorlag_replication_record_lag", RECORD_LAG_HELP, "record_lag", kip971=True),
    Family("mirrorlag_replication_record_lag_min", "Minimum record lag over the sample windows (metrics.num.samples x metrics.sample.window.ms).", "record_lag_min", kip971=True),
    Family("mirrorlag_replication_record_lag_max", "Maximum record lag over the sample windows.", "record_lag_max", kip971=True),
    Family("mirrorlag_replication_record_lag_avg", "Average record lag over the sample windows.", "record_lag_avg", kip971=True),
    Family("mirrorlag_replication_time_lag_seconds", "Seconds since the mirror last had every record of this partition (KIP-16; 0 when caught up). Caught up is credited at poll times: high by at most one poll interval, never low (but see _lower_bound).", "time_lag_s"),
    Family("mirrorlag_replication_time_lag_lower_bound", "1 where the time lag is only a lower bound: the source probe could not date the oldest record not copied, so it counts from the sidecar's first sight of the lag.", "time_lag_lower_bound"),
    Family("mirrorlag_replication_freshness_lag_seconds", "How long the oldest record the mirror has not copied (offset last replicated + 1) has waited since it was appended, on the sidecar's clock: how stale the copy is (0 when caught up; see _lower_bound).", "freshness_lag_s"),
    Family("mirrorlag_replication_freshness_lag_lower_bound", "1 where the freshness lag is only a lower bound: the record is older than the (LEO, time) table.", "freshness_lower_bound"),
    Family("mirrorlag_replication_byte_lag_estimate_bytes", "Estimated bytes the mirror still has to copy: record lag x mean record size seen by a feed that knows sizes.", "byte_lag_estimate"),
    Family("mirrorlag_retention_headroom_seconds", "Estimated seconds until the source's retention deletes records the mirror has not copied (only where deletion is in sight).", "retention_headroom_s"),
    Family("mirrorlag_partition_records_lost", "Records the source deleted before the mirror copied them (present only when > 0).", "records_lost", positive_only=True),
    Family("mirrorlag_source_log_end_offset", "Source partition log-end offset (ListOffsets latest: the next record's offset; the last stable offset where the flow reads read_committed: its MM2 consumer's isolation.level, or mirrorlag.leo.isolation.level) at the last poll.", "leo", detail=True),
    Family("mirrorlag_source_log_start_offset", "Source partition log-start offset (ListOffsets earliest), last read.", "log_start", detail=True),
    Family("mirrorlag_last_replicated_offset", "Source offset of the last record the target acknowledged: a lower bound, the highest any feed proves (mirrorlag_flow_partitions_by_lro_feed counts which feed won).", "lro", detail=True),
    Family("mirrorlag_lro_age_seconds", "Seconds since the last replicated offset last moved.", "lro_age_s", detail=True),
    Family("mirrorlag_source_append_records_per_second", "Source append rate over the sample windows.", "append_rate", detail=True),
    Family("mirrorlag_mirror_copy_records_per_second", "Mirror copy rate over the sample windows.", "copy_rate", detail=True),
    Family("mirrorlag_catch_up_estimate_seconds", "Estimated seconds until caught up, while the mirror copies faster than the source appends.", "catch_up_s", detail=True),
    Family("mirrorlag_retention_headroom_records", "Copied records still ahead of the source's log start: how far retention can advance before it deletes uncopied records.", "retention_headroom_records", detail=True),
)


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class KeyIndex:
    """What the renders need of a key list, made once per list (the engine hands over the same
    list poll after poll): the flows' topics, sorted, each row's topic as a code into them and its
    partition number (4 bytes each a row), and each topic's label text. A row's label text is its
    topic's text and its partition number, joined when a render writes it: a label string per
    row kept between polls would cost ~65 bytes a partition (the sidecar's served
    memory, docs/performance.md), joining them costs a few ms a family."""

    def __init__(self) -> None:
        self._keys: Sequence[PartitionKey] | None = None
        self.topics: list[tuple[str, str, str]] = []  # (source, target, topic), sorted
        self.topic_code = np.zeros(0, np.int32)  # each row's index into `topics`
        self.partition = np.zeros(0, np.int32)
        self.topic_labels: list[str] = []  # source="..",target="..",topic=".." of each topic
        self.prefixes: pa.StringArray = pa.array([], pa.string())  # each topic's labels, then ',partition="'
        self.flows: list[tuple[str, str]] = []  # (source, target), sorted
        self.flow_of_topic = np.zeros(0, np.int32)  # each topic's index into `flows`

    def of(self, keys: Sequence[PartitionKey]) -> "KeyIndex":
        """This index, made again for `keys` if they are not the list it was made for."""
        if keys is not self._keys and (self._keys is None or keys != self._keys):
            self.topics, code = _group_codes(keys, _TOPIC_OF_KEY)
            self.topic_code = code.astype(np.int32)
            self.partition = np.fromiter(map(itemgetter(3), keys), np.int32, len(keys))
            self.topic_labels = [f'source="{_label_value(source)}",target="{_label_value(target)}",'
                                 f'topic="{_label_value(topic)}"' for source, target, topic in self.topics]
            self.prefixes = pa.array([label + ',partition="' for label in self.topic_labels], pa.string())
            self.flows = sorted(dict.fromkeys(map(_FLOW_OF_KEY, self.topics)))
            flow_index = {flow: i for i, flow in enumerate(self.flows)}
            self.flow_of_topic = np.array([flow_index[_FLOW_OF_KEY(t)] for t in self.topics], np.int32)
            self._keys = keys
        return self

    def flow_code(self) -> np.ndarray:
        """Each row's index into `flows` (int64, as the renders index with it)."""
        return self.flow_of_topic.astype(np.int64)[self.topic_code]

    def label_parts(self, mask: np.ndarray | None) -> tuple[pa.StringArray, pa.StringArray]:
        """The label texts of the rows of `mask` (None: every row) as two arrays a line joins
        end to end, then a closing quote: each row's topic prefix, and its partition number."""
        code, partition = (self.topic_code, self.partition) if mask is None else \
            (self.topic_code[mask], self.partition[mask])
        return self.prefixes.take(pa.array(code)), pc.cast(pa.array(partition), pa.string())


class PartitionBlock:
    """Writes the per-partition families as exposition text, a family at a time, column-wise.

    With `series_max` (mirrorlag.metrics.partition.series.max), the block's size follows what is
    wrong rather than the estate: KIP-971's series (record lag and its min, max, avg) and the
    state for every partition, the other families only for partitions not IN_SYNC, while that
    fits in `series_max` series; past it, the partitions not IN_SYNC first, then the IN_SYNC ones,
    each group worst time lag first, as many as fit, and `withheld` says how many had none.
    Without it (mirrorlag.metrics.detail = full or lag), every partition gets every family."""

    def __init__(self, detail: bool = True, series_max: int | None = None, index: KeyIndex | None = None) -> None:
        self.families = [f for f in FAMILIES if detail or not f.detail]
        self.series_max = series_max
        self.withheld = 0  # partitions the cap left without series at the last render
        self.index = index if index is not None else KeyIndex()  # shared with the renderer's other parts
        # Families are written on two threads: Arrow's kernels let the GIL go, so the next
        # family's text is made while the consumer compresses this one (zlib lets it go too).
        self._pool = ThreadPoolExecutor(max_workers=_WRITERS, thread_name_prefix="mirrorlag-render")

    def families_encoded(self, cols: RowColumns, encode: Callable[[Pieces], T]) -> Iterator[T]:
        """`encode` of each family's pieces (its head, its lines as one Arrow buffer, its last
        newline: bytes-like pieces), in order, made as they are consumed: at most three
        families' text exist at once (the whole block is far bigger than any one family).
        `encode` runs on the thread that wrote the family: the sidecar compresses there
        (Deflated.of), so two families are written and compressed at once instead of one thread
        compressing them all, and the whole text is never held."""
        index = self.index.of(cols.keys)
        states = cols.state
        live = states != _GONE  # GONE rows show in the state family only
        shown, detailed = self._rows(cols, live)
        filtered: dict[int, tuple[np.ndarray | None, tuple[pa.StringArray, pa.StringArray]]] = {}
        made = threading.Lock()  # two writers may ask for the same mask's labels at once

        def rows_of(mask: np.ndarray) -> tuple[np.ndarray | None, tuple[pa.StringArray, pa.StringArray]]:
            """The rows of `mask` (None: all of them) and their label texts, made once per mask
            and render (they go with the render: nothing a row is kept between polls)."""
            with made:
                if id(mask) not in filtered:
                    rows = None if bool(mask.all()) else mask
                    filtered[id(mask)] = (rows, index.label_parts(rows))
                return filtered[id(mask)]

        def family_chunk(family: Family) -> Pieces:
            mask, (prefix, partition) = rows_of(shown if family.kip971 else detailed)
            values, valid = family.values(cols)
            if mask is not None:
                values, valid = values[mask], valid[mask]
            head = f"# HELP {family.name} {family.help}\n# TYPE {family.name} gauge\n"
            if not valid.any():  # no series (often so: catch-up estimates, records lost, ...)
                return (head.encode(),)
            return _chunk(head, f"{family.name}{{", prefix, partition, '"} ', _number_texts(values, valid), "\n")

        def state_chunk() -> Pieces:
            mask, (prefix, partition) = rows_of(shown | ~live)  # a GONE row shows once, whatever the cap
            return _chunk("# HELP mirrorlag_partition_state 1 for the partition's current state "
                          "(UNKNOWN, IN_SYNC, LAGGING, STALLED, REWIND, AT_RISK, RESET, GONE).\n"
                          "# TYPE mirrorlag_partition_state gauge\n", "mirrorlag_partition_state{",
                          prefix, partition, '",state="', _STATE_TEXTS.take(pa.array(states if mask is None else states[mask])),
                          '"} 1\n')

        jobs = [partial(family_chunk, family) for family in self.families] + [state_chunk]
        yield from _in_order(self._pool, [partial(_then, job, encode) for job in jobs], ahead=_WRITERS)


    def _rows(self, cols: RowColumns, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which rows get KIP-971's families (and a state), and which the others too."""
        if self.series_max is None:
            self.withheld = 0
            return live, live
        in_sync = cols.state == _IN_SYNC
        # What each row would cost: its state and the series its families have a value for (a
        # stalled partition has no catch-up estimate, a healthy one no records lost, ...).
        kip = np.ones(len(live), np.int64)  # the state
        rest = np.zeros(len(live), np.int64)
        for family in self.families:
            valid = family.values(cols)[1]
            (kip if family.kip971 else rest)[valid] += 1
        cost = np.where(in_sync, kip, kip + rest)
        cost[~live] = 0
        if int(cost.sum()) <= self.series_max:
            self.withheld = 0
            return live, live & ~in_sync
        # Past the cap: not IN_SYNC first, then IN_SYNC, each worst time lag first (unknown
        # time lag, e.g. UNKNOWN, counts as the worst), as many as the series allow.
        time_lag, known = cols.column("time_lag_s")
        worst = np.where(known, time_lag, np.inf)
        order = np.lexsort((-worst, in_sync))
        order = order[live[order]]
        fits = order[:int(np.searchsorted(np.cumsum(cost[order]), self.series_max, side="right"))]
        shown = np.zeros(len(live), bool)
        shown[fits] = True
        self.withheld = int(np.count_nonzero(live)) - fits.size
        return shown, shown & ~in_sync


def _then(job: Callable[[], Pieces], encode: Callable[[Pieces], T]) -> T:
    return encode(job())


def _in_order(pool: ThreadPoolExecutor, jobs: list[Callable[[], T]], ahead: int) -> Iterator[T]:
    """The jobs' results in order, at most `ahead` of them made before they are consumed (each
    is a family's whole text)."""
    pending: deque[Future[T]] = deque(pool.submit(job) for job in jobs[:ahead])
    rest = iter(jobs[ahead:])
    while pending:
        chunk = pending.popleft().result()
        job = next(rest, None)
        if job is not None:
            pending.append(pool.submit(job))
        yield chunk


def _number_texts(values: np.ndarray, valid: np.ndarray) -> pa.StringArray:
    """The values as exposition numbers (null where not valid), formatted in C by Arrow's cast:
    int64 exactly, floats as the shortest text that parses back to the same float (1.0 as "1",
    1e21 as "1e+21"). Arrow spells the infinities its own way: such a column goes through _number."""
    if values.dtype.kind == "f" and np.isinf(values[valid]).any():
        return pa.array([_number(v) if ok else None for v, ok in zip(values.tolist(), valid.tolist())], pa.string())
    return pc.cast(pa.array(values, mask=~valid), pa.string())


def _chunk(head: str, *line: str | pa.StringArray) -> Pieces:
    """head, then a line per row: `line`'s texts and the rows' texts of its arrays, end to end;
    a row with a null (an unknown value) has no line (no series). The lines are made by one Arrow
    kernel into one buffer, which holds them end to end (a null row takes no bytes): the family's
    text is handed over as that buffer (bytes-like, not copied into bytes), and no Python object
    is made per line."""
    lines = pc.binary_join_element_wise(*line, "")
    text = _joined(lines)
    return (head.encode(), text) if len(text) else (head.encode(),)


def _joined(lines: pa.StringArray) -> pa.Buffer:
    """The texts of the array's non-null rows end to end. Arrow's kernels write nothing for a null
    row, so that is the stretch of the array's character buffer its first and last offsets
    bound; an array whose null rows do hold characters (the format allows it) is compacted first."""
    offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4)
    if lines.null_count and np.diff(offsets)[np.asarray(lines.is_null())].any():
        lines = lines.drop_null()  # a copy whose offsets are exact
        offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4)
    data = lines.buffers()[2]
    if data is None:
        return pa.py_buffer(b"")
    return data[int(offsets[0]):int(offsets[-1])]


TOPIC_INFO_HELP = (
    "1 per flow and source topic, naming the topic MM2 writes on the target (its replication "
    "policy): MM2's own MirrorSourceConnector metrics tag topic with that remote topic. Join with "
    "* on(source, target, topic) group_left(remote_topic) mirrorlag_topic_info."
)


def _label_value(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


class TopicInfo:
    """`mirrorlag_topic_info{source,target,topic,remote_topic} 1`, one series per flow and source
    topic: the join key between mirrorlag's series (source topic) and MM2's metrics (remote topic).
    A label on every partition series would repeat the remote name 100k times a scrape; this is
    one line per topic, its text made only when the rows' keys change (the engine hands over the
    same key list poll after poll). Flows whose replication policy is not known get no series."""

    def __init__(self, policies: Mapping[tuple[str, str], ReplicationPolicy]) -> None:
        self.policies = dict(policies)
        self._keys: Sequence[PartitionKey] | None = None
        self._text = b""

    def openmetrics(self, keys: Sequence[PartitionKey]) -> bytes:
        """The same series in OpenMetrics, where a name ending in _info is an info metric's."""
        text = self.text(keys)
        return text.replace(b"# TYPE mirrorlag_topic_info gauge\n", b"# TYPE mirrorlag_topic info\n", 1).replace(
            b"# HELP mirrorlag_topic_info ", b"# HELP mirrorlag_topic ", 1)

    def text(self, keys: Sequence[PartitionKey]) -> bytes:
        if keys is not self._keys and keys != self._keys:
            lines = [f"# HELP mirrorlag_topic_info {TOPIC_INFO_HELP}\n# TYPE mirrorlag_topic_info gauge\n"]
            for source, target, topic in sorted(dict.fromkeys(map(_TOPIC_OF_KEY, keys))):
                policy = self.policies.get((source, target))
                if policy is not None:
                    lines.append(f'mirrorlag_topic_info{{source="{_label_value(source)}",target="{_label_value(target)}",'
                                 f'topic="{_label_value(topic)}",remote_topic="{_label_value(policy.remote_topic(source, topic))}"}} 1\n')
            self._keys, self._text = keys, "".join(lines).encode()
        return self._text


def _group_codes(keys: Sequence[PartitionKey], group_of: Callable[[PartitionKey], T]) -> tuple[list[T], np.ndarray]:
    """The distinct groups of the rows' keys (a flow, a topic), sorted, and each row's index into
    them: one C-level dict lookup per row, no group object kept per row."""
    first_seen: dict[T, int] = {}
    seen = np.fromiter(map(first_seen.setdefault, map(group_of, keys), itertools.count()), np.int64, len(keys))
    groups = sorted(first_seen)  # type: ignore[type-var]
    rank = np.zeros(max(first_seen.values(), default=-1) + 1, np.int64)
    rank[[first_seen[g] for g in groups]] = np.arange(len(groups))
    return groups, rank[seen]


TOPIC_FAMILIES = (
    # (name, help, column, how: "sum" or "max")
    ("mirrorlag_topic_record_lag_sum", "Records the mirror still has to copy, summed over the topic's partitions (those with a known record lag).", "record_lag", "sum"),
    ("mirrorlag_topic_record_lag_max", "The largest record lag among the topic's partitions.", "record_lag", "max"),
    ("mirrorlag_topic_time_lag_max_seconds", "The largest time lag among the topic's partitions (KIP-16: seconds since caught up).", "time_lag_s", "max"),
    ("mirrorlag_topic_freshness_lag_max_seconds", "How long the oldest uncopied record of the topic has waited: the largest freshness lag among its partitions.", "freshness_lag_s", "max"),
)


class TopicAggregates:
    """Per flow and source topic: partitions by state and the lag figures an SRE reads first,
    whatever the per-partition cap leaves out. A few lines per topic, made with numpy over a
    topic code per row (recomputed only when the rows' keys change)."""

    def __init__(self, index: KeyIndex | None = None) -> None:
        self.index = index if index is not None else KeyIndex()  # shared with the renderer's other parts

    def text(self, cols: RowColumns) -> bytes:
        index = self.index.of(cols.keys)
        labels, code = index.topic_labels, index.topic_code
        live = cols.state != _GONE
        n, n_states = len(labels), len(STATES)
        out = ["# HELP mirrorlag_topic_partitions Partitions of each flow's source topic by state.\n"
               "# TYPE mirrorlag_topic_partitions gauge\n"]
        counts = np.bincount(code[live] * n_states + cols.state[live], minlength=n * n_states)
        for i in np.flatnonzero(counts).tolist():
            out.append(f'mirrorlag_topic_partitions{{{labels[i // n_states]},state="{STATES[i % n_states].value}"}} {counts[i]}\n')
        for name, help_text, column, how in TOPIC_FAMILIES:
            values, valid = cols.column(column)
            valid = valid & live
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
            known = np.bincount(code[valid], minlength=n)
            if how == "sum":
                figure = np.bincount(code[valid], weights=values[valid].astype(np.float64), minlength=n)
            else:
                figure = np.full(n, -np.inf)
                np.maximum.at(figure, code[valid], values[valid].astype(np.float64))
            integral = values.dtype.kind in "iu"
            for i in np.flatnonzero(known).tolist():
                value = int(figure[i]) if integral else float(figure[i])
                out.append(f"{name}{{{labels[i]}}} {_number(value)}\n")
        return "".join(out).encode()


def heartbeat_ages(stats: PollStats) -> dict[FlowId, float]:
    """Seconds between the newest replicated heartbeat (the emitter's clock) and the last poll."""
    if stats.last_poll_at is None:
        return {}
    return {flow: max(0.0, stats.last_poll_at - ms / 1000) for flow, ms in stats.heartbeat_ms.items()}


class FlowCollector(Collector):
    """Per-flow aggregates and the sidecar's own health: small, so prometheus_client renders them."""

    def __init__(self, index: KeyIndex | None = None) -> None:
        self.snapshot: Snapshot | None = None
        self.stats = PollStats()
        self.history: HistoryStats | None = None
        self.withheld = 0  # partitions the per-partition series cap left out of the last render
        self.capped = False
        self.index = index if index is not None else KeyIndex()  # shared with the renderer's other parts

    def collect(self) -> Iterator[Metric]:
        yield from self._flow_metrics()
        yield from self._self_metrics()
        if self.history is not None:
            yield from self._history_metrics(self.history)

    def _flow_metrics(self) -> Iterator[Metric]:
        # Column at a time with numpy over a flow code per row (a flow is its key's (source,
        # target)), the codes recomputed only when the rows' keys change.
        cols = self.snapshot.columns if self.snapshot else RowColumns.empty(0, [])
        flows, code = self._flow_codes(cols.keys)
        n_states = len(STATES)
        counts = np.bincount(code * n_states + cols.state, minlength=len(flows) * n_states)
        partitions = GaugeMetricFamily("mirrorlag_flow_partitions", "Partitions of each flow by state.", labels=["source", "target", "state"])
        per_state = sorted(((flows[i // n_states], STATES[i % n_states]), int(counts[i]))
                           for i in np.flatnonzero(counts).tolist())
        for ((source, target), state), n in per_state:  # a StrEnum sorts as its value
            partitions.add_metric([source, target, state.value], n)
        yield partitions
        lag, lag_known = cols.column("record_lag")
        time_lag, time_known = cols.column("time_lag_s")
        yield _distribution("mirrorlag_flow_record_lag_partitions", "Partitions of the flow by record lag, at the last poll (a gauge histogram).",
                            flows, code, lag, lag_known & (cols.state != _GONE), RECORD_LAG_BUCKETS)
        yield _distribution("mirrorlag_flow_time_lag_seconds_partitions", "Partitions of the flow by time lag in seconds, at the last poll (a gauge histogram).",
                            flows, code, time_lag, time_known, TIME_LAG_BUCKETS)
        yield self._by_feed(cols, flows, code)
        if self.capped:
            yield GaugeMetricFamily("mirrorlag_metrics_partitions_withheld",
                                    "Partitions without series of their own at the last render: past "
                                    "mirrorlag.metrics.partition.series.max, the worst are shown first and the "
                                    "rest are counted here (their topic's and flow's aggregates still count them).",
                                    value=self.withheld)

    @staticmethod
    def _by_feed(cols: RowColumns, flows: list[tuple[str, str]], code: np.ndarray) -> GaugeMetricFamily:
        """Partitions of each flow by the feed their LRO came from. Which feed wins changes from
        poll to poll (offset-syncs and connect-offsets overtake each other between flushes), so
        it is not a label on the lag series (their identity would flip) nor a series per partition
        (100k more lines a scrape, one appearing and one going at each flip): an SRE asks whether a
        feed still proves anything for a flow (a dead feed's count drops to 0 while another takes
        over), and this answers it with a few series per flow. A partition's own feed is lro_feed
        in /status, check --json and the history. Rows without an LRO, and GONE rows, count for no feed."""
        family = GaugeMetricFamily("mirrorlag_flow_partitions_by_lro_feed",
                                   "Partitions of each flow whose last replicated offset came from each feed (the highest LRO wins across feeds).",
                                   labels=["source", "target", "feed"])
        names = cols.feed_names
        if not flows or not names:
            return family
        counted = (cols.feed_code >= 0) & (cols.state != _GONE)
        width = len(names)
        counts = np.bincount(code[counted] * width + cols.feed_code[counted].astype(np.int64), minlength=len(flows) * width)
        present = np.bincount(code, minlength=len(flows)) > 0  # a flow with rows gets a 0 for each feed
        for i, (source, target) in enumerate(flows):
            if present[i]:
                for j, name in sorted(enumerate(names), key=itemgetter(1)):
                    family.add_metric([source, target, name], int(counts[i * width + j]))
        return family

    def _flow_codes(self, keys: Sequence[PartitionKey]) -> tuple[list[tuple[str, str]], np.ndarray]:
        """The flows, sorted, and each row's index into them."""
        index = self.index.of(keys)
        return index.flows, index.flow_code()

    def _self_metrics(self) -> Iterator[Metric]:
        s = self.stats
        info = GaugeMetricFamily("mirrorlag_build_info", "mirrorlag version.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        yield CounterMetricFamily("mirrorlag_polls", "Polls run.", value=s.polls_total)
        errors = CounterMetricFamily("mirrorlag_poll_errors", "Polls in which a source cluster could not be read.", labels=["cluster"])
        for cluster, count in sorted(s.poll_errors_total.items()):
            errors.add_metric([cluster], count)
        yield errors
        metadata_errors = CounterMetricFamily(
            "mirrorlag_metadata_errors", "Topic-level metadata errors other than UNKNOWN_TOPIC_OR_PARTITION on a source "
            "cluster, and known topics a listing omitted that a request naming them did not prove gone (the topic "
            "keeps its partitions; only a topic that does not exist turns GONE).", labels=["cluster"])
        for cluster, count in sorted(s.metadata_errors_total.items()):
            metadata_errors.add_metric([cluster], count)
        yield metadata_errors
        yield GaugeMetricFamily("mirrorlag_poll_duration_seconds", "Wall time of the last poll.", value=s.last_poll_duration_s)
        if s.last_success_at is not None:
            yield GaugeMetricFamily("mirrorlag_last_successful_poll_timestamp_seconds", "Unix time of the last poll that read every source cluster.", value=s.last_success_at)
        yield GaugeMetricFamily("mirrorlag_lro_cache_partitions", "Partitions with a known last replicated offset.", value=s.lro_cache_size)
        yield CounterMetricFamily("mirrorlag_lro_cache_evictions", "Last replicated offsets whose TTL expired without a newer value (kept as stale, never forgotten).", value=s.lro_evictions_total)
        yield _per_flow_counter("mirrorlag_lro_rewinds", "Times a partition's last replicated offset stepped back (MM2 resumed from an older commit and copies those records again).", s.rewinds_total)
        yield _per_flow_counter("mirrorlag_records_lost", "Records the source deleted before the mirror copied them (retention outran the mirror), proved data by the source probe.", s.records_lost_total)
        yield _per_flow_counter("mirrorlag_records_lost_unverified", "Offsets the source deleted before the mirror copied them whose kind no probe proved (a transaction marker may be all they were): no alert rests on them.", s.records_lost_unverified_total)
        probe = CounterMetricFamily("mirrorlag_probe_outcomes", "Source probe requests (a fetch from LRO + 1: are the records not yet copied data, and when was the oldest appended) by outcome: answered, cached, deferred (per-poll bound), not_authorized (no Read ACL on the topic), timeout, out_of_range (data deleted), error.", labels=["cluster", "reason"])
        for cluster, outcomes in sorted(s.probe_outcomes_total.items()):
            for reason, count in sorted(outcomes.items()):
                probe.add_metric([cluster, reason], count)
        yield probe

        heartbeat = GaugeMetricFamily("mirrorlag_flow_heartbeat_age_seconds", "Age of the newest MM2 heartbeat replicated to the target (absent while none was seen): a dead flow keeps growing, an idle healthy one stays near 1 s.", labels=["source", "target"])
        for flow, age in sorted(heartbeat_ages(s).items()):
            heartbeat.add_metric([flow.source, flow.target], age)
        yield heartbeat
        present = GaugeMetricFamily("mirrorlag_feed_topic_present", "1 when a topic a feed reads exists (MM2's internal topics; for target-progress, the remote topics), 0 while the feed waits for it.", labels=["feed", "cluster", "topic"])
        bad = CounterMetricFamily("mirrorlag_feed_bad_records", "Records a feed could not decode (counted and skipped).", labels=["feed", "cluster"])
        up = GaugeMetricFamily("mirrorlag_feed_up", "1 while a feed's cluster answers, 0 from a consumer error (unreachable, authentication, ...) until it answers again; the error is last_error in /status.", labels=["feed", "cluster"])
        feed_errors = CounterMetricFamily("mirrorlag_feed_errors", "Errors a feed's consumer ran into (connection failures, all brokers down, failed requests).", labels=["feed", "cluster"])
        for health in s.feeds:
            for topic in health.topics:
                present.add_metric([health.feed, health.cluster, topic], 0 if topic in health.missing else 1)
            bad.add_metric([health.feed, health.cluster], health.bad_records)
            up.add_metric([health.feed, health.cluster], 1 if health.up else 0)
            feed_errors.add_metric([health.feed, health.cluster], health.errors_total)
        yield from (present, bad, up, feed_errors)
        duplicates = CounterMetricFamily(
            "mirrorlag_mirror_duplicate_records",
            "Target records MM2 wrote more than once (producer retries, a restarted task's re-copies), from consecutive "
            "offset syncs (U, D), (U', D') of a partition: (D' - D) - (U' - U) where positive; counted since the "
            "sidecar started.", labels=["source", "target", "topic"])
        for health in s.feeds:
            for count in health.duplicates:
                duplicates.add_metric([count.source, count.target, count.topic], count.records)
        yield duplicates


    @staticmethod
    def _history_metrics(h: HistoryStats) -> Iterator[Metric]:
        for name, doc, value in (
            ("rows_written", "History rows in segments renamed into place.", h.rows_written_total),
            ("segments_written", "History segments written.", h.segments_written_total),
            ("dropped_rows", "History rows dropped: over mirrorlag.history.buffer.max.rows, or unwritten at shutdown.", h.dropped_rows_total),
            ("write_errors", "Failed history segment writes (disk full, unwritable directory); writing resumes on its own.", h.write_errors_total),
            ("upload_bytes", "History bytes uploaded to mirrorlag.history.upload.uri.", h.upload_bytes_total),
            ("upload_throttle_seconds", "Seconds the upload quota held the uploader back.", h.upload_throttle_seconds_total),
            ("upload_failures", "Failed history segment uploads (retried with backoff).", h.upload_failures_total),
            ("expired_segments", "Local history segments deleted after mirrorlag.history.retention.ms.", h.expired_segments_total),
            ("same_id_segments", "History segments another process wrote with this sidecar's mirrorlag.history.writer.id "
             "since it started: two sidecars with one id, which the rollup cannot tell apart.", h.same_id_segments_total),
        ):
            yield CounterMetricFamily(f"mirrorlag_history_{name}", doc, value=value)
        yield GaugeMetricFamily("mirrorlag_history_buffered_rows", "History rows in memory, not yet in a segment on disk.", value=h.buffered_rows)
        yield GaugeMetricFamily("mirrorlag_history_pending_upload_bytes", "Local segments not uploaded yet (never expired): alert when this keeps growing.", value=h.pending_upload_bytes)
        yield GaugeMetricFamily("mirrorlag_history_healthy", "1 when history writing, upload and expiry all succeed at their latest attempt.", value=1 if h.healthy else 0)


def _per_flow_counter(name: str, doc: str, counts: dict[FlowId, int]) -> CounterMetricFamily:
    counter = CounterMetricFamily(name, doc, labels=["source", "target"])
    for flow, count in sorted(counts.items()):
        counter.add_metric([flow.source, flow.target], count)
    return counter


def _distribution(name: str, doc: str, flows: list[tuple[str, str]], code: np.ndarray, values: np.ndarray,
                  valid: np.ndarray, bounds: tuple) -> GaugeHistogramMetricFamily:
    family = GaugeHistogramMetricFamily(name, doc, labels=["source", "target"])
    code, values = code[valid], values[valid]
    for i, (source, target) in enumerate(flows):
        flow_values = np.sort(values[code == i])
        if not flow_values.size:
            continue
        counts = np.searchsorted(flow_values, bounds, side="right").tolist()
        buckets = [(_number(float(b)), n) for b, n in zip(bounds, counts)]
        buckets.append(("+Inf", int(flow_values.size)))
        family.add_metric([source, target], buckets, gsum_value=float(flow_values.sum(dtype=np.float64)))
    return family


class MetricsRenderer:
    """Renders the whole exposition once per poll, never per scrape."""

    def __init__(self, detail: bool = True, policies: Mapping[tuple[str, str], ReplicationPolicy] | None = None,
                 series_max: int | None = None) -> None:
        """`policies`: each flow's (source, target) replication policy, for mirrorlag_topic_info
        (`policies_of(settings.flows)`); a flow without one has no info series. `series_max`:
        the per-partition series cap (PartitionBlock), None for every partition's series."""
        index = KeyIndex()  # one per renderer: its parts read the same key list
        self.partitions = PartitionBlock(detail, series_max, index)
        self.topics = TopicInfo(policies or {})
        self.topic_figures = TopicAggregates(index)
        self.collector = FlowCollector(index)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)

    def render_encoded(self, snapshot: Snapshot | None, stats: PollStats, history: HistoryStats | None,
                       encode: Callable[[Pieces], T], openmetrics: bool = False) -> Iterator[T]:
        """The exposition as `encode` of its pieces, a family at a time (the per-partition
        families encoded on the threads that write them: PartitionBlock.families_encoded)."""
        yield from self.partition_pieces(snapshot, encode)
        yield encode((self.tail(snapshot, stats, history, openmetrics),))

    def partition_pieces(self, snapshot: Snapshot | None, encode: Callable[[Pieces], T]) -> Iterator[T]:
        """The per-partition families, the same text in both formats."""
        if snapshot is not None and len(snapshot):
            yield from self.partitions.families_encoded(snapshot.columns, encode)
            # Arrow's allocator (mimalloc) keeps the freed pages of the render resident otherwise.
            pa.default_memory_pool().release_unused()

    def tail(self, snapshot: Snapshot | None, stats: PollStats, history: HistoryStats | None,
             openmetrics: bool = False) -> bytes:
        """What follows the per-partition families: the topic info and aggregates, the per-flow
        and self metrics; in OpenMetrics, the info series typed as such, and `# EOF`."""
        parts = []
        if snapshot is not None and len(snapshot):
            keys = snapshot.columns.keys
            parts += [self.topics.openmetrics(keys) if openmetrics else self.topics.text(keys),
                      self.topic_figures.text(snapshot.columns)]
        self.collector.snapshot, self.collector.stats, self.collector.history = snapshot, stats, history
        self.collector.withheld = self.partitions.withheld if snapshot is not None else 0
        self.collector.capped = self.partitions.series_max is not None
        parts.append(openmetrics_latest(self.registry) if openmetrics else generate_latest(self.registry))
        return b"".join(parts)


def policies_of(flows: Sequence[FlowSettings]) -> dict[tuple[str, str], ReplicationPolicy]:
    """Each flow's replication policy by (source, target), as MetricsRenderer takes them."""
    return {(flow.source, flow.target): flow.policy for flow in flows}
