"""The feeds a standalone sidecar reads from MM2's own topics (the callback feed is in-process)."""

from __future__ import annotations

from mirrorlag.config.settings import Settings
from mirrorlag.feeds.connect_offsets import FEED_NAME as CONNECT_OFFSETS, connect_offsets_feeds
from mirrorlag.feeds.heartbeats import heartbeat_feeds
from mirrorlag.feeds.offset_syncs import FEED_NAME as OFFSET_SYNCS, offset_syncs_feeds
from mirrorlag.interfaces import HeartbeatSource, LroFeed

__all__ = ["build_feeds", "heartbeat_feeds", "HeartbeatSource"]


def build_feeds(settings: Settings) -> list[LroFeed]:
    """The LRO feeds `mirrorlag.lro.feeds` names, one per cluster that holds their topics."""
    makers = {OFFSET_SYNCS: offset_syncs_feeds, CONNECT_OFFSETS: connect_offsets_feeds}
    return [feed for name in settings.lro_feeds for feed in makers[name](settings)]
