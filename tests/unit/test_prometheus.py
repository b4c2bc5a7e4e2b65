"""The exposition text, parsed back with prometheus_client's parser: values, absences, labels."""

from __future__ import annotations

import math

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.exporters.prometheus import FAMILIES, MetricsRenderer, PartitionBlock, _joined, _number
from mirrorlag.interfaces import DuplicateCount, FeedHealth, PollStats
from mirrorlag.model import FlowId, PartitionKey, PartitionRow, RowColumns, Snapshot, State
from tests.exposition import block_pieces, metrics_text

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
    samples = parse(metrics_text(MetricsRenderer(), snapshot, stats()))
    assert samples[("mirrorlag_replication_record_lag", labels(K0))] == 7
    assert samples[("mirrorlag_replication_time_lag_seconds", labels(K0))] == 12.5
    assert samples[("mirrorlag_replication_freshness_lag_seconds", labels(K0))] == 3.5
    assert samples[("mirrorlag_retention_headroom_seconds", labels(K0))] == 600.0
    assert samples[("mirrorlag_last_replicated_offset", labels(K0))] == 92  # no feed label: it would flip
    assert ("mirrorlag_partition_records_lost", labels(K0)) not in samples  # only when > 0
    assert ("mirrorlag_replication_byte_lag_estimate_bytes", labels(K0)) not in samples  # unknown size
    assert ("mirrorlag_replication_record_lag", labels(K1)) not in samples
    assert samples[("mirrorlag_partition_state", labels(K1, state="UNKNOWN"))] == 1
    assert samples[("mirrorlag_flow_heartbeat_age_seconds", (("source", "A"), ("target", "B")))] == 1.5
    assert samples[("mirrorlag_lro_rewinds_total", (("source", "A"), ("target", "B")))] == 2


def test_gone_shows_once_then_its_label_sets_disappear():
    renderer = MetricsRenderer()
    first = parse(metrics_text(renderer, Snapshot(1.0, (row(K0, State.GONE, None),)), stats()))
    assert first[("mirrorlag_partition_state", labels(K0, state="GONE"))] == 1
    assert not [k for k in first if k[0] == "mirrorlag_replication_record_lag"]
    second = parse(metrics_text(renderer, Snapshot(2.0, ()), stats()))
    assert not [k for k in second if ("topic", "orders") in k[1]]


def test_label_values_are_escaped():
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, (row(ODD, State.IN_SYNC, 0),)), stats()))
    assert samples[("mirrorlag_replication_record_lag", labels(ODD))] == 0


def test_lag_detail_leaves_out_the_offsets_and_rates():
    snapshot = Snapshot(1.0, (row(K0, State.IN_SYNC, 0, append_rate=5.0),))
    full = parse(metrics_text(MetricsRenderer(detail=True), snapshot, stats()))
    lean = parse(metrics_text(MetricsRenderer(detail=False), snapshot, stats()))
    assert ("mirrorlag_source_append_records_per_second", labels(K0)) in full
    assert ("mirrorlag_source_append_records_per_second", labels(K0)) not in lean
    assert ("mirrorlag_source_log_end_offset", labels(K0)) not in lean
    assert ("mirrorlag_replication_record_lag", labels(K0)) in lean


def test_record_lag_distribution_per_flow_is_a_cumulative_gauge_histogram():
    rows = tuple(row(PartitionKey("A", "B", "t", p), State.IN_SYNC, lag) for p, lag in enumerate((0, 0, 5, 50, 5000)))
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, rows), stats()))
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
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, rows), stats()))
    by_state = {(dict(k[1])["target"], dict(k[1])["state"]): v for k, v in samples.items() if k[0] == "mirrorlag_flow_partitions"}
    assert by_state == {("B", "IN_SYNC"): 1, ("B", "STALLED"): 1, ("B", "GONE"): 1, ("C", "UNKNOWN"): 1, ("C", "IN_SYNC"): 1}
    flow = lambda target: (("source", "A"), ("target", target))
    assert samples[("mirrorlag_flow_record_lag_partitions_gcount", flow("B"))] == 2
    assert samples[("mirrorlag_flow_record_lag_partitions_gsum", flow("B"))] == 700
    assert samples[("mirrorlag_flow_record_lag_partitions_gcount", flow("C"))] == 1
    time_bucket = lambda target, le: samples[("mirrorlag_flow_time_lag_seconds_partitions_bucket", tuple(sorted(flow(target) + (("le", le),))))]
    assert [time_bucket("B", le) for le in ("0.0", "300.0", "900.0", "+Inf")] == [1, 1, 2, 2]


