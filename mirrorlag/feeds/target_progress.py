"""The target-progress feed: LROs from the remote partitions' end offsets on the target (docs/design.md §6).

MM2 copies a source partition into the remote partition of the same number, in offset order, one
target record per source data record. An offset sync (U, D) says upstream record U became target
record D, so the target records D + 1 ... T - 1 below the target's end offset T are copies of
T - 1 - D distinct upstream records after U:

    LRO >= U + (T - 1 - D), capped at L_t - 1 (this poll's source LEO snapshot, read before T)

Exact where the upstream range holds only data records: MM2 >= 3.7 syncs at every gap it skips
(a transaction marker, a compacted record), so gaps before the newest sync cost nothing, and the
source probe proves the ones after the last copied record. The target is read every poll, so this
evidence has poll resolution from an unpatched MM2.

It is wrong where target offsets are not one per copied record of one flow, so it is off there
and says so (`/status` `feeds[].off`): MM2 writing the target in transactions
(`<target>.exactly.once.source.support = enabled`: the markers take target offsets); a remote
topic more than one writer can feed, as the configuration shows (config/writers.py: two flows
into one target under IdentityReplicationPolicy, MM2's own topics there), off for those topics
only; and a remote topic that does not exist. Duplicates (a producer retry, a restarted task's
re-copies) show at the next sync as D' - D > U' - U: a partition whose newest sync showed them
gets no evidence from here until its next sync (the sync's own U stands, from the offset-syncs
feed). Duplicates written since the newest sync, and writers the configuration cannot see, still
read high until a sync shows them.
"""

from __future__ import annotations

import logging
from array import array
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.config.writers import RemoteWriters, Writers
from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
from mirrorlag.interfaces import NO_OFFSET, FeedHealth, FeedOff, LroFeed, PollRows, TopicRowsOf
from mirrorlag.kafka.remote import UNREAD, RemoteEndOffsets
from mirrorlag.kafka.source import make_admin, secret_values
from mirrorlag.model import FlowId, PartitionKey

log = logging.getLogger(__name__)

FEED_NAME = "target-progress"
NONE = NO_OFFSET  # no evidence (an upstream offset is never negative)


def progress_lros(upstream: np.ndarray, downstream: np.ndarray, target_end: np.ndarray,
                  leo: np.ndarray, duplicated: np.ndarray | None = None) -> np.ndarray:
    """Per partition, the LRO the target's end offset proves: U + (T - 1 - D), capped at LEO - 1.

    NONE where it proves nothing: no sync (U < 0), the target's end offset unread (T < 0), a
    target at or below the sync's own record (T <= D: the remote topic was truncated or created
    again), or the source LEO unread this poll (LEO < 0: the cap is what keeps a read taken after
    the LEO snapshot from looking like an LRO beyond the LEO, which would read as a RESET).
    `duplicated` (nonzero where the newest sync showed target records written more than once):
    NONE there too, until the partition's next sync. The target's records after D are no proof of
    distinct copies while retries may go on, so only the sync's U counts, and the offset-syncs feed
    gives it with its own (flush) resolution: were this feed to give U, it would win the tie at
    resolution 0 and a healthy mirror would read STALLED max after the sync."""
    valid = (upstream >= 0) & (target_end > downstream) & (leo >= 0)
    if duplicated is not None:
        valid &= duplicated == 0
    lro = np.minimum(upstream + (target_end - 1 - downstream), leo - 1)
    # A sync can only be for a record that existed: never below the sync itself.
    return np.where(valid, np.maximum(lro, upstream), NONE)


