"""`mirrorlag mirror` (the fast tier's stand-in for MM2) on Apache Kafka's own brokers, for what
tansu cannot show: tansu keeps no consumer group's commit metadata, so there the mirror's copy of
it into checkpoints and synced offsets is never seen. The real MM2 is held to the same in
tests/apache/test_mm2_groups.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions

from mirrorlag.formats import decode_checkpoint
from tests.apache.truth import NumberedProducer
from tests.helpers import eventually
from tests.integration.test_mirror import Reader, Setup

pytestmark = pytest.mark.integration


def test_checkpoints_and_synced_offsets_carry_the_groups_commit_metadata(apache_pair, tmp_path: Path):
    setup = Setup(tmp_path, apache_pair.clusters, extra="emit.checkpoints.interval.seconds = 1\n"
                                                        "refresh.groups.interval.seconds = 1\n"
                                                        "sync.group.offsets.enabled = true\n"
                                                        "sync.group.offsets.interval.seconds = 1\n")
    setup.clusters.create_topic(setup.topic, 1)
    NumberedProducer(apache_pair.source.bootstrap_servers, setup.topic).produce({0: 12})  # Setup.fill's are
    # dated 2023: the pair's brokers check retention often, and would delete them at once
    proc = setup.start(flush_ms=1000)
    checkpoints = Reader(apache_pair.target.bootstrap_servers, f"{setup.src}.checkpoints.internal")
    try:
        group = f"app-{setup.src}"
        setup.clusters.commit_group(group, {(setup.topic, 0): 12}, metadata="app-v7")
        read = checkpoints.until(lambda r: any(decode_checkpoint(m.key(), m.value()).group == group for m in r),
                                 timeout=60, what="the group's checkpoint")
        checkpoint = [c for m in read for c in [decode_checkpoint(m.key(), m.value())] if c.group == group][-1]
        assert (checkpoint.upstream_offset, checkpoint.metadata) == (12, "app-v7"), checkpoint
        target = setup.clusters.admin("target")

        def synced() -> tuple[int, str]:
            answer = target.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
            [tp] = [tp for tp in answer.topic_partitions or () if tp.topic == setup.remote] or [None]
            assert tp is not None, answer
            return tp.offset, tp.metadata
        assert eventually(synced, timeout=30, interval=0.5) == (checkpoint.downstream_offset, "app-v7")
    finally:
        checkpoints.close()
        setup.stop(proc)
