"""The feeds a standalone sidecar reads from MM2's own topics (the callback feed is in-process)."""

from __future__ import annotations

from mirrorlag.config.settings import Settings
from mirrorlag.feeds.offset_syncs import offset_syncs_feeds
from mirrorlag.poller import LroFeed


def build_feeds(settings: Settings) -> list[LroFeed]:
    return [*offset_syncs_feeds(settings)]
