"""Which remote topics more than one writer can feed, read from the configuration (docs/design.md §3).

Target progress translates a remote partition's end offset through one flow's offset syncs, so
every target record after a sync must be that flow's copy. The configuration shows where that
fails, per remote topic of a target:
- several flows into the target name a topic the same there: IdentityReplicationPolicy keeps names,
  so A->B and C->B both mirroring `orders` write B's `orders` (policies can also differ per flow:
  an identity flow from C mirroring C's `A.orders` writes the `A.orders` that A->B names);
- MM2 writes that name on the target itself (MirrorHeartbeatConnector's `heartbeats`,
  MirrorCheckpointConnector's `<source>.checkpoints.internal`, the offset-syncs topics that live
  there, the Connect offsets topic of a flow into it).
A flow can feed a remote topic when its topics filters accept the topic its policy names so (as
MirrorSourceConnector.shouldReplicateTopic decides), whether or not its source has that topic
today: MM2 starts copying a new topic within `refresh.topics.interval.seconds`, before the sidecar
need have seen it. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from mirrorlag.config.settings import FlowSettings


def mm2_topics_on(cluster: str, flows: Iterable[FlowSettings]) -> dict[str, str]:
    """The topics MM2 itself writes on `cluster`, each with what writes it."""
    own: dict[str, str] = {}
    for flow in flows:
        policy = flow.policy
        if flow.target == cluster:
            own.setdefault(policy.heartbeats_topic, "MM2's heartbeat connector")
            own.setdefault(policy.checkpoints_topic(flow.source), f"MM2's checkpoint connector of {flow.id}")
            own.setdefault(flow.connect_offsets_topic, f"Connect's offsets of {flow.id}")
            if flow.offset_syncs_topic_location == "target":
                own.setdefault(policy.offset_syncs_topic(flow.source), f"MM2's offset syncs of {flow.id}")
        elif flow.source == cluster and flow.offset_syncs_topic_location != "target":
            own.setdefault(policy.offset_syncs_topic(flow.target), f"MM2's offset syncs of {flow.id}")
    return own


@dataclass(frozen=True)
class Writers:
    """Who can write one remote topic of a target."""

    flows: tuple[str, ...]  # flows into the target ("A->B") whose filters and policy name it so
    mm2: str | None  # what of MM2 itself writes it there, if anything

    @property
    def shared(self) -> bool:
        return len(self.flows) + (self.mm2 is not None) > 1

    def __str__(self) -> str:
        return ", ".join((*self.flows, *((self.mm2,) if self.mm2 is not None else ())))


@dataclass
class RemoteWriters:
    """Every writer the configuration lets feed each remote topic of one target cluster."""

    target: str
    flows: Sequence[FlowSettings]  # every configured flow: those into the target write its topics
    _own: dict[str, str] = field(default_factory=dict)
    _writers: dict[str, Writers] = field(default_factory=dict)  # by remote topic: a few a topic, never per partition

    def __post_init__(self) -> None:
        self._own = mm2_topics_on(self.target, self.flows)

    def of(self, remote: str) -> Writers:
        found = self._writers.get(remote)
        if found is None:
            flows = tuple(str(flow.id) for flow in self.flows if flow.target == self.target
                          and (topic := flow.policy.local_topic(flow.source, remote)) is not None
                          and flow.should_replicate(topic))
            found = self._writers[remote] = Writers(flows, self._own.get(remote))
        return found