def series_values(block: PartitionBlock, rows: tuple[PartitionRow, ...]) -> dict[tuple[str, int], str]:
    """(family, partition) -> the value exactly as written, from the rendered block."""
    text = b"".join(block_pieces(block, RowColumns.from_rows(rows))).decode()
    return {(line.split("{")[0], int(line.split('partition="')[1].split('"')[0])): line.rsplit(" ", 1)[1]
            for line in text.splitlines() if not line.startswith("#")}


def column(field: str, values: list) -> tuple[PartitionRow, ...]:
    return tuple(row(PartitionKey("A", "B", "t", p), State.IN_SYNC, 0)._replace(**{field: v})
                 for p, v in enumerate(values))


FLOATS = [0.0, -0.0, 1.0, -1.5, 0.1, 1 / 3, 1e-7, 3e-5, 5e-324, 2.2250738585072014e-308, 123456789012.0,
          1e15, 1e16, 2.0 ** 53 + 2, 1.2345678901234567e19, 1e21, -1e300, 1.7976931348623157e308]
INTS = [0, 1, -5, 2 ** 31, 123456789012, 10 ** 15]


def test_float_values_parse_back_to_the_same_float():
    written = series_values(PartitionBlock(), column("record_lag_avg", FLOATS))
    for p, value in enumerate(FLOATS):
        text = written[("mirrorlag_replication_record_lag_avg", p)]
        assert float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value), (value, text)


def test_int_values_are_written_as_exact_integers():
    # Int columns are int64: exact across the whole range, beyond 2**53 where no double holds them.
    for values in (INTS, [2 ** 53 + 1, 2 ** 63 - 1, -(2 ** 63)]):
        written = series_values(PartitionBlock(), column("record_lag", values))
        for p, value in enumerate(values):
            assert int(written[("mirrorlag_replication_record_lag", p)]) == value, value


def test_unknown_floats_have_no_series_and_infinities_keep_prometheus_spelling():
    # NaN is how a float column says unknown: no series, like None.
    written = series_values(PartitionBlock(), column("time_lag_s", [math.nan, math.inf, -math.inf, 2.5, None]))
    name = "mirrorlag_replication_time_lag_seconds"
    assert [written.get((name, p)) for p in range(5)] == [None, "+Inf", "-Inf", "2.5", None]


def reference(rows: tuple[PartitionRow, ...]) -> str:
    """The per-partition block written line by line, as the exposition format defines it."""
    def escape(value: str) -> str:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')

    def label_text(key: PartitionKey) -> str:
        return (f'source="{escape(key.source)}",target="{escape(key.target)}",'
                f'topic="{escape(key.topic)}",partition="{key.partition}"')
    out = []
    for family in FAMILIES:
        out.append(f"# HELP {family.name} {family.help}\n# TYPE {family.name} gauge\n")
        for r in rows:
            value = getattr(r, family.field)
            if family.field in ("freshness_lower_bound", "time_lag_lower_bound"):
                value = 1 if value else None
            elif value is not None and (value != value or (family.positive_only and value <= 0)):
                value = None
            if r.state is not State.GONE and value is not None:
                out.append(f"{family.name}{{{label_text(r.key)}}} {_number(value)}\n")
    out.append("# HELP mirrorlag_partition_state 1 for the partition's current state "
               "(UNKNOWN, IN_SYNC, LAGGING, STALLED, REWIND, AT_RISK, RESET, GONE).\n"
               "# TYPE mirrorlag_partition_state gauge\n")
    out.extend(f'mirrorlag_partition_state{{{label_text(r.key)},state="{r.state.value}"}} 1\n' for r in rows)
    return "".join(out)


