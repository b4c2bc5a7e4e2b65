from mirrorlag.lro_cache import LroCache
from mirrorlag.model import PartitionKey

K1 = PartitionKey("A", "B", "t", 0)
K2 = PartitionKey("A", "B", "t", 1)


def test_new_offsets_are_fresh_and_stamped_with_the_poll_time():
    cache = LroCache(ttl_s=20)
    assert cache.apply("callback", {K1: 5, K2: 9}, now=100.0) == 2
    readings = cache.readings(now=100.0)
    assert readings[K1].offset == 5 and readings[K1].changed_at == 100.0
    assert not readings[K1].stale and readings[K1].feed == "callback"


def test_ttl_expiry_marks_stale_but_keeps_the_offset():
    cache = LroCache(ttl_s=20)
    cache.apply("callback", {K1: 5}, now=100.0)
    readings = cache.readings(now=121.0)
    assert readings[K1].stale and readings[K1].offset == 5
    assert cache.evictions_total == 1
    assert len(cache) == 1  # stale, never forgotten


def test_an_unchanged_offset_does_not_refresh_the_ttl():
    cache = LroCache(ttl_s=20)
    cache.apply("callback", {K1: 5}, now=100.0)
    assert cache.apply("callback", {K1: 5}, now=115.0) == 0
    assert cache.readings(now=121.0)[K1].stale
    assert cache.readings(now=121.0)[K1].changed_at == 100.0


def test_a_moving_offset_becomes_fresh_again_after_going_stale():
    cache = LroCache(ttl_s=20)
    cache.apply("callback", {K1: 5}, now=100.0)
    assert cache.readings(now=130.0)[K1].stale
    cache.apply("callback", {K1: 6}, now=131.0)
    reading = cache.readings(now=131.0)[K1]
    assert not reading.stale and reading.offset == 6 and reading.changed_at == 131.0
    assert cache.evictions_total == 1


def test_evictions_are_counted_even_when_expired_during_apply():
    cache = LroCache(ttl_s=10)
    cache.apply("callback", {K1: 1}, now=0.0)
    cache.apply("callback", {K2: 1}, now=50.0)  # K1 expires inside this apply
    assert cache.evictions_total == 1


def test_same_feed_may_step_back_other_feed_only_wins_when_higher():
    cache = LroCache(ttl_s=20)
    cache.apply("offset-syncs", {K1: 100}, now=1.0)
    cache.apply("offset-syncs", {K1: 80}, now=2.0)  # MM2 restarted from an older commit
    assert cache.readings(now=2.0)[K1].offset == 80
    cache.apply("connect-offsets", {K1: 70}, now=3.0)
    assert cache.readings(now=3.0)[K1].offset == 80
    cache.apply("connect-offsets", {K1: 90}, now=4.0)
    reading = cache.readings(now=4.0)[K1]
    assert (reading.offset, reading.feed) == (90, "connect-offsets")


def test_forget_drops_partitions():
    cache = LroCache(ttl_s=20)
    cache.apply("callback", {K1: 1, K2: 2}, now=0.0)
    cache.forget([K1])
    assert set(cache.readings(now=1.0)) == {K2}
