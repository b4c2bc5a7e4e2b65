"""A feed the configuration turned off for some flows: no evidence, only the reason, in `/status`
`feeds[].off` (docs/design.md §3: where a feed gives no evidence by design, the output says why)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

from mirrorlag.config.settings import FlowSettings, Settings
from mirrorlag.feeds.offset_syncs import FEED_NAME as OFFSET_SYNCS, sync_topic_location
from mirrorlag.feeds.target_progress import FEED_NAME as TARGET_PROGRESS
from mirrorlag.interfaces import FeedHealth, FeedOff, LroFeed
from mirrorlag.model import PartitionKey


@dataclass
class OffFeed(LroFeed):
    """Stands for feed `name` on `cluster_alias` where every flow it would read is off."""

    name: str
    cluster_alias: str
    off: tuple[FeedOff, ...]  # the flows, and why
    bad_records: int = 0
    reader: None = None

    def offsets(self) -> Mapping[PartitionKey, int]:
        return {}

    def health(self) -> FeedHealth:
        return FeedHealth(self.name, self.cluster_alias, (), (), 0, off=self.off)


def without_offset_syncs(settings: Settings) -> list[FlowSettings]:
    """The flows MM2 writes no offset syncs for (emit.offset-syncs.enabled = false, MM2 >= 3.9)."""
    return [flow for flow in settings.flows if not flow.emit_offset_syncs]


def offset_syncs_off_feeds(settings: Settings, feeds: list[str]) -> list[OffFeed]:
    """Per cluster, the flows whose offset syncs are not read, and why: the syncs feed of the
    cluster that would hold them and, when listed in `feeds`, the target-progress feed of their
    target (it translates through the syncs). The syncs left in a compacted topic by an MM2 that
    wrote them once would be old evidence forever, so none is read: those flows fall back to
    connect-offsets."""
    by_feed: dict[tuple[str, str], list[FeedOff]] = {}
    why = "emit.offset-syncs.enabled = false"
    for flow in without_offset_syncs(settings):
        flows = (str(flow.id),)
        if OFFSET_SYNCS in feeds:
            cluster, topic = sync_topic_location(flow)
            by_feed.setdefault((OFFSET_SYNCS, cluster), []).append(
                FeedOff(flows, (), f"{why} (MM2 writes no syncs; {topic} is not read)"))
        if TARGET_PROGRESS in feeds:
            by_feed.setdefault((TARGET_PROGRESS, flow.target), []).append(
                FeedOff(flows, (), f"{why} (no syncs to translate through)"))
    return [OffFeed(name, cluster, tuple(off)) for (name, cluster), off in by_feed.items()]


def one_per_cluster(healths: Sequence[FeedHealth]) -> list[FeedHealth]:
    """The feeds' health with an OffFeed's reasons joined to the entry of the feed that reads the
    same cluster for other flows: one entry per feed and cluster (two would also be two series of
    one name and labels in /metrics)."""
    out = list(healths)
    real = {(h.feed, h.cluster): i for i, h in enumerate(out) if h.topics or not h.off}
    for j, h in enumerate(healths):
        i = real.get((h.feed, h.cluster))
        if i is not None and i != j and not h.topics and h.off:
            out[i] = dataclasses.replace(out[i], off=out[i].off + h.off)
            out[j] = None  # type: ignore[call-overload]
    return [h for h in out if h is not None]