@dataclass
class TargetProgressFeed(LroFeed):
    """One target cluster's remote partitions, translated through the offset syncs of its flows.

    It reads the target at every poll, after the offset-syncs feeds drained (the poller lists it
    after them: every sync it uses was written before the end offsets it translates). Per
    partition it keeps the LRO it last proved (8 bytes, in an array per topic): a poll that cannot
    read a remote partition (the target down, a request timed out) hands that out again, as the
    topic feeds keep their newest record, rather than let the LRO fall back to the sync's and
    read as a rewind."""

    cluster_alias: str  # the target
    remote: RemoteEndOffsets
    flows: Sequence[FlowSettings]  # the flows into this target whose evidence is valid
    syncs: Mapping[FlowId, OffsetSyncsFeed]  # the feed holding each flow's offset syncs
    off: tuple[FeedOff, ...] = ()  # flows into this target where it is off, and why
    writers: RemoteWriters | None = None  # who can write each remote topic (None: one flow each)
    name: str = FEED_NAME
    bad_records: int = 0
    reader: None = None
    errors_total: int = 0
    topic_rows: TopicRowsOf | None = None
    _leos: Mapping[PartitionKey, int | None] = field(default_factory=dict)
    _rows: Sequence[PartitionKey] = ()
    _topics: tuple[str, ...] = ()  # the remote topics read at the last poll
    _proved: dict[tuple[FlowId, str], np.ndarray] = field(default_factory=dict)  # last LRO by partition number
    _shared: tuple[FeedOff, ...] = ()  # the remote topics of the last poll that more than one writer can feed

    def use_topic_rows(self, topic_rows: TopicRowsOf) -> None:
        self.topic_rows = topic_rows

    def see_leos(self, leos: Mapping[PartitionKey, int | None], rows: Sequence[PartitionKey]) -> None:
        self._leos, self._rows = leos, rows

    def offsets(self) -> PollRows:
        """The poll's LROs as an array over its rows. Every topic's syncs go into flat arrays at
        once: a few numpy objects a poll, not a few a topic (1,000 topics at 100k partitions)."""
        try:
            return self._translated()
        finally:
            # The poll's LEO map (a dict entry and an int a partition) must not outlive the poll.
            self._leos, self._rows = {}, ()

    def _translated(self) -> PollRows:
        out = np.full(len(self._rows), NONE, np.int64)
        names: list[str] = []  # per topic with syncs: its remote topic, first row, partition numbers,
        firsts: list[int] = []  # sync arrays and last proved LROs
        numbers_of: list[Sequence[int]] = []
        ups: list[array] = []
        downs: list[array] = []
        dups: list[array] = []
        proved: list[np.ndarray] = []
        shared: dict[Writers, set[str]] = {}  # writers -> remote topics of this target they share
        for flow in self.flows:
            for topic, upstream, downstream, duplicated in self.syncs[flow.id].topic_syncs(flow.id):
                where = self.topic_rows(flow.id, topic) if self.topic_rows is not None else None
                if where is None or not upstream:
                    continue
                remote = flow.policy.remote_topic(flow.source, topic)
                writers = self.writers.of(remote) if self.writers is not None else None
                if writers is not None and writers.shared:
                    # Another writer's records would count as this flow's copies: no request at all.
                    shared.setdefault(writers, set()).add(remote)
                    continue
                names.append(remote)
                firsts.append(where[0])
                numbers_of.append(where[1])
                ups.append(upstream)
                downs.append(downstream)
                dups.append(duplicated)
                proved.append(self._proved_of(flow.id, topic, len(upstream)))
        was, self._shared = self._shared, tuple(sorted(FeedOff(writers.flows, tuple(sorted(topics)),
                                            f"more than one writer feeds these topics on {self.cluster_alias}: {writers}")
                                    for writers, topics in shared.items()))
        for entry in set(self._shared) - set(was):
            named = ", ".join(entry.topics[:10]) + (f" and {len(entry.topics) - 10} more" if len(entry.topics) > 10 else "")
            log.info("target progress is off for %s of %s: %s", named, ", ".join(entry.flows), entry.reason)
        self._topics = tuple(sorted(set(names)))
        if not names:
            return PollRows(self._rows, out)
        counts = np.fromiter(map(len, ups), np.int64, len(ups))
        starts = np.cumsum(counts) - counts
        u = np.frombuffer(b"".join(ups), np.int64)  # one copy of every topic's syncs
        d = np.frombuffer(b"".join(downs), np.int64)
        dup = np.frombuffer(b"".join(dups), np.int8)
        last = np.concatenate([p[:n] for p, n in zip(proved, counts.tolist())])
        partition = np.arange(len(u)) - np.repeat(starts, counts)
        row = np.repeat(np.asarray(firsts, np.int64), counts) + partition
        listed = partition < np.repeat(np.fromiter(map(len, numbers_of), np.int64, len(names)), counts)
        for i in [i for i, numbers in enumerate(numbers_of) if type(numbers) is not range]:  # gaps: rare
            span = slice(int(starts[i]), int(starts[i] + counts[i]))
            known = np.asarray(numbers_of[i], np.int64)
            at = np.minimum(np.searchsorted(known, partition[span]), max(len(known) - 1, 0))
            listed[span] = (known[at] == partition[span]) if len(known) else False
            row[span] = firsts[i] + at
        ask = np.flatnonzero((u >= 0) & listed)
        if not ask.size:
            return PollRows(self._rows, out)
        topic_of = np.repeat(np.arange(len(names)), counts)[ask]
        ends = self.remote.read(names, topic_of, partition[ask])
        if self.remote.error is not None:
            self.errors_total += 1
        leo_of_row = np.fromiter((-1 if v is None else v for v in self._leos.values()), np.int64, len(self._leos))
        lro = np.where(ends == UNREAD, last[ask], progress_lros(u[ask], d[ask], ends, leo_of_row[row[ask]], dup[ask]))
        last[ask] = lro
        out[row[ask]] = lro
        for p, start, n in zip(proved, starts.tolist(), counts.tolist()):
            p[:n] = last[start:start + n]
        return PollRows(self._rows, out)

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        """Partitions whose log is gone or new: what was proved of the old log never applies."""
        for key in keys:
            proved = self._proved.get((key.flow, key.topic))
            if proved is not None and key.partition < len(proved):
                proved[key.partition] = NONE

    def _proved_of(self, flow: FlowId, topic: str, n: int) -> np.ndarray:
        """The topic's last proved LROs, at least n long (NONE: none yet)."""
        proved = self._proved.get((flow, topic))
        if proved is None or len(proved) < n:
            grown = np.full(n, NONE, np.int64)
            if proved is not None:
                grown[:len(proved)] = proved
            proved = self._proved[flow, topic] = grown
        return proved

    def health(self) -> FeedHealth:
        remote = self.remote
        return FeedHealth(self.name, self.cluster_alias, self._topics, tuple(sorted(remote.missing)), 0,
                          up=remote.error is None, errors_total=self.errors_total, last_error=remote.error,
                          off=self.off + self._shared)

    def close(self) -> None:
        pass  # an admin client holds no group or assignment to give back


