"""Prometheus exposition, rendered once per poll so a scrape only copies bytes.

A custom collector turns the current snapshot into metric families; `render()` runs it once after
each poll and the HTTP server hands out the cached text. Partitions whose lag is unknown have no
lag series (unknown is never 0); a GONE partition shows once in `mirrorlag_partition_state` and its
label sets then disappear.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mirrorlag import __version__
from mirrorlag.model import FlowId, Snapshot, State
from mirrorlag.poller import PollStats

PARTITION_LABELS = ["source", "target", "topic", "partition"]

RECORD_LAG_HELP = (
    "Records the mirror still has to copy: source log-end offset - (last replicated offset + 1), "
    "0 when caught up (KIP-971 replication-record-lag, which reads 1 when caught up). An offset "
    "distance: transaction markers and compaction gaps make it an upper bound on records."
)


def heartbeat_ages(stats: PollStats) -> dict[FlowId, float]:
    """Seconds between the newest replicated heartbeat (the emitter's clock) and the last poll."""
    if stats.last_poll_at is None:
        return {}
    return {flow: max(0.0, stats.last_poll_at - ms / 1000) for flow, ms in stats.heartbeat_ms.items()}


class SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.stats = PollStats()

    def collect(self) -> Iterator[Metric]:
        yield from self._partition_metrics()
        yield from self._self_metrics()

    def _partition_metrics(self) -> Iterator[Metric]:
        def gauge(name: str, doc: str, extra: list[str] | None = None) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=PARTITION_LABELS + (extra or []))

        lag = gauge("mirrorlag_replication_record_lag", RECORD_LAG_HELP)
        lag_min = gauge("mirrorlag_replication_record_lag_min", "Minimum record lag over the sample windows (metrics.num.samples x metrics.sample.window.ms).")
        lag_max = gauge("mirrorlag_replication_record_lag_max", "Maximum record lag over the sample windows.")
        lag_avg = gauge("mirrorlag_replication_record_lag_avg", "Average record lag over the sample windows.")
        time_lag = gauge("mirrorlag_replication_time_lag_seconds", "Seconds since the mirror last had every record of this partition (0 when caught up).")
        leo = gauge("mirrorlag_source_log_end_offset", "Source partition log-end offset (ListOffsets latest) at the last poll.")
        lro = gauge("mirrorlag_last_replicated_offset", "Source offset of the last record the target acknowledged.", ["feed"])
        lro_age = gauge("mirrorlag_lro_age_seconds", "Seconds since the last replicated offset last moved.", ["feed"])
        state = gauge("mirrorlag_partition_state", "1 for the partition's current state (UNKNOWN, IN_SYNC, LAGGING, STALLED, REWIND, RESET, GONE).", ["state"])
        per_state: dict[tuple[str, str, str], int] = {}

        for row in self.snapshot.rows if self.snapshot else ():
            labels = [row.key.source, row.key.target, row.key.topic, str(row.key.partition)]
            state.add_metric(labels + [row.state.value], 1)
            flow_state = (row.key.source, row.key.target, row.state.value)
            per_state[flow_state] = per_state.get(flow_state, 0) + 1
            if row.state is State.GONE:
                continue
            if row.record_lag is not None:
                lag.add_metric(labels, row.record_lag)
            for family, value in ((lag_min, row.record_lag_min), (lag_max, row.record_lag_max),
                                  (lag_avg, row.record_lag_avg), (time_lag, row.time_lag_s),
                                  (leo, row.leo)):
                if value is not None:
                    family.add_metric(labels, value)
            if row.lro is not None:
                lro.add_metric(labels + [row.lro_feed or ""], row.lro)
                if row.lro_age_s is not None:
                    lro_age.add_metric(labels + [row.lro_feed or ""], row.lro_age_s)
        yield from (lag, lag_min, lag_max, lag_avg, time_lag, leo, lro, lro_age, state)

        partitions = GaugeMetricFamily("mirrorlag_flow_partitions", "Partitions of each flow by state.", labels=["source", "target", "state"])
        for (source, target, state_name), count in sorted(per_state.items()):
            partitions.add_metric([source, target, state_name], count)
        yield partitions

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
        yield GaugeMetricFamily("mirrorlag_poll_duration_seconds", "Wall time of the last poll.", value=s.last_poll_duration_s)
        if s.last_success_at is not None:
            yield GaugeMetricFamily("mirrorlag_last_successful_poll_timestamp_seconds", "Unix time of the last poll that read every source cluster.", value=s.last_success_at)
        yield GaugeMetricFamily("mirrorlag_lro_cache_partitions", "Partitions with a known last replicated offset.", value=s.lro_cache_size)
        yield CounterMetricFamily("mirrorlag_lro_cache_evictions", "Last replicated offsets whose TTL expired without a newer value (kept as stale, never forgotten).", value=s.lro_evictions_total)

        rewinds = CounterMetricFamily("mirrorlag_lro_rewinds", "Times a partition's last replicated offset stepped back (MM2 resumed from an older commit and copies those records again).", labels=["source", "target"])
        for flow, count in sorted(s.rewinds_total.items()):
            rewinds.add_metric([flow.source, flow.target], count)
        yield rewinds
        heartbeat = GaugeMetricFamily("mirrorlag_flow_heartbeat_age_seconds", "Age of the newest MM2 heartbeat replicated to the target (absent while none was seen): a dead flow keeps growing, an idle healthy one stays near 1 s.", labels=["source", "target"])
        for flow, age in sorted(heartbeat_ages(s).items()):
            heartbeat.add_metric([flow.source, flow.target], age)
        yield heartbeat
        present = GaugeMetricFamily("mirrorlag_feed_topic_present", "1 when a feed's MM2 topic exists, 0 while the feed waits for it.", labels=["feed", "cluster", "topic"])
        bad = CounterMetricFamily("mirrorlag_feed_bad_records", "Records a feed could not decode (counted and skipped).", labels=["feed", "cluster"])
        for health in s.feeds:
            for topic in health.topics:
                present.add_metric([health.feed, health.cluster, topic], 0 if topic in health.missing else 1)
            bad.add_metric([health.feed, health.cluster], health.bad_records)
        yield present
        yield bad


class MetricsRenderer:
    """Owns the registry; `render()` is called once per poll, never per scrape."""

    def __init__(self) -> None:
        self.collector = SnapshotCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)

    def render(self, snapshot: Snapshot | None, stats: PollStats) -> bytes:
        self.collector.snapshot, self.collector.stats = snapshot, stats
        return generate_latest(self.registry)
