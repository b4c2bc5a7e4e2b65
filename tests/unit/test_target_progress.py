"""The target-progress translation (docs/design.md §3): LRO >= U + (T - 1 - D), capped at the LEO - 1."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from mirrorlag.feeds.target_progress import NONE, progress_lros


def lro(u: int, d: int, t: int, leo: int) -> int:
    (value,) = progress_lros(np.array([u]), np.array([d]), np.array([t]), np.array([leo])).tolist()
    return value


def test_target_records_after_the_sync_are_copies_of_later_upstream_records():
    assert lro(u=100, d=40, t=46, leo=200) == 105  # target 41..45: upstream 101..105 at least
    assert lro(u=100, d=40, t=41, leo=200) == 100  # nothing after the sync's own record


def test_capped_at_the_leo_snapshot_read_before_the_target():
    assert lro(u=100, d=40, t=500, leo=120) == 119


def test_no_evidence_where_it_proves_nothing():
    assert lro(u=-1, d=-1, t=50, leo=200) == NONE  # no sync
    assert lro(u=100, d=40, t=-1, leo=200) == NONE  # target unread
    assert lro(u=100, d=40, t=40, leo=200) == NONE  # the target is at or below the sync's record: truncated, recreated
    assert lro(u=100, d=40, t=46, leo=-1) == NONE  # LEO unread: nothing to cap at


def test_a_sync_beyond_the_leo_stays_the_sync():
    # The source went back below the sync (recreated): the sync's own offset, which the engine reads as RESET.
    assert lro(u=100, d=40, t=46, leo=50) == 100


@given(st.lists(st.booleans(), min_size=1, max_size=60), st.integers(0, 59), st.integers(0, 70), st.integers(0, 5))
def test_never_above_the_true_lro_and_exact_without_gaps(is_data, synced, copied_extra, appended_after):
    """A source log of data records and gaps (markers, aborted or compacted records); the mirror
    copied data records in order up to some point, one target record each; its newest sync was
    for one of them. The translation never passes the last copied data record, and equals it
    when no gap lies between the sync and that record."""
    data = [o for o, d in enumerate(is_data) if d]
    if not data:
        return
    s = min(synced, len(data) - 1)
    c = min(s + copied_extra, len(data) - 1)  # index of the last copied data record
    true_lro = data[c]
    leo = len(is_data) + appended_after
    value = lro(u=data[s], d=s, t=c + 1, leo=leo)
    assert data[s] <= value <= true_lro
    if all(is_data[data[s]:true_lro + 1]):
        assert value == true_lro


class _Target:
    """RemoteEndOffsets as the feed asks it: end offsets by (topic, partition), from a dict."""

    missing: frozenset = frozenset()
    error = None

    def __init__(self, ends: dict) -> None:
        self.ends = ends

    def read(self, topics, topic_of, partitions):
        return np.array([self.ends.get((topics[t], p), -1) for t, p in zip(topic_of.tolist(), partitions.tolist())],
                        np.int64)


def test_the_feed_lands_each_lro_on_its_row_also_where_partition_numbers_have_gaps():
    """Rows as the poller orders them: topic `a` (partitions 0, 1) from row 0, topic `b` listing
    only partitions 0, 2, 5 (metadata with gaps) from row 2. A sync for b's partition 3, which
    metadata does not list, is not asked; the target's answers land on the right rows, capped at
    each row's LEO - 1; a partition the target did not answer hands out the LRO it last proved."""
    import re

    from mirrorlag.config.policy import ReplicationPolicy
    from mirrorlag.config.settings import FlowSettings
    from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
    from mirrorlag.feeds.target_progress import TargetProgressFeed
    from mirrorlag.formats import OffsetSync, encode_offset_sync
    from mirrorlag.model import PartitionKey

    flow = FlowSettings("src", "dst", re.compile(".*"), re.compile(""), ReplicationPolicy())
    syncs = OffsetSyncsFeed("src", None, {"syncs": flow})
    for topic, p, u, d in (("a", 0, 10, 100), ("a", 1, 5, 50), ("b", 2, 7, 70), ("b", 3, 1, 1), ("b", 5, 0, 0)):
        syncs._apply("syncs", *encode_offset_sync(OffsetSync(topic, p, u, d)))
    rows = [PartitionKey("src", "dst", t, p) for t, p in (("a", 0), ("a", 1), ("b", 0), ("b", 2), ("b", 5))]
    leos = dict(zip(rows, (20, 9, 3, 100, 100)))
    target = _Target({("src.a", 0): 104, ("src.a", 1): 55, ("src.b", 2): 80, ("src.b", 5): 3, ("src.b", 3): 999})
    feed = TargetProgressFeed("dst", target, [flow], {flow.id: syncs})  # type: ignore[arg-type]
    feed.use_topic_rows(lambda flow_id, topic: {"a": (0, range(2)), "b": (2, (0, 2, 5))}.get(topic))
    feed.see_leos(leos, rows)
    assert dict(feed.offsets()) == {rows[0]: 13, rows[1]: 8, rows[3]: 16, rows[4]: 2}
    target.ends = {("src.a", 0): 106}  # the rest unanswered this poll
    feed.see_leos(leos, rows)  # each poll
    assert dict(feed.offsets()) == {rows[0]: 15, rows[1]: 8, rows[3]: 16, rows[4]: 2}


