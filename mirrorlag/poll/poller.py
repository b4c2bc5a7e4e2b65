"""One poll: LEO snapshot, then the feeds' LROs, then the pure engine, then a published snapshot.

The order matters (docs/design.md §3): the LEO snapshot is taken before any LRO is read, so "LRO + 1 >= LEO"
proves the mirror had copied everything that existed when the snapshot began.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from operator import attrgetter
from typing import Callable, Collection, Iterator, Mapping, Sequence

import numpy as np
from cachetools import TTLCache

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.feeds.callback import ReplicationTracker, TrackerFeed
from mirrorlag.feeds.connect_offsets import FEED_NAME as CONNECT_OFFSETS
from mirrorlag.feeds.off import one_per_cluster
from mirrorlag.feeds.offset_syncs import FEED_NAME as OFFSET_SYNCS
from mirrorlag.process.gil import pieces
from mirrorlag.interfaces import Engine, FeedHealth, HeartbeatSource, LroFeed, PollRows, PollStats
from mirrorlag.kafka.probe import SourceProbe
from mirrorlag.kafka.source import SourceCluster, SourceUnavailable, Topology, isolation_level, make_admin
from mirrorlag.poll.lro_cache import LOG_START, LroCache
from mirrorlag.model import STATES, FlowId, LroTable, PartitionKey, PollObservation, Snapshot, State

log = logging.getLogger("mirrorlag.poller")  # its name before the move (issue 42): operators' log filters

_GONE, _RESET = STATES.index(State.GONE), STATES.index(State.RESET)


@dataclass(frozen=True)
class _SourceView:
    """One source cluster's partitions at one topology: a key per (flow, partition), and the
    distinct partitions as ListOffsets asks for them, each named by a key of the first flow that
    replicates it at its isolation level (ListOffsets takes the keys themselves: no (topic,
    partition) pair is kept per partition)."""

    flows: tuple[FlowId, ...]  # the source's flows, in the order of topology
    topology: tuple[Topology, ...]  # per flow of the source, as discovered
    keys: tuple[PartitionKey, ...]
    key_parts: tuple[PartitionKey, ...]  # keys[i]'s partition, as `partitions` names it (keys itself for one flow)
    partitions: Sequence[PartitionKey]

    @classmethod
    def build(cls, flows: Sequence[FlowSettings], topology: tuple[Topology, ...],
              previous: _SourceView | None = None) -> _SourceView:
        # A partition already known keeps its key object: the feeds hold the keys they were given,
        # and new ones at each topology change (a topic created anywhere) would leave them a second
        # set of keys (and a key per partition made and dropped fragments the allocator's arenas).
        old: dict[tuple[FlowId, str], dict[int, PartitionKey]] = {}
        for key in previous.keys if previous is not None else ():
            old.setdefault((key.flow, key.topic), {})[key.partition] = key
        keys: list[PartitionKey] = []
        for flow, topics in zip(flows, topology):
            for topic, numbers in topics:
                known = old.get((flow.id, topic), {})
                keys += [known.get(p) or PartitionKey(flow.source, flow.target, topic, p) for p in numbers]
        ids, all_keys = tuple(flow.id for flow in flows), tuple(keys)
        if len(flows) == 1:  # each partition once, in discovery's order: topic, then partition
            return cls(ids, topology, all_keys, all_keys, all_keys)
        # A partition is asked once per isolation level its flows read at (MM2's consumer of each
        # flow has its own): flows at one level share the first one's key.
        level = {flow.target: flow.isolation_level for flow in flows}
        first: dict[tuple[str, str, int], PartitionKey] = {}  # only while the view is built
        for key in all_keys:
            first.setdefault((level[key.target], key.topic, key.partition), key)
        key_parts = tuple(first[level[key.target], key.topic, key.partition] for key in all_keys)
        return cls(ids, topology, all_keys, key_parts, sorted(first.values(), key=attrgetter("topic", "partition")))


class _TopicKeys(Mapping[str, Sequence[PartitionKey | None]]):
    """One flow's keys per topic, by partition number (None where metadata lists none), as
    slices of the view's keys: a topic's entry is where its keys start there and its partition
    numbers, so nothing is kept per partition."""

    def __init__(self, keys: tuple[PartitionKey, ...], topics: dict[str, tuple[int, Sequence[int]]]) -> None:
        self._keys = keys
        self._topics = topics

    @classmethod
    def of(cls, view: _SourceView, flow: FlowId) -> _TopicKeys:
        if flow not in view.flows:
            return cls((), {})
        i = view.flows.index(flow)
        start = sum(len(numbers) for topics in view.topology[:i] for _, numbers in topics)
        topics = {}
        for topic, numbers in view.topology[i]:
            topics[topic] = (start, numbers)
            start += len(numbers)
        return cls(view.keys, topics)

    def key(self, topic: str, partition: int) -> PartitionKey | None:
        entry = self._topics.get(topic)
        if entry is None:
            return None
        start, numbers = entry
        if type(numbers) is range:  # 0..n-1, the usual case
            return self._keys[start + partition] if type(partition) is int and 0 <= partition < len(numbers) else None
        return self._keys[start + numbers.index(partition)] if partition in numbers else None

    def rows(self, topic: str) -> tuple[int, Sequence[int]] | None:
        """Where the topic's keys start among the view's keys, and its partition numbers."""
        return self._topics.get(topic)

    def __getitem__(self, topic: str) -> Sequence[PartitionKey | None]:
        start, numbers = self._topics[topic]
        if type(numbers) is range:
            return self._keys[start:start + len(numbers)]
        by_partition: list[PartitionKey | None] = [None] * (max(numbers) + 1)
        for j, p in enumerate(numbers):
            by_partition[p] = self._keys[start + j]
        return by_partition

    def __iter__(self) -> Iterator[str]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)


def _offsets_array(values: Collection[int | None], n: int) -> np.ndarray:
    """Offsets as int64, -1 where none answered: in C when all did (the usual case, ~2 ms at
    100k), an item at a time only when one did not."""
    try:
        return np.fromiter(values, np.int64, n)
    except TypeError:  # a None
        return np.fromiter((-1 if v is None else v for v in values), np.int64, n)


def _merged(first: Mapping[PartitionKey, int], second: Mapping[PartitionKey, int]) -> Mapping[PartitionKey, int]:
    """Two feeds of one kind (disjoint flows): one mapping, or one array where both are rows."""
    if isinstance(first, PollRows) and isinstance(second, PollRows) and first.rows is second.rows:
        return first.merged(second)
    if type(second) is dict and not second:  # a feed with nothing to give (feeds.off): rows stay rows
        return first
    return {**first, **second}


class Poller:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        feeds: Sequence[LroFeed] = (),
        trackers: Sequence[ReplicationTracker] = (),
        heartbeats: Sequence[HeartbeatSource] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.trackers = {t.flow: t for t in trackers}
        # Per flow, its topics' keys by partition number: how a feed that names partitions by
        # (topic, partition) finds the poller's key.
        self._keys_by_topic: dict[FlowId, _TopicKeys] = {}
        self.feeds: list[LroFeed] = [
            *feeds, *(TrackerFeed(t, lambda flow=t.flow: self._topic_keys(flow)) for t in trackers),
        ]
        for feed in feeds:
            # Feeds that decode keys from MM2's records take the poller's key objects rather than
            # keeping a second one per partition: one at a time, or per topic; a feed may hand
            # its LROs over as an array aligned with the poll's rows.
            feed.use_keys(self._key_of)
            feed.use_topic_keys(self._topic_keys)
            feed.use_topic_rows(self._topic_rows)
        self.heartbeats = list(heartbeats)
        self.engine = engine
        self.cache = LroCache(settings.lro_ttl_s)
        self.stats = PollStats()
        self.sources = {alias: self._source_cluster(alias) for alias in settings.source_aliases}
        # Each flow's LEOs and probe read at the level MM2's consumer of that flow reads at.
        self._isolation = {flow.id: flow.isolation_level for flow in settings.flows}
        self._topology: dict[FlowId, Topology] = {}
        self._views: dict[str, _SourceView] = {}  # per source alias, rebuilt when its topology changes
        self._available: dict[str, bool] = {}
        # Per source alias, why its last read failed (None: it was read): for the sidecar's /readyz.
        self.read_errors: dict[str, str | None] = {}
        # Per source: when its metadata is next read (mirrorlag.metadata.max.age.ms), and the
        # sources whose last poll left partitions unanswered (read again at the next poll).
        self._metadata_due: dict[str, float] = {}
        self._stale_metadata: set[str] = set()
        # Per source alias, the last poll's view partitions and their LEOs (-1: none answered): an
        # LEO that went back (a recreated topic) has its topic ID read at once.
        self._leo_rows: dict[str, tuple[Sequence[PartitionKey], np.ndarray]] = {}
        self._log_starts_due = 0.0  # when the next ListOffsets earliest is due
        self._new_logs: list[PartitionKey] = []  # this poll's partitions whose topic ID changed
        # Evidence that moves once per offset flush: connect-offsets, and the offset syncs of a
        # partition slower than offset.lag.max records a flush (MM2 >= 3.7). Per flow: the flush
        # of its own target's MM2 workers (MirrorMakerConfig.workerConfig is per target cluster).
        # A partition owed from its log start shows its first copy in an offset sync (the first
        # record of a partition is synced at once) or, with connect-offsets alone, at a flush.
        flush_s = {f.id: f.offset_flush_interval_s for f in settings.flows}
        self._resolution: dict[str, Mapping[FlowId, float]] = {CONNECT_OFFSETS: flush_s, OFFSET_SYNCS: flush_s,
                                                               LOG_START: flush_s}
        self._probes: dict[tuple[str, str], SourceProbe] = {}  # per source alias and isolation level, made when first needed
        self._row_base: dict[str, int] = {}  # per source alias, its view's first row in the poll's rows
        self._previous_poll: float | None = None  # when the previous poll read its LROs
        # The log starts of partitions no feed gives an LRO (normally few): what they owe.
        self._log_starts_owed: dict[PartitionKey, int] = {}
        # Partitions on a new log (RESET) that no feed has said anything about since: UNKNOWN, not
        # owed (docs/design.md §3: until evidence newer than the reset arrives).
        self._renewed: set[PartitionKey] = set()
        # Topics that went GONE: a partition of theirs seen again is on a new log (renewed). Kept a
        # day, bounded: topics churn (a Streams application's repartition topics, say).
        self._gone_topics: TTLCache[tuple[FlowId, str], bool] = TTLCache(maxsize=10_000, ttl=86_400, timer=clock)
        # The previous poll's rows and which had an LRO: a first LRO of a partition behind is probed.
        self._had_lro: tuple[Sequence[PartitionKey] | None, np.ndarray] = (None, np.zeros(0, bool))

    def _source_cluster(self, alias: str) -> SourceCluster:
        settings = self.settings
        flows = [f for f in settings.flows if f.source == alias]
        levels = {f.target: isolation_level(f.isolation_level) for f in flows}
        return SourceCluster(
            alias=alias,
            admin=make_admin(settings.clusters[alias], settings.request_timeout_s),
            flows=flows,
            timeout_s=settings.request_timeout_s,
            chunk_size=settings.leo_chunk_size,
            isolation=levels[flows[0].target],
            isolation_by_target=levels if len(set(levels.values())) > 1 else {},
            cap_id_reads=not settings.metadata_max_age_s,  # on a cadence: every topic ID at each read
        )

    def poll_once(self) -> Snapshot:
        started = self.clock()
        leo_at = started
        leos: dict[PartitionKey, int | None] = {}
        failed = False
        self._new_logs = []
        for source in self.sources.values():
            self._row_base[source.alias] = len(leos)  # its view's keys follow those of the sources before it
            failed |= not self._read_source(source, leos, started)
        log_starts = self._read_log_starts(leos, started)
        new_logs = self._new_logs
        if new_logs:
            # Topics deleted and created again since the last discovery: the old logs' LROs leave
            # the feeds and the cache before any LRO is read, and the engine is told (RESET).
            self._drop_lros(new_logs)
        now = self.clock()
        # The poll's rows, as the LRO cache holds them: `leos`'s keys in order (one source: its
        # view's key tuple itself, which the cache then keeps rather than a list of its own).
        views = [self._views[alias] for alias in self.sources if alias in self._views]
        rows = views[0].keys if len(views) == 1 == len(self.sources) else list(leos)
        by_feed: dict[str, Mapping[PartitionKey, int]] = {}
        written_at: dict[str, Mapping[PartitionKey, float]] = {}
        for feed in self.feeds:  # feeds of one kind on several clusters hold disjoint flows
            feed.see_leos(leos, rows)
            offsets = feed.offsets()
            by_feed[feed.name] = _merged(by_feed[feed.name], offsets) if feed.name in by_feed else offsets
            if times := feed.evidence_times():
                written_at[feed.name] = {**written_at.get(feed.name, {}), **times}
        # Only the partitions this poll knows (`leos`: those of the configured flows that the
        # source has) may hold an LRO: a feed record naming one that does not exist (junk, or a
        # deleted topic) must not grow the cache. Feeds keep what they read, so a partition
        # discovered later gets its LRO then.
        # Feeds are read in their order (target progress after the syncs it translates through);
        # where several prove the same LRO, the finest resolution wins (the cache gives a tie to
        # the first feed named), its age still that of the oldest record proving it.
        by_feed = dict(sorted(by_feed.items(), key=lambda item: self._longest_resolution(item[0])))
        lros = self.cache.update(by_feed, now, rows, written_at)
        if owed := self._owed_from_log_start(leos, rows, lros, log_starts):
            lros = self.cache.fill(LOG_START, owed, now)
        sizes = {flow: mean for flow, t in self.trackers.items() if (mean := t.mean_record_bytes()) is not None}
        first_data: dict[PartitionKey, int] = {}
        data_to: dict[PartitionKey, int] = {}
        unprobed: set[PartitionKey] = set()
        probed = self._probe(leos, rows, lros, first_data, unprobed, data_to)
        if owed and (dates := {key: at for key in owed if isinstance(at := probed.get(key), float)}):
            # Owed since its oldest record was appended: the mirror has not moved since (a mirror
            # that never copied a partition an hour old reads STALLED at its first look).
            lros = self.cache.backdate(LOG_START, dates, now)
        self._previous_poll = now
        snapshot = self.engine.update(PollObservation(leo_at, now, leos, lros, log_starts, sizes,
                                                      frozenset(new_logs), self._resolution, probed, first_data,
                                                      unprobed, data_to))
        cols = snapshot.columns
        gone = [cols.keys[i] for i in np.flatnonzero(cols.state == _GONE).tolist()]
        self._forget(gone)
        for key in gone:  # if it comes back, it is a new log: UNKNOWN until evidence about it
            self._gone_topics[key.flow, key.topic] = True
        # A RESET row's LRO is the old log's: it leaves the feeds and the cache, so the partition
        # reads UNKNOWN until evidence about the new log arrives (one vectorised test when none is).
        if (reset := np.flatnonzero(cols.state == _RESET)).size:
            self._drop_lros([cols.keys[i] for i in reset.tolist()])
        for heartbeats in self.heartbeats:
            self.stats.heartbeat_ms.update(heartbeats.newest())

        stats = self.stats
        stats.polls_total += 1
        stats.last_poll_at = now
        stats.last_poll_duration_s = self.clock() - started
        stats.lro_cache_size = len(self.cache)
        stats.lro_evictions_total = self.cache.evictions_total
        stats.rewinds_total = dict(self.engine.rewinds_total)
        stats.records_lost_total = dict(self.engine.records_lost_total)
        stats.records_lost_unverified_total = dict(getattr(self.engine, "records_lost_unverified_total", {}))
        outcomes: dict[str, dict[str, int]] = {}
        for (alias, _), probe in self._probes.items():  # a cluster's probes at each isolation level, summed
            per_reason = outcomes.setdefault(alias, {})
            for reason, n in probe.stats.outcomes.items():
                per_reason[reason] = per_reason.get(reason, 0) + n
        stats.probe_outcomes_total = outcomes
        stats.mean_record_bytes = sizes
        stats.feeds = one_per_cluster([
            dataclasses.replace(health, resolution_s=self._longest_resolution(feed.name))
            for feed in self.feeds if (health := feed.health()) is not None
        ]) + [FeedHealth.of(feed.name, feed.reader, feed.bad_records) for feed in self.heartbeats if feed.reader is not None]
        if not failed:
            stats.last_success_at = now
        return snapshot

    def _longest_resolution(self, feed: str) -> float:
        """A feed's resolution over its flows: the longest (per flow in /status `flows[]`)."""
        return max(self._resolution.get(feed, {}).values(), default=0.0)

    def close(self) -> None:
        """Close the feeds' consumers; only once no poll runs."""
        for feed in (*self.feeds, *self.heartbeats):
            feed.close()
        for probe in self._probes.values():
            probe.close()

    def _owed_from_log_start(self, leos: Mapping[PartitionKey, int | None], rows: Sequence[PartitionKey],
                             lros: LroTable, log_starts: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
        """An LRO of `log start - 1` for the partitions with records that no feed gives one,
        once a feed of their flow has read its evidence through (docs/design.md §3, no LRO, records to
        copy): MM2's consumer starts a partition it never copied at its log start
        (auto.offset.reset = earliest, its default), so every record from there is owed. Where it
        starts at `latest`, nothing says where it began, and they stay UNKNOWN; `/status` says
        why in `evidence_unread`. Only such partitions' log starts are kept between reads."""
        read: set[FlowId] = set()
        why: dict[FlowId, str] = {}
        for feed in self.feeds:
            for flow, reason in feed.evidence_read().items():
                if reason is None:
                    read.add(flow)
                else:
                    why.setdefault(flow, reason)
        unread: dict[FlowId, str] = {}
        for flow in self.settings.flows:
            if flow.source_consumer_reset != "earliest":
                unread[flow.id] = (f"MM2's source consumer starts at auto.offset.reset = "
                                   f"{flow.source_consumer_reset}: where it began is unknown")
            elif flow.id not in read:
                unread[flow.id] = why.get(flow.id, "no feed shows this flow's first copies")
        self.stats.evidence_unread = unread
        has_r, _, _, _, feed, names = lros.aligned(rows)
        floor = names.index(LOG_START) if LOG_START in names else -2
        if self._renewed:
            present = dict.fromkeys(rows)  # only while a new log waits for its first evidence
            self._renewed = {key for key in self._renewed if key in present and key not in lros}
        # Partitions with no LRO of a feed's: their first log start seen is kept (the others' is not
        # needed). Retention moving it later deletes records MM2 never copied: lost, not copied.
        candidates = np.flatnonzero(~has_r | (feed == floor)).tolist()
        starts = self._log_starts_owed
        if log_starts or starts:  # a partition that got a feed's LRO no longer owes from its log start
            kept = {rows[i] for i in candidates}
            for key in [k for k in starts if k not in kept]:
                del starts[key]
            for key in kept:
                if key not in starts and (start := log_starts.get(key)) is not None:
                    starts[key] = start
        owed: dict[PartitionKey, int] = {}
        for key, start in starts.items():
            leo = leos.get(key)
            if leo is not None and start < leo and key.flow not in unread and key not in self._renewed:
                owed[key] = start - 1
        return owed

    def _probe(self, leos: Mapping[PartitionKey, int | None], keys: Sequence[PartitionKey], lros: LroTable,
               first_data: dict[PartitionKey, int] | None = None,
               unprobed: set[PartitionKey] | None = None,
               data_to: dict[PartitionKey, int] | None = None) -> dict[PartitionKey, float | None]:
        """The source probe at LRO + 1 (docs/design.md §3) for partitions behind whose LRO has not moved
        since the previous poll (a stall, or nothing but transaction markers left to copy) and for
        every partition behind at its first LRO (a mirror that stalled before the sidecar started,
        or before its evidence was read). `keys` are `leos`'s, in order. The probe remembers its
        answers, so a partition that stays put costs no fetch. `first_data` gets the offset of
        the first data record where the probe found one, `data_to` the end of the run of data records
        it proved from there, and `unprobed` the partitions asked that it did not answer (their
        time lag may be a lower bound)."""
        if not len(lros):
            return {}
        has_r, off, changed, _, _, _ = lros.aligned(keys)
        leo = _offsets_array(leos.values(), len(keys))
        behind = has_r & (off + 1 < leo)
        had_keys, had = self._had_lro
        same = had_keys is not None and (had_keys is keys or list(had_keys) == list(keys))  # identity first, in C
        first = has_r & ~had if same else has_r  # a changed topology: every LRO is new to it
        self._had_lro = (keys, has_r)
        if self._previous_poll is not None:  # unmoved since the previous poll (which dated its changes then)
            behind &= (changed <= self._previous_poll) | first
        rows = np.flatnonzero(behind).tolist()
        if not rows:
            for probe in self._probes.values():
                probe.probe(())  # nothing asked: partitions left waiting for a fetch stop waiting
            return {}
        # One probe per source and isolation level: each flow's at the level its MM2 consumer reads.
        by_probe: dict[tuple[str, str], list[tuple[PartitionKey, int, int]]] = {}
        for i in rows:
            key = keys[i]
            level = self._isolation.get(key.flow, "read_uncommitted")
            by_probe.setdefault((key.source, level), []).append((key, int(off[i]) + 1, int(leo[i])))
        found: dict[PartitionKey, float | None] = {}
        for (alias, level), requests in by_probe.items():
            probe = self._probes.get((alias, level))
            if probe is None:
                probe = self._probes[alias, level] = SourceProbe.for_cluster(self.settings.clusters[alias], level)
            answered = probe.probe(requests, first_data, data_to) if data_to is not None else \
                probe.probe(requests, first_data)
            found.update(answered)  # type: ignore[arg-type]
            if unprobed is not None and len(answered) < len(requests):
                unprobed.update(key for key, _, _ in requests if key not in answered)
        return found

    def _read_source(self, source: SourceCluster, leos: dict[PartitionKey, int | None], started: float) -> bool:
        """Add the source's partitions and LEOs to `leos`; False when the cluster failed us.

        Metadata (the listing and topic IDs) has its own cadence, `mirrorlag.metadata.max.age.ms`:
        a LEO poll does not pay for it. An end offset that failed to read (a deleted topic answers
        UNKNOWN_TOPIC_OR_PART) or went back (a recreated topic) has it read at once, at that
        poll, with those topics' IDs."""
        # The LEOs of the partitions known so far are asked before the metadata, so the two round
        # trips overlap (each is long at 100k partitions); only partitions it adds are asked after.
        alias = source.alias
        known = self._views.get(alias)
        pending = source.request_end_offsets(known.partitions) if known is not None else None
        try:
            on_cadence = known is None or started >= self._metadata_due.get(alias, 0.0)
            discovered = on_cadence or alias in self._stale_metadata
            if discovered:
                if on_cadence:
                    self._metadata_due[alias] = started + self.settings.metadata_max_age_s
                view = self._discover(source, None if on_cadence else ())
            else:
                view = self._view(source)
            offsets = source.end_offsets(view.partitions, pending)
            failed, went_back = self._suspect_topics(alias, view, offsets)
            # A read this poll already asked about the failed ones (asked again next poll, below)
            # and has the IDs it read.
            suspect = went_back - source.ids_read if discovered else failed | went_back
            if suspect:
                # Read now, with their topic IDs: a deleted topic is GONE and a recreated one RESET at
                # this poll. Partitions the read adds are asked now; the others keep their answer.
                view = self._discover(source, suspect)
                offsets = source.end_offsets(view.partitions, pending)
                failed, _ = self._suspect_topics(alias, view, offsets)
            if failed:
                # A partition that still did not answer may be gone (or new to a broker): read the
                # metadata again next poll rather than wait for its age.
                self._stale_metadata.add(alias)
            self._set_available(source.alias, True)
        except SourceUnavailable as exc:
            self._stale_metadata.add(alias)
            # Keep the partitions we knew, with unknown LEOs: a blip must not report them GONE.
            self.stats.poll_errors_total[source.alias] = self.stats.poll_errors_total.get(source.alias, 0) + 1
            self._set_available(source.alias, False, str(exc))
            view = self._view(source)
            offsets = {}
        # In pieces, so that a scrape is not kept waiting for the GIL (mirrorlag.process.gil).
        for keys, key_parts in zip(pieces(view.keys), pieces(view.key_parts)):
            leos.update(zip(keys, map(offsets.get, key_parts)))
        return bool(self._available[source.alias])

    def _discover(self, source: SourceCluster, ids_of: Collection[str] | None) -> _SourceView:
        """Reads the source's metadata (topic IDs as SourceCluster.discover says) and returns its
        view; the partitions of topics recreated since join this poll's new logs."""
        alias = source.alias
        self._topology.update(source.discover() if ids_of is None else source.discover(ids_of))
        self._stale_metadata.discard(alias)
        if source.unresolved:  # topics kept, absent from the listing, unanswered by name: ask again
            self._stale_metadata.add(alias)
        self.stats.metadata_errors_total[alias] = source.metadata_errors
        view = self._view(source)
        if recreated := source.recreated:
            for flow in source.flows:
                by_topic = self._keys_by_topic.get(flow.id, {})
                self._new_logs += [key for topic in recreated if topic in by_topic
                                   for key in by_topic[topic] if key is not None]
        return view

    def _suspect_topics(self, alias: str, view: _SourceView,
                        offsets: Mapping[PartitionKey, int | None]) -> tuple[set[str], set[str]]:
        """The topics with a partition whose end offset did not answer, and those with one below
        what the previous poll read (`offsets` is in `view.partitions`' order). This poll's are
        kept for the next one's comparison (-1 where none answered)."""
        n = len(view.partitions)
        now = _offsets_array(offsets.values(), n)
        before_keys, before = self._leo_rows.get(alias, (view.partitions, np.full(n, -1, np.int64)))
        if before_keys is not view.partitions:  # a new view (metadata changed): match by partition
            by_key = dict(zip(before_keys, before.tolist()))
            before = np.fromiter((by_key.get(k, -1) for k in view.partitions), np.int64, n)
        self._leo_rows[alias] = (view.partitions, now)
        topic = view.partitions
        failed = {topic[i][-2] for i in np.flatnonzero(now < 0).tolist()}
        return failed, {topic[i][-2] for i in np.flatnonzero(now < before).tolist()}

    def _view(self, source: SourceCluster) -> _SourceView:
        """The source's partitions as keys and as a sorted request list, made again only when
        metadata changed (a key per partition and a sort of them all are too dear for every poll)."""
        topology = tuple(self._topology.get(flow.id, ()) for flow in source.flows)
        view = self._views.get(source.alias)
        if view is None or view.topology != topology:
            view = self._views[source.alias] = _SourceView.build(source.flows, topology, view)
            self._log_starts_due = 0.0  # new partitions' log starts say whether they owe anything
            for flow in source.flows:
                by_topic = self._keys_by_topic[flow.id] = _TopicKeys.of(view, flow.id)
                for topic in [t for t in by_topic if (flow.id, t) in self._gone_topics] if self._gone_topics else ():
                    del self._gone_topics[flow.id, topic]  # back: a new log
                    self._renewed.update(key for key in by_topic[topic] if key is not None)
        return view

    def _topic_keys(self, flow: FlowId) -> Mapping[str, Sequence[PartitionKey | None]]:
        """A flow's keys per topic, by partition number (empty while metadata lists none)."""
        return self._keys_by_topic.get(flow, {})

    def _topic_rows(self, flow: FlowId, topic: str) -> tuple[int, Sequence[int]] | None:
        """Where a flow's topic sits in this poll's rows: its first row and its partition numbers."""
        by_topic = self._keys_by_topic.get(flow)
        entry = by_topic.rows(topic) if by_topic is not None else None
        base = self._row_base.get(flow.source)
        return None if entry is None or base is None else (base + entry[0], entry[1])

    def _key_of(self, flow: FlowId, topic: str, partition: int) -> PartitionKey | None:
        """The view's key of a flow's partition, or None while metadata does not list it."""
        by_topic = self._keys_by_topic.get(flow)
        return by_topic.key(topic, partition) if by_topic is not None else None

    def _read_log_starts(self, leos: Mapping[PartitionKey, int | None], started: float) -> dict[PartitionKey, int]:
        """Log starts of the partitions whose LEO was read, every retention poll interval."""
        if started < self._log_starts_due:
            return {}
        self._log_starts_due = started + self.settings.retention_poll_interval_s
        result: dict[PartitionKey, int] = {}
        for alias, source in self.sources.items():
            view = self._views.get(alias)
            if view is None:
                continue
            read = {tp for key, tp in zip(view.keys, view.key_parts) if leos.get(key) is not None}
            try:
                starts = source.start_offsets([tp for tp in view.partitions if tp in read])
            except SourceUnavailable as exc:
                log.debug("%s; retrying at the next poll", exc)
                self._log_starts_due = started  # try again next poll
                continue
            result.update({key: start for key, tp in zip(view.keys, view.key_parts)
                           if tp in read and (start := starts.get(tp)) is not None})
        return result

    def _forget(self, keys: list[PartitionKey]) -> None:
        """Gone partitions leave the feeds and the source probe's findings (the LRO cache drops
        them as they leave the poll's partitions), so that if the topic comes back, its new log
        starts UNKNOWN instead of taking the old log's LRO or records (a false lag, or a false
        IN_SYNC)."""
        if not keys:
            return
        for key in keys:
            self._log_starts_owed.pop(key, None)
        for feed in self.feeds:  # the trackers' feeds among them
            feed.forget(keys)
        topics = {key.topic for key in keys}
        for probe in self._probes.values():
            probe.forget(topics)  # what it learnt of the old logs' offsets: a new log reuses them

    def _drop_lros(self, keys: list[PartitionKey]) -> None:
        """The LROs of partitions whose log is new (RESET, or a topic ID changed) leave the feeds
        and the cache; the partitions stay (UNKNOWN until evidence about the new log arrives)."""
        self._forget(keys)
        self.cache.forget(keys)
        self._renewed.update(keys)
        self._log_starts_due = 0.0  # a new log's start: read at the next poll

    def _set_available(self, alias: str, ok: bool, reason: str = "") -> None:
        """Record whether a source cluster was read, and why not. The outage's one line (at its
        start, with the clients' cause) and its recovery's are mirrorlag.sidecar.cluster_watch's, which
        reads `read_errors`; here a change is only a debug line."""
        self.read_errors[alias] = None if ok else reason
        if self._available.get(alias) == ok:
            return
        self._available[alias] = ok
        log.debug("source cluster %s: %s", alias, "read" if ok else f"not read ({reason})")