def samples_in_order(text: str) -> list[tuple]:
    return [(s.name, s.labels, "NaN" if math.isnan(s.value) else s.value)
            for family in text_string_to_metric_families(text) for s in family.samples]


def test_block_means_what_a_line_by_line_writer_means_across_topology_changes():
    odd = PartitionKey('s"\\\n', "B", 'to"pic\\n', 3)
    first = (
        row(K1, State.LAGGING, 7, freshness_lower_bound=True, time_lag_lower_bound=True, records_lost=4,
            retention_headroom_s=60.0),
        row(odd, State.IN_SYNC, 0, lro_feed='fe"ed\\\n'),
        row(K0, State.UNKNOWN, None, lro=None, lro_feed=None, lro_age_s=None, time_lag_s=None),
    )
    gone = (row(K0, State.IN_SYNC, 0, lro_feed=None), row(odd, State.GONE, None, lro_feed=None), first[0])
    block = PartitionBlock()
    for rows in (first, first, gone, first[:1], ()):  # keys kept, reordered, a GONE row, fewer, none
        chunks = list(block_pieces(block, RowColumns.from_rows(rows)))
        # A family at a time, each as at most two bytes-like pieces (its head, its lines as
        # Arrow's buffer).
        assert len(FAMILIES) + 1 <= len(chunks) <= 2 * (len(FAMILIES) + 1)
        assert all(isinstance(c, (bytes, pa.Buffer)) for c in chunks)
        text, expected = b"".join(chunks).decode(), reference(rows)
        assert [line for line in text.splitlines() if line.startswith("#")] == \
               [line for line in expected.splitlines() if line.startswith("#")]
        assert samples_in_order(text) == samples_in_order(expected)


def test_lines_joined_from_the_buffer_skip_null_rows_even_where_they_hold_characters():
    made = pa.compute.binary_join_element_wise("m{", pa.array(["a", None, "b"]), "} ", pa.array(["1", "2", None]), "\n", "")
    assert made.null_count == 2 and _joined(made).to_pybytes() == b"m{a} 1\n"
    assert _joined(made.slice(1)).to_pybytes() == b""
    # The format lets a null row hold characters; Arrow's kernels write none, but a joined text
    # must never show them.
    offsets = pa.py_buffer(pa.array([0, 2, 4, 6], pa.int32()).buffers()[1])
    validity = pa.array([True, False, True]).buffers()[1]
    holed = pa.StringArray.from_buffers(3, offsets, pa.py_buffer(b"a\nzzb\n"), validity, 1)
    assert holed.to_pylist() == ["a\n", None, "b\n"]
    assert _joined(holed).to_pybytes() == b"a\nb\n"
    assert _joined(holed.slice(1)).to_pybytes() == b"b\n"


def test_no_partition_series_carries_a_feed_label():
    # Which feed won flips between polls; a label naming it would change the series' identity.
    rows = (row(K0, State.IN_SYNC, 0, lro_feed="offset-syncs"), row(K1, State.LAGGING, 3, lro_feed="connect-offsets"))
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, rows), stats()))
    flipped = parse(metrics_text(MetricsRenderer(), Snapshot(2.0, tuple(r._replace(lro_feed="connect-offsets") for r in rows)), stats()))
    partition_series = lambda s: {k for k in s if ("partition", "0") in k[1] or ("partition", "1") in k[1]}
    assert partition_series(samples) == partition_series(flipped)
    assert not [k for k in samples if ("partition", "0") in k[1] and "feed" in dict(k[1])]


