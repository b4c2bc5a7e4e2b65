"""A source probe that cannot fetch (issue 30 case 2), on real brokers through the real poller:
tansu has no ACLs, so the probe's seam gets a stand-in fetcher that refuses some topics as a
broker without a Read ACL does (TOPIC_AUTHORIZATION_FAILED) and reads the rest from the source
with the real KafkaFetcher. Offset syncs are written by hand, the bytes MM2 writes.

What must hold: the refusal is counted per cluster and reason and logged once per change with the
ACL named; a partition whose claim needed the probe is a flagged lower bound, never IN_SYNC; once
the probe may read, the claim is proved."""

from __future__ import annotations

import logging
import threading
import time
from typing import Mapping

import pytest

from mirrorlag.config import load_settings
from mirrorlag.exporters.status import row_to_dict
from mirrorlag.feeds.external import build_feeds
from mirrorlag.formats import OffsetSync
from mirrorlag.kafka.probe import NOT_AUTHORIZED, KafkaFetcher, SourceProbe
from mirrorlag.model import State
from mirrorlag.poll.poller import Poller
from mirrorlag.poll.wiring import lag_engine
from tests.conftest import write_properties
from tests.helpers import produce_records

pytestmark = pytest.mark.integration

SYNC_TOPIC = "mm2-offset-syncs.dst.internal"


class Refusing:
    """A Fetcher that refuses `denied` topics (not authorized) and reads the others for real."""

    def __init__(self, bootstrap: str, denied: set[str]) -> None:
        self.real = KafkaFetcher({"bootstrap.servers": bootstrap})
        self.denied = denied
        self.failures: dict[tuple[str, int], str] = {}

    def fetch(self, starts: Mapping[tuple[str, int], int], timeout_s: float):
        allowed = {tp: s for tp, s in starts.items() if tp[0] not in self.denied}
        found = self.real.fetch(allowed, timeout_s) if allowed else {}
        self.failures = {**self.real.failures, **{tp: NOT_AUTHORIZED for tp in starts if tp[0] in self.denied}}
        return found

    def close(self) -> None:
        self.real.close()


@pytest.fixture
def poller(tmp_path, clusters, topic_name):
    try:
        clusters.create_topic(SYNC_TOPIC, 1)
    except Exception:
        pass  # shared across tests
    config = write_properties(tmp_path / "mm2.properties", clusters, f"src->dst.topics = {topic_name}.*\n")
    settings = load_settings([str(config)])
    made = Poller(settings, lag_engine(settings), build_feeds(settings))
    yield made
    made.close()


def test_a_refused_probe_is_counted_logged_once_flagged_and_proved_once_allowed(clusters, topic_name, poller, caplog):
    stalled, idle = f"{topic_name}.stalled", f"{topic_name}.idle"
    clusters.create_topic(stalled, 1)
    clusters.create_topic(idle, 1)
    hour_ago_ms = int(time.time() * 1000) - 3_600_000
    # A mirror that stalled an hour before the sidecar started: records 5..9 never copied.
    produce_records(clusters.source, stalled, 0, [hour_ago_ms + i for i in range(10)])
    # An idle transactional partition, fully copied: records 0..2, its commit marker at 3.
    produce_records(clusters.source, idle, 0, [hour_ago_ms] * 3, transactional=True)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(stalled, 0, 4, 4), OffsetSync(idle, 0, 2, 2)],
                                timestamp_ms=hour_ago_ms + 5)
    fetcher = Refusing(clusters.source, {stalled, idle})
    poller._probes["src", "read_uncommitted"] = SourceProbe(None, fetcher=fetcher, cluster="src")

    with caplog.at_level(logging.INFO, logger="mirrorlag.kafka.probe"):
        for _ in range(2):
            rows = {r.key.topic: row_to_dict(r) for r in poller.poll_once().rows}
            s, i = rows[stalled], rows[idle]
            # Nothing proves how long they have been behind: never IN_SYNC, flagged.
            assert (s["record_lag"], s["state"], s["time_lag_lower_bound"]) == (5, "UNKNOWN", True), s
            assert (i["record_lag"], i["state"], i["time_lag_lower_bound"]) == (1, "UNKNOWN", True), i
            assert s["time_lag_s"] < 60, s  # from the first look: a lower bound
    outcomes = poller.stats.probe_outcomes_total["src"]
    assert outcomes["not_authorized"] == 4 and "answered" not in outcomes, outcomes
    refusals = [r.getMessage() for r in caplog.records if "not authorized" in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert "cluster src" in refusals[0] and "Read on Topic" in refusals[0], refusals

    # Read granted: the probe dates record 5 (an hour ago) and finds only the marker after 2.
    fetcher.denied = set()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mirrorlag.kafka.probe"):
        rows = {r.key.topic: row_to_dict(r) for r in poller.poll_once().rows}
    s, i = rows[stalled], rows[idle]
    assert (s["state"], s["time_lag_lower_bound"]) == ("STALLED", False), s
    assert 3_590 <= s["time_lag_s"] <= 3_700, s
    assert (i["record_lag"], i["state"], i["time_lag_lower_bound"]) == (0, "IN_SYNC", False), i
    assert poller.stats.probe_outcomes_total["src"]["answered"] == 2
    assert any("authorized again" in r.getMessage() for r in caplog.records)


def test_check_proves_by_its_window_what_a_refused_probe_could_not(clusters, topic_name, poller):
    # `mirrorlag check`'s own KIP-16 window is proof too: a partition behind at its first look
    # whose probe is refused is not final; MM2 copying all that existed then makes it IN_SYNC.
    # The idle transactional partition, which nothing can prove, ends STALLED (1 behind, flagged).
    from mirrorlag.check.run import _observe

    busy, idle = f"{topic_name}.busy", f"{topic_name}.idle"
    clusters.create_topic(busy, 1)
    clusters.create_topic(idle, 1)
    now_ms = int(time.time() * 1000)
    produce_records(clusters.source, busy, 0, [now_ms + i for i in range(10)])
    produce_records(clusters.source, idle, 0, [now_ms] * 3, transactional=True)
    clusters.write_offset_syncs(SYNC_TOPIC, [OffsetSync(busy, 0, 4, 4), OffsetSync(idle, 0, 2, 2)])
    poller._probes["src", "read_uncommitted"] = SourceProbe(None, fetcher=Refusing(clusters.source, {busy, idle}), cluster="src")
    copied = threading.Timer(1.5, clusters.write_offset_syncs, (SYNC_TOPIC, [OffsetSync(busy, 0, 9, 9)]))
    copied.start()
    try:
        rows = {r.key.topic: r for r in _observe(poller, 6.0)}
    finally:
        copied.join()
    assert (rows[busy].state, rows[busy].record_lag) == (State.IN_SYNC, 0), rows[busy]
    assert (rows[idle].state, rows[idle].record_lag, rows[idle].time_lag_lower_bound) == (State.STALLED, 1, True), rows[idle]
