"""SourceProbe's cache, rate limit and counters, with a fake source log instead of a broker."""

from __future__ import annotations

import math

import pytest

from mirrorlag.kafka.probe import ProbeStats, SourceProbe
from mirrorlag.model import PartitionKey


class FakeLog:
    """A source cluster as a fetcher sees it: per partition, {offset: timestamp} of the data
    records at the mirror's isolation level, and the offset a read ends at. Records what it is
    asked."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, int], dict[int, float]] = {}
        self.ends: dict[tuple[str, int], int] = {}
        self.calls: list[dict[tuple[str, int], int]] = []
        self.fail: set[tuple[str, int]] = set()  # partitions whose fetch errors or times out
        self.raises: BaseException | None = None
        self.closed = False

    def write(self, topic: str, partition: int, offset: int, ts: float) -> None:
        self.data.setdefault((topic, partition), {})[offset] = ts
        self.ends[(topic, partition)] = max(self.ends.get((topic, partition), 0), offset + 1)

    def fetch(self, starts, timeout_s):
        self.calls.append(dict(starts))
        if self.raises is not None:
            raise self.raises
        found = {}
        for tp, start in starts.items():
            if tp in self.fail:
                continue
            after = [o for o in self.data.get(tp, {}) if o >= start]
            found[tp] = (min(after), self.data[tp][min(after)]) if after else (max(self.ends.get(tp, 0), start), None)
        return found

    def close(self) -> None:
        self.closed = True


def key(topic: str = "t", partition: int = 0, target: str = "dst") -> PartitionKey:
    return PartitionKey("src", target, topic, partition)


@pytest.fixture
def log() -> FakeLog:
    return FakeLog()


def make(log: FakeLog, **kwargs) -> SourceProbe:
    return SourceProbe(None, fetcher=log, **kwargs)


def test_timestamp_of_the_first_data_record_or_none_past_the_markers(log):
    log.write("t", 0, 3, 1003.0)
    log.write("t", 0, 5, 1005.0)
    log.ends[("t", 0)] = 7  # 6: a commit marker
    probe = make(log)
    assert probe.probe([(key(), 3, 7)]) == {key(): 1003.0}
    assert probe.probe([(key(), 4, 7)]) == {key(): 1005.0}  # 4 is a marker or aborted: skipped
    assert probe.probe([(key(), 6, 7)]) == {key(): None}  # only the marker: caught up
    assert probe.probe([(key(), 5, 5)]) == {key(): None}  # an empty range: no fetch
    assert len(log.calls) == 3
    assert probe.stats == ProbeStats(probes_total=3, outcomes={"answered": 3})


def test_a_poll_where_nothing_changed_fetches_nothing(log):
    for p in range(50):
        log.write("t", p, 10, 100.0 + p)
    probe = make(log)
    requests = [(key(partition=p), 10, 20) for p in range(50)]
    first = probe.probe(requests)
    assert first == {key(partition=p): 100.0 + p for p in range(50)}
    assert len(log.calls) == 1 and len(log.calls[0]) == 50
    assert probe.probe(requests) == first
    assert len(log.calls) == 1
    assert probe.stats.cache_hits_total == 50 and probe.stats.probes_total == 50


def test_one_fact_answers_every_leo_a_stalled_mirror_costs_one_fetch(log):
    log.write("t", 0, 10, 110.0)
    probe = make(log)
    for leo in range(11, 40):  # LRO stays, the LEO grows each poll
        assert probe.probe([(key(), 10, leo)]) == {key(): 110.0}
    assert len(log.calls) == 1
    # A data record at or past the LEO asked is no record of [from, leo).
    assert probe.probe([(key(), 10, 10)]) == {key(): None}


def test_an_empty_range_is_known_up_to_its_end_only(log):
    log.ends[("t", 0)] = 7
    probe = make(log)
    assert probe.probe([(key(), 6, 7)]) == {key(): None}
    assert probe.probe([(key(), 6, 7)]) == {key(): None}
    assert len(log.calls) == 1
    log.write("t", 0, 7, 107.0)  # appended since: [6, 8) holds a record, asked again
    assert probe.probe([(key(), 6, 8)]) == {key(): 107.0}
    assert len(log.calls) == 2
    assert probe.probe([(key(), 6, 7), (key(target="b"), 6, 8)]) == {key(): None, key(target="b"): 107.0}
    assert len(log.calls) == 2


def test_at_most_max_fetches_partitions_per_call_oldest_first(log):
    for p in range(10):
        log.write("t", p, 0, float(p))
    probe = make(log, max_fetches=4)
    requests = [(key(partition=p), 0, 1) for p in range(10)]
    answered: list[dict] = []
    for _ in range(3):
        answered.append(probe.probe(requests))
    assert [sorted(k.partition for k in a) for a in answered] == [[0, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6, 7], list(range(10))]
    assert [sorted(tp[1] for tp in call) for call in log.calls] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert probe.stats.deferred_total == 6 + 2
    assert probe.stats.probes_total == 10


def test_a_partition_asked_anew_waits_behind_those_already_waiting(log):
    for p in range(6):
        log.write("t", p, 0, float(p))
    probe = make(log, max_fetches=2)
    probe.probe([(key(partition=p), 0, 1) for p in (0, 1, 2, 3)])  # 0 and 1 fetched; 2, 3 wait
    # 5 and 4 are new, listed first: 2 and 3 still go before them.
    probe.probe([(key(partition=p), 0, 1) for p in (5, 4, 3, 2)])
    assert sorted(log.calls[1]) == [("t", 2), ("t", 3)]
    probe.probe([(key(partition=p), 0, 1) for p in (5, 4, 3, 2)])
    assert sorted(log.calls[2]) == [("t", 4), ("t", 5)]


def test_failures_are_unanswered_not_cached_and_sent_to_the_back(log):
    log.write("t", 0, 0, 1.0)
    log.write("t", 1, 0, 2.0)
    log.write("t", 2, 0, 3.0)
    log.fail = {("t", 0)}
    probe = make(log, max_fetches=2)
    requests = [(key(partition=p), 0, 1) for p in range(3)]
    assert probe.probe(requests) == {key(partition=1): 2.0}
    assert probe.stats.errors_total == 1 and probe.stats.deferred_total == 1
    log.fail = set()
    # 2 waited longer than 0, which failed: 2 first, then 0.
    assert probe.probe(requests) == {key(partition=1): 2.0, key(partition=2): 3.0, key(partition=0): 1.0}
    assert sorted(log.calls[1]) == [("t", 0), ("t", 2)]


def test_a_fetch_that_raises_is_a_call_without_answers(log):
    log.write("t", 0, 0, 1.0)
    log.raises = RuntimeError("boom")
    probe = make(log)
    assert probe.probe([(key(), 0, 1), (key(partition=1), 3, 3)]) == {key(partition=1): None}
    assert probe.stats.errors_total == 1
    log.raises = None
    assert probe.probe([(key(), 0, 1)]) == {key(): 1.0}


def test_flows_sharing_a_source_partition_share_its_fetch_and_cache(log):
    log.write("t", 0, 4, 104.0)
    log.write("t", 0, 8, 108.0)
    probe = make(log)
    a, b, c = key(target="a"), key(target="b"), key(target="c")
    # One fetch from the lowest offset asked; b's offset is answered by the same read, c's is past
    # the first data record (4) and waits for its own fetch.
    assert probe.probe([(a, 2, 9), (b, 3, 9), (c, 6, 9)]) == {a: 104.0, b: 104.0}
    assert log.calls == [{("t", 0): 2}]
    assert probe.stats.deferred_total == 1
    assert probe.probe([(a, 2, 9), (b, 3, 9), (c, 6, 9)]) == {a: 104.0, b: 104.0, c: 108.0}
    assert log.calls[1] == {("t", 0): 6}


def test_an_end_below_the_leo_asked_answers_nothing(log):
    """A read_committed read ends at the LSO; an LEO read as the high watermark is past it."""
    log.ends[("t", 0)] = 5
    probe = make(log)
    assert probe.probe([(key(), 3, 9)]) == {}
    assert probe.stats.errors_total == 1
    assert probe.probe([(key(), 3, 5)]) == {key(): None}  # what the read did see is known
    assert len(log.calls) == 1


def test_a_record_without_a_timestamp_is_data_but_no_time(log):
    log.write("t", 0, 0, math.nan)
    probe = make(log)
    assert probe.probe([(key(), 0, 2)]) == {}
    assert probe.probe([(key(), 0, 2)]) == {}
    assert len(log.calls) == 1  # still a fact: not fetched again
    assert probe.probe([(key(), 0, 0)]) == {key(): None}


def test_the_cache_is_bounded_least_recently_used_first(log):
    for p in range(5):
        log.write("t", p, 0, float(p))
    probe = make(log, cache_size=3)
    probe.probe([(key(partition=p), 0, 1) for p in range(5)])
    assert probe.cached == 3
    probe.probe([(key(partition=4), 0, 1)])
    assert len(log.calls) == 1


def test_forget_drops_a_recreated_topics_facts(log):
    log.write("t", 0, 0, 1.0)
    log.write("u", 0, 0, 5.0)
    probe = make(log)
    probe.probe([(key("t"), 0, 1), (key("u"), 0, 1)])
    log.data[("t", 0)] = {0: 2.0}  # the new log
    assert probe.forget(["t"]) == 1
    assert probe.probe([(key("t"), 0, 1), (key("u"), 0, 1)]) == {key("t"): 2.0, key("u"): 5.0}
    assert log.calls[1] == {("t", 0): 0}


def test_zero_fetches_defers_everything_and_close_closes_the_fetcher(log):
    log.write("t", 0, 0, 1.0)
    probe = make(log, max_fetches=0)
    assert probe.probe([(key(), 0, 1)]) == {}
    assert probe.stats.deferred_total == 1 and log.calls == []
    probe.close()
    assert log.closed


def test_bad_arguments_are_refused(log):
    with pytest.raises(ValueError):
        make(log, max_fetches=-1)
    with pytest.raises(ValueError):
        SourceProbe(None)
    with pytest.raises(ValueError):
        SourceProbe({"bootstrap.servers": "127.0.0.1:1"}, "read_something")


def test_for_cluster_builds_its_consumer_from_the_clusters_client_config():
    from confluent_kafka import IsolationLevel

    from mirrorlag.config.settings import ClusterSettings
    from mirrorlag.errors import ConfigError

    client = {"bootstrap.servers": "127.0.0.1:1"}
    probe = SourceProbe.for_cluster(ClusterSettings("src", client["bootstrap.servers"], client),
                                    IsolationLevel.READ_COMMITTED, max_fetches=5)
    assert probe.max_fetches == 5 and probe.fetcher.isolation == "read_committed"
    probe.close()
    probe.close()  # twice is fine
    refused = {**client, "security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}
    with pytest.raises(ConfigError, match="cluster src"):
        SourceProbe.for_cluster(ClusterSettings("src", client["bootstrap.servers"], refused))


def test_partitions_no_longer_asked_stop_waiting_and_hold_no_memory(log):
    """A first poll of 100k partitions behind leaves most of them waiting for a fetch; once they
    are no longer asked (their LROs moved), the next call, even an empty one (the poller makes
    one at every poll), lets them go: the waiting set is not kept for the process's life."""
    for p in range(6):
        log.write("t", p, 0, float(p))
    probe = make(log, max_fetches=2)
    probe.probe([(key(partition=p), 0, 1) for p in range(6)])
    assert len(probe._waiting) == 4
    probe.probe(())
    assert probe._waiting == {}