def test_partitions_by_lro_feed_are_counted_per_flow():
    rows = (
        row(PartitionKey("A", "B", "t", 0), State.IN_SYNC, 0, lro_feed="offset-syncs"),
        row(PartitionKey("A", "B", "t", 1), State.IN_SYNC, 0, lro_feed="offset-syncs"),
        row(PartitionKey("A", "B", "t", 2), State.LAGGING, 5, lro_feed="connect-offsets"),
        row(PartitionKey("A", "B", "t", 3), State.UNKNOWN, None, lro=None, lro_feed=None, lro_age_s=None, time_lag_s=None),
        row(PartitionKey("A", "B", "t", 4), State.GONE, None, lro_feed="offset-syncs"),
        row(PartitionKey("A", "C", "t", 0), State.IN_SYNC, 0, lro_feed="connect-offsets"),
    )
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, rows), stats()))
    counts = {(dict(k[1])["target"], dict(k[1])["feed"]): v for k, v in samples.items()
              if k[0] == "mirrorlag_flow_partitions_by_lro_feed"}
    assert counts == {("B", "offset-syncs"): 2, ("B", "connect-offsets"): 1,
                      ("C", "offset-syncs"): 0, ("C", "connect-offsets"): 1}


def test_topic_info_names_the_remote_topic_once_per_topic():
    odd = PartitionKey("A", "B", 'to"p\\ic', 0)
    rows = (row(K0, State.IN_SYNC, 0), row(K1, State.IN_SYNC, 0), row(odd, State.IN_SYNC, 0),
            row(PartitionKey("B", "A", "orders", 0), State.IN_SYNC, 0),
            row(PartitionKey("A", "C", "orders", 0), State.IN_SYNC, 0))
    renderer = MetricsRenderer(policies={("A", "B"): ReplicationPolicy(), ("B", "A"): ReplicationPolicy(separator="_"),
                                         ("A", "C"): ReplicationPolicy(identity=True)})
    text = metrics_text(renderer, Snapshot(1.0, rows), stats())
    info = {tuple(sorted(k[1])): v for k, v in parse(text).items() if k[0] == "mirrorlag_topic_info"}
    topic = lambda s, t, name, remote: (("remote_topic", remote), ("source", s), ("target", t), ("topic", name))
    assert info == {topic("A", "B", "orders", "A.orders"): 1, topic("A", "B", 'to"p\\ic', 'A.to"p\\ic'): 1,
                    topic("B", "A", "orders", "B_orders"): 1, topic("A", "C", "orders", "orders"): 1}
    assert text.count(b"mirrorlag_topic_info{") == 4  # one per flow and topic, not per partition
    again = metrics_text(renderer, Snapshot(2.0, rows[:1]), stats())  # the topic set changed
    assert again.count(b"mirrorlag_topic_info{") == 1
    # A flow whose policy is not known gets no info series (never a guessed remote name).
    assert b"mirrorlag_topic_info{" not in metrics_text(MetricsRenderer(), Snapshot(1.0, rows), stats())


def test_metadata_errors_are_counted_per_source_cluster():
    polled = PollStats(polls_total=2, metadata_errors_total={"A": 3, "C": 1})
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, ()), polled))
    assert samples[("mirrorlag_metadata_errors_total", (("cluster", "A"),))] == 3
    assert samples[("mirrorlag_metadata_errors_total", (("cluster", "C"),))] == 1


def test_duplicate_records_are_counted_per_flow_and_topic_with_the_topic_families_labels():
    duplicates = (DuplicateCount("A", "B", "orders", 7), DuplicateCount("A", "B", "clicks", 0))
    polled = PollStats(polls_total=2, feeds=[FeedHealth("offset-syncs", "A", ("mm2-offset-syncs.B.internal",), (), 0,
                                                        duplicates=duplicates)])
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, ()), polled))
    got = {labels: v for (name, labels), v in samples.items() if name == "mirrorlag_mirror_duplicate_records_total"}
    assert got == {(("source", "A"), ("target", "B"), ("topic", "orders")): 7,
                   (("source", "A"), ("target", "B"), ("topic", "clicks")): 0}


