"""SourceCluster.discover without a broker: which metadata answers drop a topic (only "does not
exist", from a request naming it: absence from the full listing is asked about by name), which
keep it with the partitions it had (any other topic-level error, an omission not proved, counted),
and which topics were deleted and created again (their topic ID changed, KIP-516)."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException

from mirrorlag.config import load_settings
from mirrorlag.kafka.source import SourceCluster


def _future(value=None, error: KafkaError | None = None) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    if error is not None:
        future.set_exception(KafkaException(error))
    else:
        future.set_result(value)
    return future


class FakeAdmin:
    """Answers metadata and DescribeTopics from `topics`: name -> (partitions, error, topic ID).
    The full listing omits the topics in `hidden` (a lost Describe ACL, a cold metadata cache);
    a request naming a topic answers what `answers` says of it, else the truth."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[int, KafkaError | None, str]] = {}
        self.hidden: set[str] = set()
        self.answers: dict[str, concurrent.futures.Future] = {}
        self.described: list[list[str]] = []

    def list_topics(self, timeout=None):
        return SimpleNamespace(topics={
            name: SimpleNamespace(partitions={} if error else dict.fromkeys(range(n)), error=error)
            for name, (n, error, _) in self.topics.items() if name not in self.hidden})

    def describe_topics(self, collection, request_timeout=None):
        names = list(collection.topic_names)
        self.described.append(names)
        out = {}
        for name in names:
            if name in self.answers:
                out[name] = self.answers[name]
            elif name not in self.topics:
                out[name] = _future(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            elif (error := self.topics[name][1]) is not None:
                out[name] = _future(error=error)
            else:
                out[name] = _future(SimpleNamespace(topic_id=self.topics[name][2]))
        return out


def _source(tmp_path: Path, admin: FakeAdmin) -> SourceCluster:
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = src, dst\nsrc.bootstrap.servers = 127.0.0.1:9\n"
                      "dst.bootstrap.servers = 127.0.0.1:9\nsrc->dst.enabled = true\nsrc->dst.topics = a.*\n")
    settings = load_settings([config])
    return SourceCluster("src", admin, settings.flows, 1.0, 10, IsolationLevel.READ_UNCOMMITTED)  # type: ignore[arg-type]


def _topics(source: SourceCluster) -> dict[str, int]:
    (topology,) = source.discover().values()
    return {topic: len(numbers) for topic, numbers in topology}


def test_a_topic_level_error_keeps_the_topic_with_its_partitions_and_is_counted(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "other": (1, None, "id3")}
    source = _source(tmp_path, admin)
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 0
    admin.topics["a1"] = (0, KafkaError(KafkaError.LEADER_NOT_AVAILABLE), "id1")
    admin.topics["a2"] = (0, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), "id2")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 2
    assert source.recreated == frozenset()
    # A topic never seen before with an error has no partitions to keep (and is counted).
    admin.topics["a3"] = (0, KafkaError(KafkaError.LEADER_NOT_AVAILABLE), "id4")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 5


def test_only_unknown_topic_or_partition_to_a_request_naming_the_topic_drops_it(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2")}
    source = _source(tmp_path, admin)
    assert _topics(source) == {"a1": 3, "a2": 2}
    admin.topics["a1"] = (0, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), "id1")
    del admin.topics["a2"]
    admin.described.clear()
    assert _topics(source) == {}
    assert source.metadata_errors == 0 and source.unresolved == frozenset()
    assert admin.described[-1] == ["a1", "a2"]  # asked by name, in one request, after the listing
    # Back, after an error in between: nothing of the old partitions was kept.
    admin.topics["a1"] = (0, KafkaError(KafkaError.LEADER_NOT_AVAILABLE), "id1")
    assert _topics(source) == {}


def test_a_changed_topic_id_names_the_topic_recreated_once(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "other": (1, None, "id3")}
    source = _source(tmp_path, admin)
    _topics(source)
    assert source.recreated == frozenset()
    assert sorted(n for names in admin.described for n in names) == ["a1", "a2"]  # replicated topics only
    admin.topics["a1"] = (3, None, "id1-new")
    admin.topics["other"] = (1, None, "id3-new")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.recreated == frozenset({"a1"})
    _topics(source)
    assert source.recreated == frozenset()


def test_a_topic_id_not_read_is_compared_at_the_next_discovery_that_reads_it(tmp_path):
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1")}
    source = _source(tmp_path, admin)
    _topics(source)
    real = admin.describe_topics
    admin.describe_topics = lambda collection, request_timeout=None: {  # type: ignore[method-assign]
        name: _future(error=KafkaError(KafkaError._TIMED_OUT)) for name in collection.topic_names}
    admin.topics["a1"] = (3, None, "id1-new")
    assert _topics(source) == {"a1": 3}
    assert source.recreated == frozenset()
    admin.describe_topics = real  # type: ignore[method-assign]
    _topics(source)
    assert source.recreated == frozenset({"a1"})


def test_a_large_estate_reads_its_topic_ids_a_slice_at_a_time(tmp_path, monkeypatch):
    """Past TOPIC_ID_PARTITIONS_PER_DISCOVERY partitions each discovery reads the IDs of the next
    topics in turn (new topics' always), so every topic is read within a few discoveries and a
    recreated one is told when its turn comes."""
    monkeypatch.setattr("mirrorlag.kafka.source.TOPIC_ID_PARTITIONS_PER_DISCOVERY", 4)
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "a3": (3, None, "id3"), "a4": (1, None, "id4")}
    source = _source(tmp_path, admin)
    _topics(source)
    assert admin.described == [["a1", "a2", "a3", "a4"]]  # the first discovery: all new
    admin.described.clear()
    admin.topics["a4"] = (1, None, "id4-new")
    _topics(source)
    assert admin.described == [["a1", "a2"]] and source.recreated == frozenset()  # 5 partitions: the budget reached
    admin.topics["a5"] = (2, None, "id5")
    _topics(source)
    assert admin.described[1:] == [["a3", "a4"], ["a5"]]  # the next in turn, then the new topic
    assert source.recreated == frozenset({"a4"})
    _topics(source)
    assert admin.described[3:] == [["a5", "a1"]]  # from where it stopped, round again
    assert source.recreated == frozenset()