def test_a_sync_that_showed_duplicates_gets_no_target_progress_until_the_next():
    u, d, t, leo = (np.array(v) for v in ([100, 100, -1], [40, 40, -1], [46, 46, 9], [200, 200, 200]))
    assert progress_lros(u, d, t, leo, np.array([0, 1, 1], np.int8)).tolist() == [105, NONE, NONE]


@given(st.integers(0, 50), st.integers(0, 20), st.integers(1, 10), st.integers(0, 30), st.integers(0, 10),
       st.integers(0, 30))
def test_after_a_sync_that_showed_duplicates_more_of_them_never_read_above_the_truth(
        u0, copied, twice, after, again, appended):
    """From a sync (u0, u0): `copied` records, a retried batch of `twice` landing twice, the sync
    (U', D') that shows them (D' - D > U' - U), then `after` records copied and the retries going
    on (`again` more target records written twice) before the next sync: the translation through
    (U', D') would read `again` above the truth; the flag gives nothing (the sync's U' stands)."""
    upstream = u0 + copied + twice  # the sync's record, the last of the retried batch
    downstream = u0 + copied + 2 * twice
    assert downstream - u0 > upstream - u0
    truth = upstream + after
    leo = truth + 1 + appended
    target = downstream + 1 + after + again
    args = (np.array([upstream]), np.array([downstream]), np.array([target]), np.array([leo]))
    (value,) = progress_lros(*args, np.array([1], np.int8)).tolist()
    assert value == NONE and upstream <= truth
    (unflagged,) = progress_lros(*args).tolist()
    assert unflagged == min(truth + again, leo - 1)


def _identity_flow(source: str, include: str):
    import re

    from mirrorlag.config.policy import ReplicationPolicy
    from mirrorlag.config.settings import FlowSettings
    return FlowSettings(source, "dst", re.compile(include), re.compile(""), ReplicationPolicy(identity=True))


class _AskedTarget(_Target):
    def __init__(self, ends: dict) -> None:
        super().__init__(ends)
        self.asked: list[tuple[str, int]] = []

    def read(self, topics, topic_of, partitions):
        self.asked += [(topics[t], p) for t, p in zip(topic_of.tolist(), partitions.tolist())]
        return super().read(topics, topic_of, partitions)


