from mirrorlag.poll.lro_cache import LroCache
from mirrorlag.model import LroReading, LroTable, PartitionKey

K1 = PartitionKey("A", "B", "t", 0)
K2 = PartitionKey("A", "B", "t", 1)


def test_new_offsets_are_fresh_and_stamped_with_the_poll_time():
    cache = LroCache(ttl_s=20)
    readings = cache.update({"callback": {K1: 5, K2: 9}}, now=100.0)
    assert readings[K1].offset == 5 and readings[K1].changed_at == 100.0
    assert not readings[K1].stale and readings[K1].feed == "callback"


def test_ttl_expiry_marks_stale_but_keeps_the_offset():
    cache = LroCache(ttl_s=20)
    cache.update({"callback": {K1: 5}}, now=100.0)
    readings = cache.update({}, now=121.0)
    assert readings[K1].stale and readings[K1].offset == 5
    assert cache.evictions_total == 1
    assert len(cache) == 1  # stale, never forgotten


def test_an_unchanged_offset_does_not_refresh_the_ttl():
    cache = LroCache(ttl_s=20)
    cache.update({"callback": {K1: 5}}, now=100.0)
    cache.update({"callback": {K1: 5}}, now=115.0)
    reading = cache.update({"callback": {K1: 5}}, now=121.0)[K1]
    assert reading.stale and reading.changed_at == 100.0


def test_a_moving_offset_becomes_fresh_again_after_going_stale():
    cache = LroCache(ttl_s=20)
    cache.update({"callback": {K1: 5}}, now=100.0)
    assert cache.update({}, now=130.0)[K1].stale
    reading = cache.update({"callback": {K1: 6}}, now=131.0)[K1]
    assert not reading.stale and reading.offset == 6 and reading.changed_at == 131.0
    assert cache.evictions_total == 1


def test_each_expiry_is_counted_once():
    cache = LroCache(ttl_s=10)
    cache.update({"callback": {K1: 1}}, now=0.0)
    cache.update({"callback": {K2: 1}}, now=50.0)  # K1 expires in this update
    cache.update({}, now=55.0)
    assert cache.evictions_total == 1


def test_a_feed_may_step_back_but_the_highest_feed_wins():
    cache = LroCache(ttl_s=20)
    assert cache.update({"offset-syncs": {K1: 100}}, now=1.0)[K1].offset == 100
    # MM2 restarted from an older commit: the only feed steps back, and so does the LRO.
    assert cache.update({"offset-syncs": {K1: 80}}, now=2.0)[K1].offset == 80
    # Two feeds: the higher one wins, whichever it is.
    reading = cache.update({"offset-syncs": {K1: 80}, "connect-offsets": {K1: 90}}, now=3.0)[K1]
    assert (reading.offset, reading.feed) == (90, "connect-offsets")
    reading = cache.update({"offset-syncs": {K1: 95}, "connect-offsets": {K1: 90}}, now=4.0)[K1]
    assert (reading.offset, reading.feed) == (95, "offset-syncs")


def test_a_partition_no_feed_mentions_keeps_its_last_value():
    cache = LroCache(ttl_s=20)
    cache.update({"connect-offsets": {K1: 7}}, now=1.0)
    assert cache.update({"connect-offsets": {}}, now=2.0)[K1].offset == 7  # e.g. a tombstone


def test_forget_drops_partitions():
    cache = LroCache(ttl_s=20)
    cache.update({"callback": {K1: 1, K2: 2}}, now=0.0)
    cache.forget([K1])
    assert set(cache.update({}, now=1.0)) == {K2}


