"""States on the estates people run (issue 30), from the real CLI on real brokers: partitions that
never got a record (sparse keys, dead-letter and retry topics) are caught up, not UNKNOWN for ever,
so `check` exits 0 on a fully copied estate; and a partition with records that MM2 never copied is
behind by all of them once the evidence that would show a copy has been read, never UNKNOWN for
ever nor IN_SYNC."""

from __future__ import annotations

import json
import time

import pytest

from mirrorlag.formats import OffsetSync
from tests.conftest import write_properties
from tests.helpers import eventually, mirrored_topic, mirrorlag, produce_records, running_mirror

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source cluster: offset-syncs.topic.location=source


def _check(config, timeout: str = "3") -> tuple[int, dict[int, dict]]:
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", timeout)
    assert result.returncode in (0, 1, 2), result.stderr
    return result.returncode, {row["partition"]: row for row in json.loads(result.stdout)}


def test_empty_partitions_beside_the_mirror_are_in_sync_and_check_exits_0(tmp_path, own_clusters):
    """Six partitions, three of them never written, copied by `mirrorlag mirror` (which, like MM2,
    writes no sync and no Connect offset for a partition it never copied)."""
    config, topic = mirrored_topic(tmp_path, own_clusters, "sparse", partitions=6)
    own_clusters.produce(topic, {0: 3, 1: 2, 2: 1})
    with running_mirror(config, tmp_path / "mirror.log"):
        def all_copied() -> dict[int, dict]:
            code, rows = _check(config)
            assert code == 0, rows
            return rows
        rows = eventually(all_copied, timeout=60, interval=1.0)
    assert sorted(rows) == list(range(6)), rows
    for p in (0, 1, 2):
        assert (rows[p]["record_lag"], rows[p]["state"]) == (0, "IN_SYNC"), rows[p]
        assert rows[p]["lro"] == rows[p]["leo"] - 1, rows[p]
    for p in (3, 4, 5):  # nothing to copy: caught up, with no LRO to show
        assert (rows[p]["leo"], rows[p]["lro"], rows[p]["record_lag"], rows[p]["state"]) == (0, None, 0, "IN_SYNC")
        assert rows[p]["time_lag_s"] == 0.0, rows[p]


def test_a_partition_never_copied_is_behind_by_all_its_records(tmp_path, clusters, topic_name):
    """Partition 0 fully copied (its sync says so); partition 1 has five records an hour old and no
    sync at all: once the sync topic has been read through, MM2 owes it every record from the log
    start, and it has waited since the oldest of them was appended."""
    clusters.create_topic(topic_name, 2)
    hour_ago_ms = int(time.time() * 1000) - 3_600_000
    produce_records(clusters.source, topic_name, 0, [hour_ago_ms] * 3)
    produce_records(clusters.source, topic_name, 1, [hour_ago_ms + i for i in range(5)])
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared across tests; topics differ per test
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(topic_name, 0, 2, 2)], timestamp_ms=hour_ago_ms)
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}\n")
    code, rows = _check(config)
    assert (rows[0]["record_lag"], rows[0]["state"]) == (0, "IN_SYNC"), rows[0]
    owed = rows[1]
    assert (owed["leo"], owed["lro"], owed["lro_feed"], owed["record_lag"]) == (5, -1, "log-start", 5), owed
    assert 3_590 <= owed["time_lag_s"] <= 3_700, owed  # since record 0 was appended
    assert owed["lro_age_s"] >= 3_590, owed  # the mirror has not moved since either
    assert (owed["state"], code) == ("STALLED", 2), owed


@pytest.mark.parametrize("reset", ["latest", "by_duration:PT1H"])
def test_a_partition_never_copied_stays_unknown_while_mm2_starts_at_latest(tmp_path, clusters, topic_name, reset):
    """`auto.offset.reset = latest` on MM2's source consumer (or Kafka 4.0's `by_duration:`): the
    records before its first copy are not owed, and nothing says where it began: UNKNOWN, with the
    reason in /status."""
    clusters.create_topic(topic_name, 1)
    produce_records(clusters.source, topic_name, 0, [int(time.time() * 1000)] * 3)
    config = write_properties(tmp_path / "mm2.properties", clusters,
                              f"src->dst.topics = {topic_name}\nsrc.consumer.auto.offset.reset = {reset}\n")
    code, rows = _check(config)
    assert (rows[0]["lro"], rows[0]["record_lag"], rows[0]["state"], code) == (None, None, "UNKNOWN", 1), rows[0]
