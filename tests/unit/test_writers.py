"""Which remote topics more than one writer can feed, from the configuration (config/writers.py)."""

from __future__ import annotations

import re

from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.config.settings import DEFAULT_TOPICS_EXCLUDE, FlowSettings
from mirrorlag.config.writers import RemoteWriters, Writers, mm2_topics_on

IDENTITY = ReplicationPolicy(identity=True)


def flow(source: str, target: str = "B", include: str = ".*", policy: ReplicationPolicy = IDENTITY,
         exclude: str = DEFAULT_TOPICS_EXCLUDE, **kwargs) -> FlowSettings:
    joined = "|".join(f"(?:{p.strip()})" for p in exclude.split(","))
    return FlowSettings(source, target, re.compile(include), re.compile(joined), policy, **kwargs)


def test_two_identity_flows_into_one_target_share_the_topics_both_filters_accept():
    writers = RemoteWriters("B", [flow("A", include="orders|payments"), flow("C", include="orders|clicks"),
                                  flow("D", target="E", include=".*")])  # into another target: no writer of B's
    assert writers.of("orders") == Writers(("A->B", "C->B"), None) and writers.of("orders").shared
    assert writers.of("payments") == Writers(("A->B",), None) and not writers.of("payments").shared
    assert writers.of("clicks") == Writers(("C->B",), None)


def test_a_filter_that_excludes_the_topic_is_no_writer():
    writers = RemoteWriters("B", [flow("A"), flow("C", include="ord.*", exclude="orders")])
    assert writers.of("orders").flows == ("A->B",)
    assert writers.of("ordinals").flows == ("A->B", "C->B")


def test_the_default_policy_keeps_each_source_apart():
    default = ReplicationPolicy()
    writers = RemoteWriters("B", [flow("A", policy=default), flow("C", policy=default)])
    assert writers.of("A.orders").flows == ("A->B",) and writers.of("C.orders").flows == ("C->B",)
    assert writers.of("orders").flows == ()


def test_policies_that_differ_per_flow_can_name_one_remote_topic():
    # C mirrors with the identity policy the `A.orders` it got from A: B's `A.orders`, which
    # A->B's default policy writes too.
    writers = RemoteWriters("B", [flow("A", policy=ReplicationPolicy()), flow("C")])
    assert writers.of("A.orders") == Writers(("A->B", "C->B"), None)


def test_mm2s_own_topics_on_the_target_are_a_writer():
    # The identity policy names A's `heartbeats` `A.heartbeats` on B (as the default policy does),
    # never the `heartbeats` MM2's heartbeat connector writes on B.
    writers = RemoteWriters("B", [flow("A")])
    assert writers.of("heartbeats") == Writers((), "MM2's heartbeat connector")
    assert writers.of("A.heartbeats") == Writers(("A->B",), None)
    # A Connect offsets topic renamed out of the internal pattern is mirrored by an identity flow.
    renamed = RemoteWriters("B", [flow("A", connect_offsets_topic="connect-offsets"), flow("C", target="X")])
    assert renamed.of("connect-offsets") == Writers(("A->B",), "Connect's offsets of A->B")
    # Internal names never are: MirrorSourceConnector never mirrors them.
    assert writers.of("mm2-offsets.A.internal") == Writers((), "Connect's offsets of A->B")


def test_mm2_topics_on_a_cluster():
    default = ReplicationPolicy()
    flows = [flow("A", policy=default), flow("C", policy=default, offset_syncs_topic_location="target"),
             flow("B", target="A", policy=default)]
    assert mm2_topics_on("B", flows) == {
        "heartbeats": "MM2's heartbeat connector",
        "A.checkpoints.internal": "MM2's checkpoint connector of A->B",
        "C.checkpoints.internal": "MM2's checkpoint connector of C->B",
        "mm2-offsets.A.internal": "Connect's offsets of A->B",
        "mm2-offsets.C.internal": "Connect's offsets of C->B",
        "mm2-offset-syncs.C.internal": "MM2's offset syncs of C->B",
        "mm2-offset-syncs.A.internal": "MM2's offset syncs of B->A",  # B is the source: its syncs live on B
    }
