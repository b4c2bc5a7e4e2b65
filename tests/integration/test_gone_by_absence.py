"""GONE by absence (issue 30 case 7), on real brokers through `run`'s poller (a Sidecar with the
feeds `run` builds, polled in process): a full metadata listing that omits a topic (a lost
Describe ACL, a broker whose metadata cache is still filling; tansu cannot lose a topic from a
listing, so the sidecar's own admin client drops it from the listings it receives) is no answer
that the topic is gone. The topic is asked by name, tansu answers truthfully that it exists, and
its idle partitions keep their LROs and their state; the absence is counted. A topic really
deleted (DeleteTopics, which tansu does) still reads GONE once, then leaves."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from mirrorlag.config import load_settings
from mirrorlag.feeds.external import build_feeds, heartbeat_feeds
from mirrorlag.formats import OffsetSync
from mirrorlag.model import State
from mirrorlag.sidecar.service import Sidecar
from tests.conftest import Clusters, write_properties
from tests.helpers import eventually

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source cluster: offset-syncs.topic.location=source


def _sync_topic(clusters: Clusters) -> None:
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared across tests; topics differ per test


def _hiding(listing: Callable[..., Any], hidden: set[str]) -> Callable[..., Any]:
    """The admin client's list_topics, with `hidden` dropped from full listings (a request that
    names a topic, DescribeTopics, still reaches the broker and answers truthfully)."""
    def list_topics(*args: Any, **kwargs: Any) -> Any:
        metadata = listing(*args, **kwargs)
        if not args and kwargs.get("topic") is None:
            for topic in hidden:
                metadata.topics.pop(topic, None)
        return metadata
    return list_topics


@pytest.fixture
def sidecar(tmp_path, clusters) -> Iterator[Sidecar]:
    config = write_properties(tmp_path / "mm2.properties", clusters, "src->dst.topics = gba-.*\n"
                              "mirrorlag.lro.feeds = offset-syncs\nmirrorlag.metadata.max.age.ms = 0\n")
    settings = load_settings([config])
    sidecar = Sidecar(settings, feeds=build_feeds(settings), heartbeats=heartbeat_feeds(settings), serve_http=False)
    try:
        yield sidecar
    finally:
        sidecar.poller.close()


def _rows(sidecar: Sidecar, topic: str) -> dict[int, tuple[State, int | None, int | None]]:
    return {r.key.partition: (r.state, r.lro, r.record_lag) for r in sidecar.poll().rows if r.key.topic == topic}


def test_a_topic_absent_from_the_listing_keeps_its_lros_and_a_deleted_one_is_gone_once(sidecar, clusters, topic_name):
    kept, doomed = f"gba-{topic_name}", f"gba-{topic_name}-doomed"
    for topic, records in ((kept, {0: 5, 1: 3}), (doomed, {0: 2})):
        clusters.create_topic(topic, len(records))
        clusters.produce(topic, records)
    _sync_topic(clusters)
    # Fully copied, and idle from now on: no sync will come again to restore a forgotten LRO.
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(kept, 0, 4, 4), OffsetSync(kept, 1, 2, 2),
                                             OffsetSync(doomed, 0, 1, 1)])
    in_sync = {0: (State.IN_SYNC, 4, 0), 1: (State.IN_SYNC, 2, 0)}
    eventually(lambda: _assert_equal(_rows(sidecar, kept), in_sync))
    eventually(lambda: _assert_equal(_rows(sidecar, doomed), {0: (State.IN_SYNC, 1, 0)}))

    source = sidecar.poller.sources["src"]
    hidden: set[str] = {kept}
    source.admin.list_topics = _hiding(source.admin.list_topics, hidden)  # type: ignore[method-assign]
    errors = sidecar.poller.stats.metadata_errors_total.get("src", 0)
    for poll in range(1, 4):  # metadata is read at every poll (mirrorlag.metadata.max.age.ms = 0)
        assert _rows(sidecar, kept) == in_sync, f"poll {poll} with {kept} absent from the listing"
        assert sidecar.poller.stats.metadata_errors_total["src"] == errors + poll  # a flapping listing shows
        assert source.unresolved == frozenset()  # the request naming it answered: it exists
    hidden.clear()
    # Listed again: the idle partitions still have their LROs (none was forgotten), not UNKNOWN.
    assert _rows(sidecar, kept) == in_sync
    assert sidecar.poller.stats.metadata_errors_total["src"] == errors + 3

    # Deleted for real, so absent from the listing: the request naming it says it does not
    # exist, so GONE once, then no row.
    clusters.delete_topic(doomed)
    states = [{p: row[0] for p, row in rows.items()} for _ in range(3) if (rows := _rows(sidecar, doomed))]
    assert states == [{0: State.GONE}], states
    assert _rows(sidecar, kept) == in_sync
    assert sidecar.poller.stats.metadata_errors_total["src"] == errors + 3  # a proved absence is no error
    # Its LRO left the feeds with it: created again, the new log does not take the old log's LRO.
    clusters.create_topic(doomed, 1)
    clusters.produce(doomed, {0: 2})
    (row,) = _rows(sidecar, doomed).values()
    assert row[1] is None, row


def _assert_equal(got: Any, want: Any) -> None:
    assert got == want, got