def test_freshness_help_names_the_oldest_uncopied_record():
    help_text = {f.name: f.help for f in FAMILIES}["mirrorlag_replication_freshness_lag_seconds"]
    assert "oldest" in help_text and "newest" not in help_text and "last replicated + 1" in help_text


# --- the per-partition series cap (mirrorlag.metrics.partition.series.max) -------------------

def partition_series(samples: dict) -> dict[tuple, set[str]]:
    """Per partition (its labels without state), the names of its series."""
    out: dict[tuple, set[str]] = {}
    for (name, label_items), _ in samples.items():
        items = dict(label_items)
        if "partition" in items:
            items.pop("state", None)
            out.setdefault(tuple(sorted(items.items())), set()).add(name)
    return out


KIP971 = {"mirrorlag_replication_record_lag", "mirrorlag_replication_record_lag_min",
          "mirrorlag_replication_record_lag_max", "mirrorlag_replication_record_lag_avg", "mirrorlag_partition_state"}


def test_under_the_cap_every_partition_has_kip971_series_and_only_the_unhealthy_the_rest():
    healthy = [row(PartitionKey("A", "B", "orders", p), State.IN_SYNC, 0, time_lag_s=0.0) for p in range(3)]
    lagging = row(PartitionKey("A", "B", "orders", 3), State.LAGGING, 7, freshness_lag_s=3.5)
    renderer = MetricsRenderer(series_max=1000)
    samples = parse(metrics_text(renderer, Snapshot(1.0, (*healthy, lagging)), stats()))
    series = partition_series(samples)
    for r in healthy:
        assert series[labels(r.key)] == KIP971, r.key
    assert KIP971 < series[labels(lagging.key)]
    assert {"mirrorlag_replication_time_lag_seconds", "mirrorlag_replication_freshness_lag_seconds",
            "mirrorlag_last_replicated_offset"} <= series[labels(lagging.key)]
    assert samples[("mirrorlag_metrics_partitions_withheld", ())] == 0


def test_past_the_cap_the_worst_come_first_and_the_rest_are_counted():
    # 40 IN_SYNC partitions (5 series each) and 3 out of sync (KIP-971's 5 + up to 14 more, as
    # many as they have values for): a cap of what the 3 unhealthy ones have + 2 * 5 series shows
    # them and the 2 IN_SYNC ones of the largest time lag; a GONE partition shows once in the
    # state family whatever the cap.
    keys = [PartitionKey("A", "B", "t", p) for p in range(45)]
    rows = [row(k, State.IN_SYNC, 0, time_lag_s=float(p % 20)) for p, k in enumerate(keys[:40])]
    rows += [row(keys[40], State.STALLED, 9, time_lag_s=100.0), row(keys[41], State.LAGGING, 5, time_lag_s=40.0),
             row(keys[42], State.UNKNOWN, None, lro=None, lro_feed=None, lro_age_s=None, time_lag_s=None),
             row(keys[43], State.GONE, None, lro=None, lro_feed=None, time_lag_s=None)]
    every = partition_series(parse(metrics_text(MetricsRenderer(series_max=10**6), Snapshot(1.0, tuple(rows)), stats())))
    unhealthy = sum(len(every[labels(keys[p])]) for p in (40, 41, 42))
    assert unhealthy < 3 * 19  # a row costs the series it has, not every family's
    cap = unhealthy + 2 * 5
    renderer = MetricsRenderer(series_max=cap)
    samples = parse(metrics_text(renderer, Snapshot(1.0, tuple(rows)), stats()))
    shown = partition_series(samples)
    assert {labels(keys[p]) for p in (40, 41, 42, 19, 39, 43)} == set(shown)  # time lag 19 twice: p 19 and 39
    assert shown[labels(keys[43])] == {"mirrorlag_partition_state"}
    assert samples[("mirrorlag_metrics_partitions_withheld", ())] == 43 - 5  # 43 live partitions, 5 shown
    per_partition = sum(1 for (_, items) in samples if "partition" in dict(items))
    assert per_partition == cap + 1  # the cap filled exactly, + the GONE row's one state line
    # The aggregates still count every partition.
    topic = (("source", "A"), ("target", "B"), ("topic", "t"))
    assert samples[("mirrorlag_topic_partitions", tuple(sorted((*topic, ("state", "IN_SYNC")))))] == 40
    assert samples[("mirrorlag_topic_record_lag_sum", topic)] == 14
    assert samples[("mirrorlag_topic_time_lag_max_seconds", topic)] == 100.0


