"""Metadata on its own cadence (issue 31), on real brokers through `run`'s poller (a Sidecar with
the feeds `run` builds, polled in process): with the default configuration a LEO poll does not
read the topic listing or topic IDs, yet a deleted topic is GONE and a recreated one RESET at the
poll that sees its end offset fail or go back; a topic created is tracked within the max age
(shortened here, so the test is quick: a minute by default)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from mirrorlag.config import load_settings
from mirrorlag.feeds.external import build_feeds, heartbeat_feeds
from mirrorlag.formats import OffsetSync
from mirrorlag.model import PollObservation, State
from mirrorlag.sidecar.service import Sidecar
from tests.conftest import Clusters, write_properties
from tests.helpers import eventually

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"  # on the source cluster: offset-syncs.topic.location=source


class Counted:
    """Wraps the source's discover: how many metadata reads, and the IDs each asked (None: all)."""

    def __init__(self, discover: Any) -> None:
        self.discover = discover
        self.asked: list[list[str] | None] = []

    def __call__(self, ids_of: Any = None) -> Any:
        self.asked.append(None if ids_of is None else sorted(ids_of))
        return self.discover() if ids_of is None else self.discover(ids_of)


@contextmanager
def _sidecar(tmp_path, clusters: Clusters, prefix: str, more: str = "") -> Iterator[tuple[Sidecar, Counted]]:
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {prefix}.*\n"
                              "mirrorlag.lro.feeds = offset-syncs\n" + more)
    settings = load_settings([config])
    sidecar = Sidecar(settings, feeds=build_feeds(settings), heartbeats=heartbeat_feeds(settings), serve_http=False)
    source = sidecar.poller.sources["src"]
    counted = source.discover = Counted(source.discover)  # type: ignore[method-assign]
    try:
        yield sidecar, counted
    finally:
        sidecar.poller.close()


def _topics(clusters: Clusters, records: dict[str, int]) -> None:
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared across tests; topics differ per test
    for topic, n in records.items():
        clusters.create_topic(topic, 1)
        clusters.produce(topic, {0: n})
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(t, 0, n - 1, n - 1) for t, n in records.items()])


def _states(sidecar: Sidecar) -> dict[str, State]:
    return {r.key.topic: r.state for r in sidecar.poll().rows}


def _in_sync(sidecar: Sidecar, topics: list[str]) -> None:
    states = _states(sidecar)
    assert all(states.get(t) == State.IN_SYNC for t in topics), states


def test_with_the_default_max_age_a_deleted_topic_is_gone_and_a_recreated_one_reset_at_the_poll_that_sees_it(
        tmp_path, clusters, topic_name):
    kept, doomed, renewed = (f"mc{topic_name}-{x}" for x in ("kept", "doomed", "renewed"))
    _topics(clusters, {kept: 5, doomed: 5, renewed: 100})
    with _sidecar(tmp_path, clusters, f"mc{topic_name}-") as (sidecar, counted):
        assert sidecar.settings.metadata_max_age_s == 60.0  # the default
        eventually(lambda: _in_sync(sidecar, [kept, doomed, renewed]))
        reads = len(counted.asked)
        for _ in range(3):
            _in_sync(sidecar, [kept, doomed, renewed])
        assert len(counted.asked) == reads  # LEO polls: no metadata read

        # Deleted: its ListOffsets answer fails, which reads the metadata at once. GONE at that
        # poll (the request naming it says it does not exist), then no row.
        clusters.delete_topic(doomed)
        states = [_states(sidecar) for _ in range(3)]
        assert [s.get(doomed) for s in states] == [State.GONE, None, None], states
        assert all(s[kept] == State.IN_SYNC for s in states), states
        assert counted.asked[reads:] == [[doomed]], counted.asked[reads:]

        # Deleted and created again with fewer records: its LEO went back, so the poll that sees
        # it reads its topic ID at once (RESET by the ID, not only by the offset), and the next
        # read on the cadence finds no second change.
        seen: list[PollObservation] = []
        update = sidecar.poller.engine.update
        sidecar.poller.engine.update = lambda obs: (seen.append(obs), update(obs))[1]  # type: ignore[method-assign]
        clusters.delete_topic(renewed)
        clusters.create_topic(renewed, 1)
        clusters.produce(renewed, {0: 30})
        source = sidecar.poller.sources["src"]
        reads = len(counted.asked)
        states = _states(sidecar)
        assert {k.partition: v for k, v in seen[-1].leos.items() if k.topic == renewed} == {0: 30}
        assert states[renewed] == State.RESET, states
        assert counted.asked[reads:] == [[renewed]] and source.recreated == frozenset({renewed}), counted.asked[reads:]
        assert {k.topic for k in seen[-1].new_logs} == {renewed}
        assert _states(sidecar)[renewed] == State.UNKNOWN
        # The next read on the cadence: the topic's ID is the one read at the RESET, no change.
        sidecar.poller._metadata_due["src"] = 0.0
        assert _states(sidecar)[renewed] == State.UNKNOWN
        assert counted.asked[-1] is None and source.recreated == frozenset()


def test_a_topic_created_is_tracked_within_the_max_age_and_not_read_before(tmp_path, clusters, topic_name):
    first, later = f"mn{topic_name}-a", f"mn{topic_name}-b"
    _topics(clusters, {first: 5})
    with _sidecar(tmp_path, clusters, f"mn{topic_name}-", "mirrorlag.metadata.max.age.ms = 2000\n") as (sidecar, counted):
        eventually(lambda: _in_sync(sidecar, [first]))
        _topics(clusters, {later: 3})
        created = time.monotonic()
        assert later not in _states(sidecar) or time.monotonic() - created > 2  # within its age: not read yet
        eventually(lambda: _in_sync(sidecar, [first, later]))
        assert time.monotonic() - created < 2 + 5  # the max age, and the polls that read the syncs