def _hide(tmp_path, answer: concurrent.futures.Future | None = None):
    """A source that knows a1 (3 partitions) and a2, then a listing that omits a1; the request
    naming a1 answers `answer` (None: the truth, that it exists)."""
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2")}
    source = _source(tmp_path, admin)
    assert _topics(source) == {"a1": 3, "a2": 2}
    admin.hidden = {"a1"}
    if answer is not None:
        admin.answers["a1"] = answer
    admin.described.clear()
    return admin, source


def test_a_topic_absent_from_the_listing_that_the_request_naming_it_describes_is_kept(tmp_path):
    admin, source = _hide(tmp_path)
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert admin.described[-1] == ["a1"]  # only the omitted topic is asked
    assert source.metadata_errors == 1  # a flapping listing shows
    assert source.unresolved == frozenset() and source.recreated == frozenset()
    assert _topics(source) == {"a1": 3, "a2": 2} and source.metadata_errors == 2
    admin.hidden = set()
    assert _topics(source) == {"a1": 3, "a2": 2} and source.metadata_errors == 2


@pytest.mark.parametrize("error", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._TIMED_OUT,
                                   KafkaError.LEADER_NOT_AVAILABLE])
def test_a_topic_absent_from_the_listing_whose_request_errs_is_kept_unresolved(tmp_path, error):
    admin, source = _hide(tmp_path, _future(error=KafkaError(error)))
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 1 and source.unresolved == frozenset({"a1"})
    del admin.answers["a1"]  # the next discovery's request answers: it exists
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 2 and source.unresolved == frozenset()


def test_a_topic_absent_from_the_listing_whose_request_is_refused_is_kept_unresolved(tmp_path):
    admin, source = _hide(tmp_path)

    def refused(collection, request_timeout=None):
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))
    admin.describe_topics = refused  # type: ignore[method-assign]
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.metadata_errors == 1 and source.unresolved == frozenset({"a1"})


def test_a_topic_absent_from_the_listing_whose_request_is_unanswered_in_time_is_kept(tmp_path, monkeypatch):
    pending: concurrent.futures.Future = concurrent.futures.Future()
    pending.set_running_or_notify_cancel()
    admin, source = _hide(tmp_path, pending)
    waited = []

    def deadline_passed(futures, timeout=None):  # no timing here: the deadline passes at once
        waited.append(timeout)
        return {f for f in futures if f.done()}, {f for f in futures if not f.done()}
    monkeypatch.setattr(concurrent.futures, "wait", deadline_passed)
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.unresolved == frozenset({"a1"}) and source.metadata_errors == 1
    assert waited == [source.timeout_s + 1]  # one wait for every request of the discovery


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID])
def test_a_topic_absent_from_the_listing_that_the_request_naming_it_says_does_not_exist_is_gone(tmp_path, code):
    admin, source = _hide(tmp_path, _future(error=KafkaError(code)))
    assert _topics(source) == {"a2": 2}
    assert source.metadata_errors == 0 and source.unresolved == frozenset()
    # Listed again: a new topic to this source, its ID read and nothing of the old partitions kept.
    admin.hidden, admin.answers = set(), {}
    admin.topics["a1"] = (1, None, "id1-new")
    assert _topics(source) == {"a1": 1, "a2": 2} and source.recreated == frozenset()


def test_an_absent_topic_whose_request_says_it_was_recreated_is_kept_and_named(tmp_path):
    admin, source = _hide(tmp_path)
    admin.topics["a1"] = (3, None, "id1-new")
    assert _topics(source) == {"a1": 3, "a2": 2}
    assert source.recreated == frozenset({"a1"})


def test_a_read_set_off_by_end_offsets_asks_only_those_ids_and_one_on_a_cadence_asks_all(tmp_path, monkeypatch):
    """discover(ids_of): the IDs of the known topics named (those whose end offset failed or went
    back) and of new topics, no others; without `cap_id_reads` (metadata on a cadence) a read on
    the cadence asks every known topic's ID, however many partitions."""
    monkeypatch.setattr("mirrorlag.kafka.source.TOPIC_ID_PARTITIONS_PER_DISCOVERY", 4)
    admin = FakeAdmin()
    admin.topics = {"a1": (3, None, "id1"), "a2": (2, None, "id2"), "a3": (3, None, "id3")}
    source = _source(tmp_path, admin)
    source.cap_id_reads = False
    _topics(source)
    admin.described.clear()
    admin.topics["a2"] = (2, None, "id2-new")
    admin.topics["a4"] = (1, None, "id4")
    source.discover(["a2", "gone"])
    assert admin.described == [["a2"], ["a4"]]  # the known topic named, then the new one
    assert source.recreated == frozenset({"a2"}) and source.ids_read == frozenset({"a2", "a4"})
    source.discover(())
    assert admin.described[2:] == []  # no ID at all
    admin.topics["a3"] = (3, None, "id3-new")
    source.discover()
    assert [sorted(asked) for asked in admin.described[2:]] == [["a1", "a2", "a3", "a4"]]  # 9 partitions > the cap: all
    assert source.recreated == frozenset({"a3"})