def test_topic_aggregates_have_no_series_for_what_no_partition_knows():
    rows = (row(K0, State.UNKNOWN, None, lro=None, lro_feed=None, lro_age_s=None, time_lag_s=None),
            row(PartitionKey("A", "B", "other", 0), State.IN_SYNC, 0, time_lag_s=0.0, freshness_lag_s=0.0))
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, rows), stats()))
    orders = (("source", "A"), ("target", "B"), ("topic", "orders"))
    other = (("source", "A"), ("target", "B"), ("topic", "other"))
    assert ("mirrorlag_topic_record_lag_max", orders) not in samples  # unknown is never 0
    assert samples[("mirrorlag_topic_partitions", tuple(sorted((*orders, ("state", "UNKNOWN")))))] == 1
    assert samples[("mirrorlag_topic_record_lag_max", other)] == 0
    assert samples[("mirrorlag_topic_freshness_lag_max_seconds", other)] == 0.0
    assert ("mirrorlag_metrics_partitions_withheld", ()) not in samples  # no cap: no such series


def test_the_openmetrics_exposition_parses_with_its_types():
    """Accept: application/openmetrics-text gets the same series in OpenMetrics: the per-flow
    distributions typed gaugehistogram, the topic info an info metric, counters with _total, and
    `# EOF` last (prometheus_client's strict OpenMetrics parser reads it back)."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

    from tests.exposition import _as_is

    rows = (row(K0, State.LAGGING, 7, freshness_lag_s=3.5), row(K1, State.IN_SYNC, 0, time_lag_s=0.0))
    renderer = MetricsRenderer(policies={("A", "B"): ReplicationPolicy()}, series_max=1000)
    text = b"".join(piece for pieces in renderer.render_encoded(Snapshot(1.0, rows), stats(), None, _as_is, openmetrics=True)
                    for piece in pieces).decode()
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    families = {f.name: f for f in openmetrics_families(text)}
    assert families["mirrorlag_flow_record_lag_partitions"].type == "gaugehistogram"
    assert families["mirrorlag_topic"].type == "info"
    assert families["mirrorlag_lro_rewinds"].type == "counter"
    classic = parse(metrics_text(MetricsRenderer(policies={("A", "B"): ReplicationPolicy()}, series_max=1000),
                                 Snapshot(1.0, rows), stats()))
    lag = [s for s in families["mirrorlag_replication_record_lag"].samples]
    assert {(tuple(sorted(s.labels.items())), s.value) for s in lag} == {
        (labels(K0), 7.0), (labels(K1), 0.0)} == {(k[1], v) for k, v in classic.items() if k[0] == "mirrorlag_replication_record_lag"}


def test_probe_outcomes_and_unverified_losses_are_counters_of_their_own():
    polled = PollStats(polls_total=2, records_lost_total={FlowId("A", "B"): 3},
                       records_lost_unverified_total={FlowId("A", "B"): 1},
                       probe_outcomes_total={"A": {"answered": 5, "not_authorized": 2}})
    samples = parse(metrics_text(MetricsRenderer(), Snapshot(1.0, (row(K0, State.LAGGING, 7),)), polled))
    flow = (("source", "A"), ("target", "B"))
    assert samples[("mirrorlag_records_lost_total", flow)] == 3  # proved data: the alert's
    assert samples[("mirrorlag_records_lost_unverified_total", flow)] == 1
    assert samples[("mirrorlag_probe_outcomes_total", (("cluster", "A"), ("reason", "answered")))] == 5
    assert samples[("mirrorlag_probe_outcomes_total", (("cluster", "A"), ("reason", "not_authorized")))] == 2
