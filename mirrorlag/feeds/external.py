"""The feeds a standalone sidecar reads from MM2's own topics (the callback feed is in-process)."""

from __future__ import annotations

from mirrorlag.config.settings import Settings
from mirrorlag.feeds.connect_offsets import FEED_NAME as CONNECT_OFFSETS, connect_offsets_feeds
from mirrorlag.feeds.heartbeats import heartbeat_feeds
from mirrorlag.feeds.offset_syncs import FEED_NAME as OFFSET_SYNCS, OffsetSyncsFeed, offset_syncs_feeds
from mirrorlag.feeds.target_progress import FEED_NAME as TARGET_PROGRESS, target_progress_feeds
from mirrorlag.interfaces import HeartbeatSource, LroFeed

__all__ = ["build_feeds", "heartbeat_feeds", "HeartbeatSource"]


def build_feeds(settings: Settings) -> list[LroFeed]:
    """The LRO feeds `mirrorlag.lro.feeds` names, one per cluster that holds their topics.

    Target progress comes last: the poller reads the feeds in this order, so the syncs it
    translates through were drained before it reads the target, and where it proves no more
    than a sync does, the tie goes to the sync, which is dated by its own record."""
    makers = {OFFSET_SYNCS: offset_syncs_feeds, CONNECT_OFFSETS: connect_offsets_feeds}
    feeds = [feed for name in settings.lro_feeds if name in makers for feed in makers[name](settings)]
    if TARGET_PROGRESS in settings.lro_feeds:
        feeds += target_progress_feeds(settings, [f for f in feeds if isinstance(f, OffsetSyncsFeed)])
    return feeds
