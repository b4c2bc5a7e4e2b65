"""build_feeds' wiring: who writes a remote topic counts every enabled flow, with offset syncs or
without (the real MM2, tests/apache/test_mm2_topologies.py: A->C and B->C into one `orders`
under IdentityReplicationPolicy, B->C with emit.offset-syncs.enabled = false)."""

from __future__ import annotations

from pathlib import Path

from mirrorlag.feeds.external import build_feeds
from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
from mirrorlag.feeds.target_progress import TargetProgressFeed
from tests.unit.test_config import load

TWO_INTO_ONE = """\
clusters = A, B, C
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:1
C.bootstrap.servers = 127.0.0.1:1
A->C.enabled = true
B->C.enabled = true
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
B->C.emit.offset-syncs.enabled = false
"""


def test_a_flow_without_syncs_still_shares_the_remote_topic(tmp_path: Path) -> None:
    feeds = build_feeds(load(tmp_path, TWO_INTO_ONE))
    try:
        (syncs,) = [f for f in feeds if isinstance(f, OffsetSyncsFeed)]
        (progress,) = [f for f in feeds if isinstance(f, TargetProgressFeed)]
        assert [str(f.id) for f in syncs.flows_by_topic.values()] == ["A->C"]  # B->C's syncs are not read
        assert [str(f.id) for f in progress.flows] == ["A->C"]
        # ... yet B->C writes C's orders too: no target progress, no duplicate count for A->C there.
        assert progress.writers.of("orders").flows == ("A->C", "B->C")
        assert syncs.writers["C"].of("orders").shared
    finally:
        for feed in feeds:
            feed.close()


BOTH_WAYS = """\
clusters = P, Q
P.bootstrap.servers = 127.0.0.1:1
Q.bootstrap.servers = 127.0.0.1:1
P->Q.enabled = true
Q->P.enabled = true
P->Q.topics = orders
Q->P.topics = orders, payments
Q->P.offset-syncs.topic.location = target
"""


def test_flows_sharing_one_sync_topic_each_keep_their_own_syncs(tmp_path: Path) -> None:
    """P->Q (syncs on its source P) and Q->P (syncs on its target P) both write P's
    mm2-offset-syncs.Q.internal: a sync belongs to the one flow that copies its source topic;
    a topic both copy is no flow's evidence, and /status says why."""
    from mirrorlag.formats import OffsetSync, encode_offset_sync
    from mirrorlag.model import FlowId

    feeds = build_feeds(load(tmp_path, BOTH_WAYS))
    try:
        (syncs,) = [f for f in feeds if isinstance(f, OffsetSyncsFeed)]
        assert syncs.cluster_alias == "P"
        assert sorted(str(f.id) for _, f in syncs.all_flows()) == ["P->Q", "Q->P"]
        (progress,) = [f for f in feeds if isinstance(f, TargetProgressFeed) and f.cluster_alias == "P"]
        assert [str(f.id) for f in progress.flows] == ["Q->P"]
        for topic, upstream in (("payments", 7), ("orders", 9)):
            syncs._apply("mm2-offset-syncs.Q.internal", *encode_offset_sync(OffsetSync(topic, 0, upstream, upstream)))
        assert [(s.flow.id, s.topic) for s in syncs._topics.values()] == [(FlowId("Q", "P"), "payments")]
        (off,) = syncs.health().off
        assert (off.flows, off.topics) == (("P->Q", "Q->P"), ("orders",)) and "share" in off.reason
    finally:
        for feed in feeds:
            feed.close()
