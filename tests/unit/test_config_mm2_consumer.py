"""MM2 keys read per flow as MirrorMakerConfig resolves them (issue 30, cases 3 and 8): the source
consumer's isolation.level, emit.offset-syncs.enabled, and the worker's offset flush interval."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mirrorlag.model import FlowId
from tests.unit.test_config import BASE, NEXT, THREE, assert_at, f0, load, load_error
AB, AC = FlowId("A", "B"), FlowId("A", "C")


def levels(tmp_path: Path, *texts: str) -> dict[FlowId, tuple[str, str]]:
    s = load(tmp_path, *texts)
    return {f.id: (f.isolation_level, f.consumer_isolation_level) for f in s.flows}


def test_default_is_javas_read_uncommitted(tmp_path: Path) -> None:
    flow = load(tmp_path, BASE).flow(AB)
    assert (flow.isolation_level, flow.consumer_isolation_level) == ("read_uncommitted", "read_uncommitted")
    assert flow.isolation_level_from == flow.consumer_isolation_level_from == ""


def test_source_cluster_consumer_key(tmp_path: Path) -> None:
    s = load(tmp_path, BASE + "A.consumer.isolation.level = read_committed\n")
    flow = s.flow(AB)
    assert (flow.isolation_level, flow.consumer_isolation_level) == ("read_committed", "read_committed")
    assert flow.isolation_level_from == f"A.consumer.isolation.level at {f0(tmp_path)}:{NEXT}"


@pytest.mark.parametrize(
    ("text", "ab", "ac"),
    [
        # A->B.consumer. reaches only that flow's consumer.
        ("A->B.consumer.isolation.level = read_committed\n", "read_committed", "read_uncommitted"),
        # sourceConsumerConfig lays source.consumer. (from A.consumer.) over consumer. (from A->B.consumer.).
        ("A.consumer.isolation.level = read_committed\nA->B.consumer.isolation.level = read_uncommitted\n",
         "read_committed", "read_committed"),
        # ...and A->B.source.consumer. overrides the cluster's source.consumer. for that flow.
        ("A.consumer.isolation.level = read_committed\nA->B.source.consumer.isolation.level = read_uncommitted\n",
         "read_uncommitted", "read_committed"),
        # Not the source consumer's: the target's consumer, the cluster itself, a top-level key.
        ("B.consumer.isolation.level = read_committed\nA.isolation.level = read_committed\n"
         "consumer.isolation.level = read_committed\nA->B.source.cluster.isolation.level = read_committed\n",
         "read_uncommitted", "read_uncommitted"),
        # A target's consumer. keys are its consumers' (target.consumer.), never the source's.
        ("C.consumer.isolation.level = read_committed\n", "read_uncommitted", "read_uncommitted"),
    ],
)
def test_layering_as_mirror_maker_config(tmp_path: Path, text: str, ab: str, ac: str) -> None:
    assert levels(tmp_path, THREE + text) == {AB: (ab, ab), AC: (ac, ac)}


def test_later_file_overrides(tmp_path: Path) -> None:
    got = levels(tmp_path, BASE + "A.consumer.isolation.level = read_committed\n",
                 "A.consumer.isolation.level = read_uncommitted\n")
    assert got == {AB: ("read_uncommitted", "read_uncommitted")}


def test_value_is_trimmed(tmp_path: Path) -> None:
    assert levels(tmp_path, BASE + "A.consumer.isolation.level =  read_committed  \n")[AB][0] == "read_committed"


@pytest.mark.parametrize("value", ["READ_COMMITTED", "serializable", ""])
def test_bad_consumer_level_is_one_line_at_its_place(tmp_path: Path, value: str) -> None:
    # ConsumerConfig's validator is case-sensitive: MM2 would not start with these.
    err = load_error(tmp_path, BASE + f"A.consumer.isolation.level = {value}\n")
    message = assert_at(err, f0(tmp_path), NEXT, "A.consumer.isolation.level")
    assert "read_uncommitted or read_committed" in message and "\n" not in message


def test_shadowed_bad_value_is_not_read(tmp_path: Path) -> None:
    # A->B.consumer. is never the consumer's while A.consumer. is set: MM2 never parses it.
    got = levels(tmp_path, BASE + "A.consumer.isolation.level = read_committed\n"
                 "A->B.consumer.isolation.level = nonsense\n")
    assert got == {AB: ("read_committed", "read_committed")}


def test_mirrorlag_override_wins_and_warns_where_it_differs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = THREE + "A->B.consumer.isolation.level = read_committed\nmirrorlag.leo.isolation.level = read_committed\n"
    with caplog.at_level(logging.WARNING, logger="mirrorlag.config.loader"):
        s = load(tmp_path, text)
    assert s.leo_isolation == "read_committed"
    assert {f.id: (f.isolation_level, f.consumer_isolation_level) for f in s.flows} == {
        AB: ("read_committed", "read_committed"), AC: ("read_committed", "read_uncommitted")}
    assert s.flow(AC).isolation_level_from.startswith("mirrorlag.leo.isolation.level at ")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "flow A->C" in warnings[0] and "RESET" in warnings[0], warnings


def test_blank_override_is_unset(tmp_path: Path) -> None:
    s = load(tmp_path, BASE + "A.consumer.isolation.level = read_committed\n", "mirrorlag.leo.isolation.level =\n")
    assert s.leo_isolation is None and s.flow(AB).isolation_level == "read_committed"


# --- emit.offset-syncs.enabled (MM2 >= 3.9) ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ab", "ac"),
    [
        ("", True, True),
        ("emit.offset-syncs.enabled = false\n", False, False),
        ("emit.offset-syncs.enabled = false\nA->C.emit.offset-syncs.enabled = TRUE \n", False, True),
        ("A->B.emit.offset-syncs.enabled = false\n", False, True),
        # Not a connector key under a cluster prefix.
        ("A.emit.offset-syncs.enabled = false\n", True, True),
    ],
)
def test_emit_offset_syncs_per_flow(tmp_path: Path, text: str, ab: bool, ac: bool) -> None:
    s = load(tmp_path, THREE + text)
    assert {f.id: f.emit_offset_syncs for f in s.flows} == {AB: ab, AC: ac}


def test_bad_emit_offset_syncs(tmp_path: Path) -> None:
    err = load_error(tmp_path, BASE + "A->B.emit.offset-syncs.enabled = no\n")
    assert "true or false" in assert_at(err, f0(tmp_path), NEXT, "A->B.emit.offset-syncs.enabled")


def test_emit_offset_syncs_key_is_no_flow(tmp_path: Path) -> None:
    assert [f.id for f in load(tmp_path, THREE + "A->B.emit.offset-syncs.enabled = true\n").flows] == [AB, AC]


# --- offset.flush.interval.ms: a worker key, per target (MirrorMakerConfig.workerConfig) --------


def test_flush_interval_per_target(tmp_path: Path) -> None:
    text = THREE + ("B.offset.flush.interval.ms = 5000\n"
                    "offset.flush.interval.ms = 1000\n"  # not a prefix workerConfig copies: ignored
                    "A->C.offset.flush.interval.ms = 1000\n"  # a connector key, not the worker's
                    "A.offset.flush.interval.ms = 2000\n")  # the source's worker is not this flow's
    s = load(tmp_path, text)
    assert {f.id: f.offset_flush_interval_s for f in s.flows} == {AB: 5.0, AC: 60.0}


def test_syncs_refused_by_mm2_is_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The real MM2 (3.9.2, 4.3.1) runs no MirrorSourceConnector for A->B when emit.offset-syncs
    is false while an offset-syncs.topic.* key reaches the flow (tests/apache/test_mm2_topologies.py):
    the sidecar says why that flow copies nothing."""
    text = THREE + ("offset-syncs.topic.replication.factor = 1\n"
                    "A->B.emit.offset-syncs.enabled = false\n"
                    "A->C.offset-syncs.topic.location = target\n")
    with caplog.at_level(logging.WARNING):
        load(tmp_path, text)
    refused = [r.getMessage() for r in caplog.records if "refuses" in r.getMessage()]
    assert len(refused) == 1 and "A->B" in refused[0] and "offset-syncs.topic.replication.factor" in refused[0], refused
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # per flow, for the flows with syncs: no clash
        load(tmp_path, THREE + "A->C.offset-syncs.topic.replication.factor = 1\nA->B.emit.offset-syncs.enabled = false\n")
    assert not [r for r in caplog.records if "refuses" in r.getMessage()]