class RefusingLog(FakeLog):
    """A source that refuses some partitions, saying why (the KafkaFetcher's `failures`)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse: dict[tuple[str, int], str] = {}
        self.failures: dict[tuple[str, int], str] = {}

    def fetch(self, starts, timeout_s):
        # A timeout is a partition left out of the answer and of `failures` alike.
        self.failures = {tp: why for tp, why in self.refuse.items() if tp in starts and why != "timeout"}
        self.fail = set(self.refuse)
        return super().fetch(starts, timeout_s)


def test_outcomes_are_counted_by_reason_and_a_refusal_is_logged_once_per_change(caplog):
    log = RefusingLog()
    for p in range(5):
        log.write("t", p, 10, 1010.0)
    log.refuse = {("t", 1): "not_authorized", ("t", 2): "out_of_range", ("t", 3): "timeout"}
    probe = SourceProbe(None, fetcher=log, max_fetches=4, cluster="src")
    asked = [(key(partition=p), 10, 11) for p in range(5)]
    with caplog.at_level("INFO", logger="mirrorlag.kafka.probe"):
        probe.probe(asked)
        probe.probe(asked)  # again: 0 is cached, 4 (deferred) now fetched; 1, 2, 3 fail again
    assert probe.stats.outcomes == {"answered": 2, "cached": 1, "deferred": 1, "not_authorized": 2,
                                    "out_of_range": 2, "timeout": 2}
    denied = [r for r in caplog.records if "not authorized" in r.getMessage()]
    assert len(denied) == 1 and "Read on Topic" in denied[0].getMessage() and "cluster src" in denied[0].getMessage()
    log.refuse = {}
    with caplog.at_level("INFO", logger="mirrorlag.kafka.probe"):
        probe.probe([(key(partition=1), 10, 11)])
    assert any("authorized again" in r.getMessage() for r in caplog.records)


def test_offsets_of_the_first_data_records_are_handed_out(log):
    log.write("t", 0, 12, 1012.0)
    log.ends[("t", 0)] = 14  # 13: a marker
    probe = make(log)
    offsets: dict = {}
    assert probe.probe([(key(), 11, 14)], offsets) == {key(): 1012.0}
    assert offsets == {key(): 12}
    offsets.clear()
    assert probe.probe([(key(), 11, 14)], offsets) == {key(): 1012.0}  # from the cache
    assert offsets == {key(): 12}
    offsets.clear()
    assert probe.probe([(key(), 13, 14)], offsets) == {key(): None} and offsets == {}  # a marker only


class SlowLog(FakeLog):
    """A source whose fetch reaches only the first `reach` partitions of a call before its time
    runs out (the KafkaFetcher's `reached`); of those reached, `fail` time out."""

    def __init__(self, reach: int) -> None:
        super().__init__()
        self.reach = reach
        self.reached = 0

    def fetch(self, starts, timeout_s):
        order = list(starts)
        self.reached = min(self.reach, len(order))
        return super().fetch({tp: starts[tp] for tp in order[:self.reach]}, timeout_s)


def test_partitions_a_call_did_not_reach_go_first_next_call_so_none_starves():
    log = SlowLog(reach=2)
    for p in range(6):
        log.write("t", p, 0, float(p))
    log.fail = {("t", 0), ("t", 1)}  # reached every call, never answering (a timeout)
    probe = make(log)
    asked = [(key(partition=p), 0, 1) for p in range(6)]
    assert probe.probe(asked) == {}
    assert probe.stats.outcomes == {"timeout": 2, "deferred": 4}
    # 2..5 were never tried: they go before 0 and 1, which were tried and failed.
    assert probe.probe(asked) == {key(partition=2): 2.0, key(partition=3): 3.0}
    assert list(log.calls[1])[:2] == [("t", 2), ("t", 3)]
    answered = probe.probe(asked)  # 2 and 3 from the cache, 4 and 5 fetched
    assert answered == {key(partition=p): float(p) for p in (2, 3, 4, 5)}
    assert list(log.calls[2])[:2] == [("t", 4), ("t", 5)]
    assert probe.stats.errors_total == 2 and probe.stats.deferred_total == 4 + 4 + 2
    assert probe.stats.probes_total == 2 + 2 + 2  # fetches started: those reached
