"""Reading what failover readiness needs from real brokers: committed group offsets (admin API,
as MM2's checkpoint task reads them) and MM2's checkpoint records with their own timestamps."""

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mirrorlag.formats import Checkpoint, encode_checkpoint
from mirrorlag.groups.checkpoints import CheckpointStore, Checkpointed
from mirrorlag.groups.group_offsets import list_groups, members, read_offsets
from mirrorlag.kafka.topic_reader import TopicReader


def test_committed_offsets_of_many_groups_with_few_requests_in_flight(clusters, topic_name):
    clusters.create_topic(topic_name, 3)
    clusters.produce(topic_name, {0: 5, 1: 5, 2: 5})
    groups = [f"{topic_name}-g{i}" for i in range(7)]
    for i, group in enumerate(groups):
        clusters.commit_group(group, {(topic_name, 0): i, (topic_name, 2): 5})
    admin = AdminClient({"bootstrap.servers": clusters.source})
    listed = list_groups(admin, timeout_s=10)
    assert set(groups) <= set(listed)
    read = read_offsets(admin, groups + [f"{topic_name}-never"], max_in_flight=2, timeout_s=20,
                        wanted=lambda topic: topic == topic_name)
    assert not read.unread and not read.failed
    for i, group in enumerate(groups):
        assert read.offsets[group] == {(topic_name, 0): i, (topic_name, 2): 5}
    assert read.offsets[f"{topic_name}-never"] == {}
    assert members(admin, groups[:2], timeout_s=10) == {groups[0]: 0, groups[1]: 0}


def test_a_read_that_runs_out_of_time_says_which_groups_it_did_not_reach():
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": 1000, "log_level": 0})  # nothing listens
    started = time.monotonic()
    read = read_offsets(admin, ["a", "b", "c"], max_in_flight=1, timeout_s=1.5)
    assert time.monotonic() - started < 4
    assert set(read.unread) | set(read.failed) == {"a", "b", "c"} and not read.offsets


def test_checkpoints_newest_per_key_with_their_own_timestamps(clusters, topic_name):
    topic = f"src.checkpoints.internal-{topic_name}"
    clusters.create_topic(topic, 1, which="target")
    producer = Producer({"bootstrap.servers": clusters.target, "batch.num.messages": 1, "linger.ms": 0})
    records = [
        (Checkpoint("g1", "src.orders", 0, 100, 90, ""), 1_000),
        (Checkpoint("g2", "src.orders", 0, 50, 41, ""), 2_000),
        (Checkpoint("g1", "src.orders", 0, 180, 171, ""), 3_000),  # newer: wins
    ]
    for checkpoint, ts in records:
        key, value = encode_checkpoint(checkpoint)
        producer.produce(topic, key=key, value=value, partition=0, timestamp=ts)
    producer.produce(topic, key=b"\x00\x01", value=b"junk", partition=0, timestamp=4_000)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": clusters.target, "group.id": "unused", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    reader = TopicReader("checkpoints", "dst", consumer, [topic], timeout_s=10, timed=True)
    store = CheckpointStore()
    try:
        reader.drain(store.apply)
    finally:
        reader.close()
    assert store.newest == {("g1", "src.orders", 0): Checkpointed(180, 171, 3_000),
                            ("g2", "src.orders", 0): Checkpointed(50, 41, 2_000)}
    assert store.bad_records == 1
