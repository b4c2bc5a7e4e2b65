import threading

from mirrorlag import ReplicationTracker
from mirrorlag.model import FlowId


def test_newest_offset_per_partition_and_mean_size():
    tracker = ReplicationTracker("A", "B")
    assert tracker.flow == FlowId("A", "B")
    assert tracker.mean_record_bytes() is None
    tracker.replicated("t", 0, 5, 100)
    tracker.replicated("t", 0, 6, 300)
    tracker.replicated("t", 1, 0)
    assert tracker.offsets() == {("t", 0): 6, ("t", 1): 0}
    assert tracker.mean_record_bytes() == 200.0


def test_offsets_returns_a_copy():
    tracker = ReplicationTracker("A", "B")
    tracker.replicated("t", 0, 1)
    copy = tracker.offsets()
    tracker.replicated("t", 0, 2)
    assert copy == {("t", 0): 1}


def test_concurrent_callers_never_corrupt_the_map():
    tracker = ReplicationTracker("A", "B")

    def feed(partition: int) -> None:
        for offset in range(20_000):
            tracker.replicated("t", partition, offset, 10)

    threads = [threading.Thread(target=feed, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tracker.offsets() == {("t", p): 19_999 for p in range(4)}


def test_forget():
    tracker = ReplicationTracker("A", "B")
    tracker.replicated("t", 0, 1)
    tracker.forget("t", 0)
    tracker.forget("t", 9)  # unknown: no error
    assert tracker.offsets() == {}


def test_store_for_and_sized_feed_the_same_figures_as_replicated():
    """The lean per-record form (a topic's dict's own store) and per-batch sizes: the poller sees
    the same offsets and the same mean size as with replicated()."""
    lean, plain = ReplicationTracker("A", "B"), ReplicationTracker("A", "B")
    store = lean.store_for("t")
    for offset, size in ((5, 100), (6, 300)):
        store(0, offset)
        plain.replicated("t", 0, offset, size)
    lean.sized(2, 400)
    store(1, 0)
    plain.replicated("t", 1, 0)
    assert lean.offsets() == plain.offsets() == {("t", 0): 6, ("t", 1): 0}
    assert lean.by_topic() == plain.by_topic() == {"t": {0: 6, 1: 0}}
    assert lean.mean_record_bytes() == plain.mean_record_bytes() == 200.0
    lean.forget("t", 0)
    assert lean.offsets() == {("t", 1): 0}  # the store writes the very dict forget() and offsets() see
    store(0, 7)
    assert lean.store_for("t") == store and lean.offsets() == {("t", 0): 7, ("t", 1): 0}


def test_by_topic_is_a_copy_and_topics_appear_from_any_thread():
    tracker = ReplicationTracker("A", "B")
    tracker.replicated("t", 0, 1)
    copy = tracker.by_topic()
    tracker.replicated("t", 0, 2)
    tracker.replicated("u", 3, 9)
    assert copy == {"t": {0: 1}}

    def feed(topic: str) -> None:
        for offset in range(2_000):
            tracker.replicated(f"{topic}-{offset % 50}", offset % 7, offset)

    threads = [threading.Thread(target=feed, args=(name,)) for name in "xyz"]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        tracker.by_topic()  # never "dictionary changed size during iteration"
    for thread in threads:
        thread.join()
    topics = tracker.by_topic()
    assert len(topics) == 2 + 3 * 50
    assert topics["x-49"] == {p: max(o for o in range(2_000) if o % 50 == 49 and o % 7 == p) for p in range(7)}