def test_a_remote_topic_two_flows_write_is_off_for_both_and_never_asked():
    """src->dst and two->dst mirror `orders` under the identity policy: dst's `orders` holds both
    flows' copies, so neither's sync translates its end offset. It is not asked at all (one
    partition twice in one ListOffsets is refused), and /status names it; `payments`, which only
    src->dst mirrors, is on, but not for a partition whose sync showed duplicates."""
    from mirrorlag.config.writers import RemoteWriters
    from mirrorlag.feeds.offset_syncs import OffsetSyncsFeed
    from mirrorlag.feeds.target_progress import TargetProgressFeed
    from mirrorlag.formats import OffsetSync, encode_offset_sync
    from mirrorlag.interfaces import FeedOff
    from mirrorlag.model import PartitionKey

    first, second = _identity_flow("src", "orders|payments"), _identity_flow("two", "orders")
    syncs = OffsetSyncsFeed("src", None, {"syncs.src": first, "syncs.two": second})
    for sync_topic, topic, p, u, d in (("syncs.src", "orders", 0, 10, 10), ("syncs.two", "orders", 0, 4, 30),
                                       ("syncs.src", "payments", 0, 5, 5), ("syncs.src", "payments", 1, 5, 5),
                                       ("syncs.src", "payments", 1, 8, 10)):  # p1: 2 target records twice
        syncs._apply(sync_topic, *encode_offset_sync(OffsetSync(topic, p, u, d)))
    rows = [PartitionKey("src", "dst", "orders", 0), PartitionKey("src", "dst", "payments", 0),
            PartitionKey("src", "dst", "payments", 1), PartitionKey("two", "dst", "orders", 0)]
    where = {("src", "orders"): (0, range(1)), ("src", "payments"): (1, range(2)), ("two", "orders"): (3, range(1))}
    target = _AskedTarget({("orders", 0): 45, ("payments", 0): 9, ("payments", 1): 14})
    feed = TargetProgressFeed("dst", target, [first, second], {first.id: syncs, second.id: syncs},  # type: ignore[arg-type]
                              writers=RemoteWriters("dst", [first, second]))
    feed.use_topic_rows(lambda flow_id, topic: where.get((flow_id.source, topic)))
    feed.see_leos(dict(zip(rows, (100, 100, 100, 100))), rows)
    assert dict(feed.offsets()) == {rows[1]: 8}  # payments 0: 5 + 3; payments 1: its sync showed duplicates
    assert sorted(target.asked) == [("payments", 0), ("payments", 1)]
    health = feed.health()
    assert health.off == (FeedOff(("src->dst", "two->dst"), ("orders",),
                                  "more than one writer feeds these topics on dst: src->dst, two->dst"),)
    assert health.topics == ("payments",)


class _Recording:
    """RemoteEndOffsets with its one request recorded instead of sent (the dedupe is pure)."""

    @staticmethod
    def make(ends: dict):
        from mirrorlag.kafka.remote import RemoteEndOffsets

        class Recording(RemoteEndOffsets):
            requests: list = []

            def _read(self, topics, topic_of, partitions):
                asked = [(topics[t], p) for t, p in zip(topic_of.tolist(), partitions.tolist())]
                self.requests.append(asked)
                return np.array([ends.get(tp, -1) for tp in asked], np.int64)

        return Recording("dst", None, 1.0, 250)  # type: ignore[arg-type]


@given(st.lists(st.tuples(st.sampled_from(["orders", "clicks"]), st.integers(0, 3)), max_size=20),
       st.lists(st.sampled_from(["orders", "clicks"]), max_size=4))
def test_a_list_offsets_request_never_names_a_partition_twice(asked, names):
    """Whatever the caller names (one topic under two indices, a partition twice), the request
    carries each partition once and every position gets its partition's answer."""
    names = ["orders", "clicks", *names]  # every name at least twice
    ends = {(t, p): 100 * i + p for i, t in enumerate(("orders", "clicks")) for p in range(4)}
    remote = _Recording.make(ends)
    last = {t: i for i, t in enumerate(names)}
    topic_of = np.array([last[t] if k % 2 else names.index(t) for k, (t, _) in enumerate(asked)], np.int64)
    partitions = np.array([p for _, p in asked], np.int64)
    got = remote.read(names, topic_of, partitions)
    (request,) = remote.requests
    assert len(request) == len(set(request)) == len(set(asked))
    assert got.tolist() == [ends[names[t], p] for t, p in zip(topic_of.tolist(), partitions.tolist())]