def test_forgotten_partitions_leave_new_ones_enter_and_every_key_keeps_its_own_value():
    cache = LroCache(ttl_s=20)
    keys = [PartitionKey("A", "B", "t", p) for p in range(40)]
    cache.update({"callback": {k: p for p, k in enumerate(keys)}}, now=0.0)
    cache.forget(keys[5:15])
    assert len(cache) == 30
    fresh = [PartitionKey("A", "B", "u", p) for p in range(25)]
    table = cache.update({"offset-syncs": {k: 1000 + p for p, k in enumerate(fresh)}}, now=1.0)
    assert len(cache) == len(table) == 55
    expected = {k: (p, "callback", 0.0) for p, k in enumerate(keys) if not 5 <= p < 15}
    expected |= {k: (1000 + p, "offset-syncs", 1.0) for p, k in enumerate(fresh)}
    assert {k: (r.offset, r.feed, r.changed_at) for k, r in table.items()} == expected
    assert not any(r.stale for r in table.values())


def test_a_table_is_frozen_at_its_poll():
    cache = LroCache(ttl_s=20)
    first = cache.update({"callback": {K1: 5}}, now=1.0)
    cache.update({"callback": {K1: 6, K2: 1}}, now=2.0)
    cache.forget([K1])
    assert dict(first) == {K1: LroReading(5, "callback", 1.0, False)}
    assert dict(cache.update({}, now=3.0)) == {K2: LroReading(1, "callback", 2.0, False)}


def test_aligned_gives_the_readings_as_columns_in_the_keys_order():
    cache = LroCache(ttl_s=20)
    cache.update({"callback": {K1: 5}}, now=1.0)
    table = cache.update({"offset-syncs": {K2: 9}}, now=30.0)  # K1 expired
    keys = [K2, PartitionKey("A", "B", "t", 7), K1]
    for _ in range(2):  # the second time from the memo
        known, offset, changed, stale, feed, names = table.aligned(keys)
        assert known.tolist() == [True, False, True]
        assert offset.tolist() == [9, 0, 5] and changed.tolist() == [30.0, 0.0, 1.0]
        assert stale.tolist() == [False, False, True] and names_of(feed, names) == ["offset-syncs", None, "callback"]
    assert LroTable.of(dict(table)).aligned(keys)[1].tolist() == [9, 0, 5]
    *columns, names = LroCache(1).update({}, 0.0).aligned(keys)
    assert [a.tolist() for a in columns] == [[False] * 3, [0] * 3, [0.0] * 3, [False] * 3, [-1] * 3] and names == ()


def names_of(codes, names):
    return [names[c] if c >= 0 else None for c in codes.tolist()]


def test_the_polls_keys_decide_which_partitions_hold_an_lro():
    cache = LroCache(ttl_s=20)
    junk = PartitionKey("A", "B", "deleted", 0)
    table = cache.update({"offset-syncs": {K1: 5, junk: 9}}, now=1.0, keys=[K1, K2])
    assert dict(table) == {K1: LroReading(5, "offset-syncs", 1.0, False)} and len(cache) == 1
    # K1 leaves the poll's partitions (its topic was deleted): its LRO goes with it, so a topic
    # created again under the name starts without the old log's LRO.
    cache.update({"offset-syncs": {K1: 5}}, now=2.0, keys=[K2])
    assert len(cache) == 0
    table = cache.update({"offset-syncs": {K2: 3}}, now=3.0, keys=[K2, K1])
    assert dict(table) == {K2: LroReading(3, "offset-syncs", 3.0, False)}


def test_rows_follow_a_new_key_order_with_their_values():
    cache = LroCache(ttl_s=20)
    keys = [PartitionKey("A", "B", "t", p) for p in range(6)]
    cache.update({"callback": {k: 10 + p for p, k in enumerate(keys)}}, now=1.0, keys=keys)
    reordered = [keys[4], PartitionKey("A", "B", "u", 0), keys[1], keys[5]]
    table = cache.update({}, now=2.0, keys=reordered)
    assert {k.partition: r.offset for k, r in table.items() if k.topic == "t"} == {4: 14, 1: 11, 5: 15}
    assert reordered[1] not in table
    known, offset, changed, stale, feed, names = table.aligned(sorted(reordered))  # t/1, t/4, t/5, u/0
    assert known.tolist() == [True, True, True, False] and offset.tolist() == [11, 14, 15, 0]
    assert changed.tolist() == [1.0, 1.0, 1.0, 0.0] and names_of(feed, names) == ["callback"] * 3 + [None]


