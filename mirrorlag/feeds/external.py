"""The feeds a standalone sidecar reads from MM2's own topics (the callback feed is in-process)."""

from __future__ import annotations

import logging

from mirrorlag.config.settings import Settings
from mirrorlag.feeds.connect_offsets import FEED_NAME as CONNECT_OFFSETS, connect_offsets_feeds
from mirrorlag.feeds.heartbeats import heartbeat_feeds
from mirrorlag.feeds.offset_syncs import FEED_NAME as OFFSET_SYNCS, OffsetSyncsFeed, offset_syncs_feeds
from mirrorlag.feeds.off import offset_syncs_off_feeds, without_offset_syncs
from mirrorlag.feeds.target_progress import FEED_NAME as TARGET_PROGRESS, target_progress_feeds
from mirrorlag.interfaces import HeartbeatSource, LroFeed

log = logging.getLogger(__name__)

__all__ = ["build_feeds", "heartbeat_feeds", "HeartbeatSource"]


def build_feeds(settings: Settings) -> list[LroFeed]:
    """The LRO feeds `mirrorlag.lro.feeds` names, one per cluster that holds their topics.

    Target progress comes last: the poller reads the feeds in this order, so the syncs it
    translates through were drained before it reads the target, and where it proves no more
    than a sync does, the tie goes to the sync, which is dated by its own record."""
    # Flows MM2 writes no offset syncs for read none (syncs left in the topic are old), nor target
    # progress, which translates through them: they fall back to connect-offsets, and `off` says so.
    # Both take every flow: a flow without syncs still writes its remote topics, so it counts
    # among their writers (the real MM2: B->C without syncs feeding C's `orders` beside A->C).
    off = without_offset_syncs(settings)
    makers = {OFFSET_SYNCS: offset_syncs_feeds, CONNECT_OFFSETS: connect_offsets_feeds}
    feeds: list[LroFeed] = [feed for name in settings.lro_feeds if name in makers for feed in makers[name](settings)]
    if TARGET_PROGRESS in settings.lro_feeds:
        feeds += target_progress_feeds(settings, [f for f in feeds if isinstance(f, OffsetSyncsFeed)])
    feeds += offset_syncs_off_feeds(settings, list(settings.lro_feeds))
    for flow in off:
        if CONNECT_OFFSETS not in settings.lro_feeds:
            log.warning("flow %s: emit.offset-syncs.enabled = false and mirrorlag.lro.feeds does not list "
                        "connect-offsets: no feed gives its LROs", flow.id)
    return feeds
