import re

import pytest

from mirrorlag.config.policy import ReplicationPolicy
from mirrorlag.config.settings import DEFAULT_TOPICS_EXCLUDE, FlowSettings


def flow(policy=ReplicationPolicy(), include=".*", exclude=DEFAULT_TOPICS_EXCLUDE) -> FlowSettings:
    def joined(csv: str) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p.strip()})" for p in csv.split(",") if p.strip()))
    return FlowSettings("A", "B", joined(include), joined(exclude), policy)


def test_default_policy_names():
    policy = ReplicationPolicy()
    assert policy.remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("A.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"


def test_custom_separator_and_internal_separator_switch():
    assert ReplicationPolicy(separator="_").offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    legacy = ReplicationPolicy(separator="_", internal_separator_enabled=False)
    assert legacy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert ReplicationPolicy(separator="__").remote_topic("A", "t") == "A__t"


def test_identity_policy_keeps_names():
    policy = ReplicationPolicy(identity=True)
    assert policy.remote_topic("A", "orders") == "orders"
    assert policy.topic_source("A.orders") is None
    assert policy.local_topic("A", "orders") == "orders"


def test_identity_policy_names_heartbeats_as_the_default_policy_does():
    """IdentityReplicationPolicy.formatRemoteTopic, topicSource and upstreamTopic defer to
    DefaultReplicationPolicy for a topic ending with the heartbeats topic's name."""
    policy = ReplicationPolicy(identity=True)
    assert policy.remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.remote_topic("A", "app-heartbeats") == "A.app-heartbeats"
    assert policy.remote_topic("A", "C.heartbeats") == "A.C.heartbeats"
    assert policy.topic_source("A.heartbeats") == "A" and policy.upstream_topic("A.heartbeats") == "heartbeats"
    assert policy.local_topic("A", "A.heartbeats") == "heartbeats" and policy.local_topic("A", "heartbeats") is None
    assert policy.is_heartbeats_topic("A.heartbeats")
    identity = flow(policy)
    assert identity.should_replicate("C.heartbeats") and not identity.should_replicate("B.heartbeats")  # a cycle


def test_default_policy_inverse():
    policy = ReplicationPolicy()
    assert policy.local_topic("A", "A.orders") == "orders"
    assert policy.local_topic("A", "C.orders") is None and policy.local_topic("A", "A.") is None


@pytest.mark.parametrize("topic,expected", [
    ("orders", True),
    ("A.orders", True),  # came from elsewhere into A: A->B mirrors it on
    ("B.orders", False),  # a cycle: it came from the target
    ("C.B.orders", False),  # a cycle further upstream
    ("heartbeats", True),
    ("__consumer_offsets", False),
    ("mm2-offset-syncs.B.internal", False),
    ("connect-offsets-internal", False),
    ("orders.replica", False),
])
def test_should_replicate_follows_mm2(topic, expected):
    assert flow().should_replicate(topic) is expected


def test_include_list_and_heartbeats_always_replicated():
    f = flow(include="orders, pay.*")
    assert f.should_replicate("orders") and f.should_replicate("payments")
    assert not f.should_replicate("clicks")
    assert f.should_replicate("heartbeats")
    assert f.should_replicate("C.heartbeats")