def target_progress_feeds(settings: Settings, sync_feeds: Sequence[OffsetSyncsFeed]) -> list[TargetProgressFeed]:
    """One feed per target cluster of the configured flows, translating through `sync_feeds` (the
    flows they hold syncs of). Who writes each remote topic counts every flow of `settings`, with
    syncs or without: a flow MM2 writes no syncs for still copies into its remote topics."""
    syncs = {flow.id: feed for feed in sync_feeds for _, flow in feed.all_flows()}
    feeds = []
    for target in dict.fromkeys(flow.target for flow in settings.flows):
        flows = [flow for flow in settings.flows if flow.target == target and flow.id in syncs]
        if not flows:
            continue  # no syncs to translate through (feeds.off says why)
        on = [flow for flow in flows if not flow.target_transactional]
        off = tuple(FeedOff((str(flow.id),), (), f"{target}.exactly.once.source.support = enabled (transaction "
                            "markers take target offsets)") for flow in flows if flow.target_transactional)
        for entry in off:
            log.info("target progress is off for %s: %s", ", ".join(entry.flows), entry.reason)
        cluster = settings.clusters[target]
        remote = RemoteEndOffsets(target, make_admin(cluster, settings.request_timeout_s), settings.request_timeout_s,
                                  settings.leo_chunk_size, secret_values(cluster))
        feeds.append(TargetProgressFeed(target, remote, on, syncs, off, RemoteWriters(target, settings.flows)))
    return feeds