@pytest.mark.parametrize("value", ["latest", "none", "by_duration:PT1H", "by_duration:P2DT0.5S", "by_duration:pt15m",
                                   "by_duration:PT0S", "by_duration:-PT-1H"])
def test_auto_offset_reset_as_the_java_consumer_accepts_it(tmp_path: Path, value: str) -> None:
    # by_duration: Kafka 4.0's consumers (KIP-1106); the ISO-8601 part as java.time.Duration parses it
    assert load(tmp_path, BASE + f"A.consumer.auto.offset.reset =  {value} \n").flow(AB).source_consumer_reset == value


@pytest.mark.parametrize("value", ["EARLIEST", "by_duration", "by_duration:", "by_duration:1h", "by_duration:PT",
                                   "by_duration:P1DT", "by_duration:-PT1S", "BY_DURATION:PT1H", "smallest"])
def test_bad_auto_offset_reset_is_one_line_at_its_place(tmp_path: Path, value: str) -> None:
    # AutoOffsetResetStrategy.fromString refuses these: MM2's source task would not start.
    err = load_error(tmp_path, BASE + f"A->B.consumer.auto.offset.reset = {value}\n")
    message = assert_at(err, f0(tmp_path), NEXT, "A->B.consumer.auto.offset.reset")
    assert "earliest, latest, none or by_duration:" in message and repr(value) in message and "\n" not in message