def test_the_alignment_is_kept_while_the_partitions_stay():
    cache = LroCache(ttl_s=20)
    keys = [K2, K1]
    engine_order = sorted(keys)
    first = cache.update({"callback": {K1: 1}}, now=1.0, keys=list(keys))
    first.aligned(engine_order)
    memo = first._memo[2]
    second = cache.update({"callback": {K1: 2, K2: 7}}, now=2.0, keys=list(keys))  # a new, equal list
    known, offset, *_ = second.aligned(engine_order)
    assert second._memo[2] is memo  # looked up once, not once per poll
    assert known.tolist() == [True, True] and offset.tolist() == [2, 7]


def test_keys_in_the_caches_own_order_need_no_row_per_key():
    cache = LroCache(ttl_s=20)
    keys = [K1, K2]  # sorted, as one flow's poll lists them and the engine keeps its rows
    table = cache.update({"callback": {K2: 4}}, now=1.0, keys=list(keys))
    known, offset, *_ = table.aligned(sorted(keys))
    assert table._memo[2] is None  # no row per key was kept
    assert known.tolist() == [False, True] and offset.tolist() == [0, 4]


def test_rows_in_finds_kept_keys_by_identity_and_equal_copies_by_equality():
    from mirrorlag.model import rows_in

    old = [PartitionKey("A", "B", "t", p) for p in range(6)]
    copy_of_2 = PartitionKey("A", "B", "t", 2)  # equal, another object
    new = [old[4], PartitionKey("A", "B", "u", 0), copy_of_2, old[0], old[5]]
    assert rows_in(old, new).tolist() == [4, -1, 2, 0, 5]
    assert rows_in([], new).tolist() == [-1] * 5 and rows_in(old, []).tolist() == []
    fresh = [PartitionKey(*k) for k in reversed(old)]  # every key built anew
    assert rows_in(old, fresh).tolist() == [5, 4, 3, 2, 1, 0]


def test_forget_keeps_the_row_and_a_new_offset_enters_as_new():
    """A RESET (or a changed topic ID) drops the old log's LRO but not the partition: its row stays
    in the poll's key order, empty until a feed reports an offset of the new log."""
    cache = LroCache(ttl_s=20)
    keys = (K1, K2)
    cache.update({"offset-syncs": {K1: 99, K2: 50}}, now=0.0, keys=keys)
    cache.forget([K1, PartitionKey("A", "B", "other", 0)])  # a key without a row is ignored
    table = cache.update({}, now=1.0, keys=keys)
    assert set(table) == {K2} and len(cache) == 1
    table = cache.update({"offset-syncs": {K1: 3}}, now=2.0, keys=keys)
    assert (table[K1].offset, table[K1].changed_at, table[K1].stale) == (3, 2.0, False)
    cache.forget([])
    assert len(cache) == 2


def test_an_old_record_is_old_evidence_and_a_new_one_counts_from_the_poll():
    # docs/design.md §3: read at start, a sync written an hour ago is an hour old (and stale), not fresh;
    # one written moments ago counts from the poll (brokers' clocks must not make it look older).
    c = LroCache(ttl_s=20.0)
    t = c.update({"offset-syncs": {K1: 10, K2: 20}}, now=5_000.0,
                 written_at={"offset-syncs": {K1: 1_400.0, K2: 4_995.0}})
    assert t[K1] == LroReading(10, "offset-syncs", 1_400.0, True)
    assert t[K2] == LroReading(20, "offset-syncs", 5_000.0, False)
    # Later, a record written before the previous poll (a feed that read it late) changed then.
    t = c.update({"offset-syncs": {K1: 11, K2: 21}}, now=5_015.0,
                 written_at={"offset-syncs": {K1: 4_990.0, K2: 5_010.0}})
    assert t[K1] == LroReading(11, "offset-syncs", 4_990.0, True)
    assert t[K2] == LroReading(21, "offset-syncs", 5_015.0, False)
    # Only the feed that won is dated by its own records; an unchanged value keeps its time.
    t = c.update({"offset-syncs": {K1: 11}, "callback": {K2: 22}}, now=5_030.0,
                 written_at={"offset-syncs": {K2: 100.0}})
    assert t[K1] == LroReading(11, "offset-syncs", 4_990.0, True)
    assert t[K2] == LroReading(22, "callback", 5_030.0, False)


