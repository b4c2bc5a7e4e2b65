"""The exposition text, parsed back with prometheus_client's parser: values, absences, labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mirrorlag.exporters.prometheus import MetricsRenderer
from mirrorlag.model import FlowId, PartitionKey, PartitionRow, Snapshot, State
from mirrorlag.poller import PollStats

K0 = PartitionKey("A", "B", "orders", 0)
K1 = PartitionKey("A", "B", "orders", 1)
ODD = PartitionKey('we"ird\\', "B", "t", 2)


def row(key: PartitionKey, state: State, lag: int | None, **fields) -> PartitionRow:
    base = PartitionRow(key, state, 100, None if lag is None else 99 - lag, "offset-syncs", 2.0, lag,
                        lag, lag, lag, 0.0 if lag == 0 else 12.5)
    return base._replace(**fields)


def parse(body: bytes) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def labels(key: PartitionKey, **extra: str) -> tuple:
    base = {"source": key.source, "target": key.target, "topic": key.topic, "partition": str(key.partition)}
    return tuple(sorted({**base, **extra}.items()))


def stats() -> PollStats:
    return PollStats(polls_total=3, last_poll_at=1000.0, heartbeat_ms={FlowId("A", "B"): 998_500},
                     rewinds_total={FlowId("A", "B"): 2})


def test_values_and_unknown_is_absent_not_zero():
    snapshot = Snapshot(1000.0, (
        row(K0, State.LAGGING, 7, freshness_lag_s=3.5, retention_headroom_s=600.0, records_lost=0),
        row(K1, State.UNKNOWN, None, lro=None, lro_feed=None, lro_age_s=None, time_lag_s=None),
    ))
    samples = parse(MetricsRenderer().render(snapshot, stats()))
    assert samples[("mirrorlag_replication_record_lag", labels(K0))] == 7
    assert samples[("mirrorlag_replication_time_lag_seconds", labels(K0))] == 12.5
    assert samples[("mirrorlag_replication_freshness_lag_seconds", labels(K0))] == 3.5
    assert samples[("mirrorlag_retention_headroom_seconds", labels(K0))] == 600.0
    assert samples[("mirrorlag_last_replicated_offset", labels(K0, feed="offset-syncs"))] == 92
    assert ("mirrorlag_partition_records_lost", labels(K0)) not in samples  # only when > 0
    assert ("mirrorlag_replication_byte_lag_estimate_bytes", labels(K0)) not in samples  # unknown size
    assert ("mirrorlag_replication_record_lag", labels(K1)) not in samples
    assert samples[("mirrorlag_partition_state", labels(K1, state="UNKNOWN"))] == 1
    assert samples[("mirrorlag_flow_heartbeat_age_seconds", (("source", "A"), ("target", "B")))] == 1.5
    assert samples[("mirrorlag_lro_rewinds_total", (("source", "A"), ("target", "B")))] == 2


def test_gone_shows_once_then_its_label_sets_disappear():
    renderer = MetricsRenderer()
    first = parse(renderer.render(Snapshot(1.0, (row(K0, State.GONE, None),)), stats()))
    assert first[("mirrorlag_partition_state", labels(K0, state="GONE"))] == 1
    assert not [k for k in first if k[0] == "mirrorlag_replication_record_lag"]
    second = parse(renderer.render(Snapshot(2.0, ()), stats()))
    assert not [k for k in second if ("topic", "orders") in k[1]]


def test_label_values_are_escaped():
    samples = parse(MetricsRenderer().render(Snapshot(1.0, (row(ODD, State.IN_SYNC, 0),)), stats()))
    assert samples[("mirrorlag_replication_record_lag", labels(ODD))] == 0


def test_lag_detail_leaves_out_the_offsets_and_rates():
    snapshot = Snapshot(1.0, (row(K0, State.IN_SYNC, 0, append_rate=5.0),))
    full = parse(MetricsRenderer(detail=True).render(snapshot, stats()))
    lean = parse(MetricsRenderer(detail=False).render(snapshot, stats()))
    assert ("mirrorlag_source_append_records_per_second", labels(K0)) in full
    assert ("mirrorlag_source_append_records_per_second", labels(K0)) not in lean
    assert ("mirrorlag_source_log_end_offset", labels(K0)) not in lean
    assert ("mirrorlag_replication_record_lag", labels(K0)) in lean


def test_record_lag_distribution_per_flow_is_a_cumulative_gauge_histogram():
    rows = tuple(row(PartitionKey("A", "B", "t", p), State.IN_SYNC, lag) for p, lag in enumerate((0, 0, 5, 50, 5000)))
    samples = parse(MetricsRenderer().render(Snapshot(1.0, rows), stats()))
    flow = (("source", "A"), ("target", "B"))
    bucket = lambda le: samples[("mirrorlag_flow_record_lag_partitions_bucket", tuple(sorted(flow + (("le", le),))))]
    assert [bucket(le) for le in ("0.0", "1.0", "10.0", "100.0", "1000.0", "10000.0", "+Inf")] == [2, 2, 3, 4, 4, 5, 5]
    assert samples[("mirrorlag_flow_record_lag_partitions_gcount", flow)] == 5


def test_flow_figures_are_kept_apart_per_flow_and_state():
    ab, ac = ("A", "B"), ("A", "C")
    rows = (
        row(PartitionKey(*ab, "t", 0), State.IN_SYNC, 0),
        row(PartitionKey(*ab, "t", 1), State.STALLED, 700, time_lag_s=400.0),
        row(PartitionKey(*ab, "t", 2), State.GONE, 9, time_lag_s=None),  # no lag figure, still counted
        row(PartitionKey(*ac, "t", 0), State.UNKNOWN, None, time_lag_s=None),
        row(PartitionKey(*ac, "t", 1), State.IN_SYNC, 0),
    )
    samples = parse(MetricsRenderer().render(Snapshot(1.0, rows), stats()))
    by_state = {(dict(k[1])["target"], dict(k[1])["state"]): v for k, v in samples.items() if k[0] == "mirrorlag_flow_partitions"}
    assert by_state == {("B", "IN_SYNC"): 1, ("B", "STALLED"): 1, ("B", "GONE"): 1, ("C", "UNKNOWN"): 1, ("C", "IN_SYNC"): 1}
    flow = lambda target: (("source", "A"), ("target", target))
    assert samples[("mirrorlag_flow_record_lag_partitions_gcount", flow("B"))] == 2
    assert samples[("mirrorlag_flow_record_lag_partitions_gsum", flow("B"))] == 700
    assert samples[("mirrorlag_flow_record_lag_partitions_gcount", flow("C"))] == 1
    time_bucket = lambda target, le: samples[("mirrorlag_flow_time_lag_seconds_partitions_bucket", tuple(sorted(flow(target) + (("le", le),))))]
    assert [time_bucket("B", le) for le in ("0.0", "300.0", "900.0", "+Inf")] == [1, 1, 2, 2]
