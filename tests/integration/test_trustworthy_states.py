"""States an SRE can act on (issue 23), from the real CLI on real brokers: a fully copied
transactional topic (its last offset a commit marker MM2 never copies) reads IN_SYNC with record
lag 0, and a mirror that stalled long before the sidecar started is not IN_SYNC at its first look
(time lag from the oldest uncopied record's own timestamp, read from the source). Offset syncs
are written by hand, the bytes MM2 writes."""

from __future__ import annotations

import json
import time

import pytest

from mirrorlag.formats import OffsetSync
from tests.conftest import write_properties
from tests.helpers import mirrorlag, produce_records

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source cluster: offset-syncs.topic.location=source


def _setup(tmp_path, clusters, topic: str, syncs: list[OffsetSync]):
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared across tests; topics differ per test
    clusters.write_offset_syncs(SYNC_TOPIC, syncs)
    return write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic}\n")


def _check(config) -> tuple[int, dict]:
    result = mirrorlag("check", "--config", str(config), "--json", "--timeout", "3")
    (row,) = json.loads(result.stdout)
    return result.returncode, row


def test_a_fully_copied_transactional_topic_is_in_sync_with_no_lag(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 1)
    now_ms = int(time.time() * 1000)
    produce_records(clusters.source, topic_name, 0, [now_ms] * 3, transactional=True)
    leo = clusters.end_offset(topic_name)
    assert leo == 4  # records 0..2, the commit marker at 3
    config = _setup(tmp_path, clusters, topic_name, [OffsetSync(topic_name, 0, 2, 2)])  # every record copied
    status, row = _check(config)
    assert (row["leo"], row["lro"], row["record_lag"], row["state"]) == (4, 2, 0, "IN_SYNC"), row
    assert status == 0


def test_a_partition_with_a_record_left_after_a_transaction_is_not_caught_up(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 1)
    now_ms = int(time.time() * 1000)
    produce_records(clusters.source, topic_name, 0, [now_ms] * 3, transactional=True)
    config = _setup(tmp_path, clusters, topic_name, [OffsetSync(topic_name, 0, 1, 1)])  # record 2 not copied
    _, row = _check(config)
    assert (row["lro"], row["record_lag"]) == (1, 2), row


def test_a_mirror_stalled_an_hour_before_start_is_not_in_sync_at_first_look(tmp_path, clusters, topic_name):
    clusters.create_topic(topic_name, 1)
    hour_ago_ms = int(time.time() * 1000) - 3_600_000
    produce_records(clusters.source, topic_name, 0, [hour_ago_ms + i for i in range(10)])
    config = _setup(tmp_path, clusters, topic_name, [OffsetSync(topic_name, 0, 4, 4)])  # 5..9 never copied
    status, row = _check(config)
    assert (row["lro"], row["record_lag"]) == (4, 5), row
    assert row["state"] != "IN_SYNC" and status == 1, row
    # Record 5 has waited since it was appended, an hour ago: so has the mirror.
    assert 3_590 <= row["time_lag_s"] <= 3_700, row
    assert 3_590 <= row["freshness_lag_s"] <= 3_700 and not row["freshness_lower_bound"], row