def test_offsets_handed_as_poll_rows_read_as_a_mapping_would():
    """A feed may hand its LROs as an array over the poll's rows (PollRows); the cache then reads
    the array, and must come to exactly what the same offsets as a dict give."""
    import numpy as np

    from mirrorlag.interfaces import NO_OFFSET, PollRows

    rows = tuple(PartitionKey("A", "B", "t", p) for p in range(5))
    offsets = np.array([7, NO_OFFSET, 0, 12, NO_OFFSET], np.int64)
    as_rows, as_dict = PollRows(rows, offsets), {rows[0]: 7, rows[2]: 0, rows[3]: 12}
    assert dict(as_rows) == as_dict and len(as_rows) == 3 and as_rows.get(rows[1]) is None
    for feeds in ({"target-progress": as_rows, "offset-syncs": {rows[0]: 9, rows[1]: 3}},
                  {"target-progress": as_dict, "offset-syncs": {rows[0]: 9, rows[1]: 3}}):
        table = LroCache(ttl_s=20).update(feeds, now=100.0, keys=rows)
        got = {k: (r.offset, r.feed) for k, r in table.items()}
        assert got == {rows[0]: (9, "offset-syncs"), rows[1]: (3, "offset-syncs"), rows[2]: (0, "target-progress"),
                       rows[3]: (12, "target-progress")}
    other = PollRows(rows, np.array([NO_OFFSET, 4, NO_OFFSET, NO_OFFSET, 8], np.int64))
    assert dict(as_rows.merged(other)) == {**as_dict, rows[1]: 4, rows[4]: 8}


def test_fill_gives_an_lro_only_where_no_feed_has_one():
    cache = LroCache(ttl_s=20)
    cache.update({"offset-syncs": {K1: 5}}, now=100.0, keys=[K1, K2])
    table = cache.fill("log-start", {K1: 9, K2: 3}, now=100.0)
    assert (table[K1].offset, table[K1].feed) == (5, "offset-syncs")  # a feed's own LRO stands
    assert (table[K2].offset, table[K2].feed, table[K2].changed_at) == (3, "log-start", 100.0)
    # The log start moves (retention): the filled value follows; a feed's first LRO replaces it.
    assert cache.fill("log-start", {K2: 7}, now=115.0)[K2].offset == 7
    table = cache.update({"offset-syncs": {K1: 5, K2: 8}}, now=130.0, keys=[K1, K2])
    assert (table[K2].offset, table[K2].feed) == (8, "offset-syncs")
    assert cache.fill("log-start", {K2: 9}, now=130.0)[K2].offset == 8


def test_backdate_dates_an_lro_earlier_never_later():
    cache = LroCache(ttl_s=20)
    cache.update({}, now=100.0, keys=[K1, K2])
    cache.fill("log-start", {K1: -1, K2: 4}, now=100.0)
    table = cache.backdate("log-start", {K1: 40.0, K2: 150.0}, now=100.0)
    assert (table[K1].changed_at, table[K1].stale) == (40.0, True)
    assert (table[K2].changed_at, table[K2].stale) == (100.0, False)
    # Another feed's LRO is dated by that feed alone.
    cache.update({"offset-syncs": {K2: 5}}, now=110.0, keys=[K1, K2])
    assert cache.backdate("log-start", {K2: 20.0}, now=110.0)[K2].changed_at == 110.0
