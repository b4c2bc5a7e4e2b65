"""The replica of MM2's OffsetSyncStore, held to the cases of apache/kafka's OffsetSyncStoreTest
(the same syncs, the same translations), and to its sparse-sync invariants on random syncs."""

from hypothesis import given, settings, strategies as st

from mirrorlag.groups.sync_store import SYNCS_PER_PARTITION, Sync, SyncStore, translate, updated, upstream_of

TP = ("t", 0)


def _translate(store: SyncStore, g: int) -> int | None:
    """MM2's answer: None = OptionalLong.empty, -1 = older than every kept sync."""
    if not store.ready:
        return None
    slots = store.slots(*TP)
    if slots is None:
        return None
    t = translate(slots, g)
    return -1 if t.downstream is None else t.downstream


def _invariants_hold(slots: list[Sync]) -> bool:
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j + 1):
            ju, iu = slots[j].upstream, slots[i].upstream
            if ju == iu:
                continue
            low = ju + (1 << max(i - 2, 0))
            if low >= 0 and not low <= iu:
                return False
            high = ju + (1 << j) - (1 << i)
            if high >= 0 and not iu <= high:
                return False
    return True


def test_offset_translation():
    store = SyncStore()
    store.read_to_end()
    store.apply(*TP, 100, 200)
    assert _translate(store, 150) == 201  # one past the sync, never dead-reckoned
    store.apply(*TP, 150, 251)
    assert _translate(store, 150) == 251
    assert _translate(store, 5) == -1  # older than every sync
    store.apply(*TP, 200, 10)  # downstream reset
    assert _translate(store, 200) == 10
    store.apply(*TP, 20, 20)  # upstream reset clears the rest
    assert _translate(store, 20) == 20


def test_no_translation_before_the_store_has_read_to_its_end():
    store = SyncStore()
    assert _translate(store, 0) is None
    store.apply(*TP, 100, 200)
    assert _translate(store, 100) is None
    store.read_to_end()
    assert [_translate(store, g) for g in (0, 100, 200)] == [-1, 200, 201]


def test_past_offset_translation_keeps_the_syncs_mm2_keeps():
    store = SyncStore()
    offset = 0
    while offset <= 1000:
        store.apply(*TP, offset, offset)
        assert _invariants_hold(store.slots(*TP))
        offset += 10
    store.read_to_end()

    def sparse(sync_offset: int, previous: int) -> None:
        assert _translate(store, sync_offset - 1) == (-1 if previous == -1 else previous + 1)
        assert _translate(store, sync_offset) == sync_offset
        assert _translate(store, sync_offset + 1) == sync_offset + 1
        assert _translate(store, sync_offset + 2) == sync_offset + 1

    sparse(1000, -1)  # only the newest sync of the initial read is kept
    while offset <= 10000:
        store.apply(*TP, offset, offset)
        assert _invariants_hold(store.slots(*TP))
        offset += 10
    sparse(1000, -1)
    for sync_offset, previous in [(4840, 1000), (6760, 4840), (8680, 6760), (9160, 8680), (9640, 9160),
                                  (9880, 9640), (9940, 9880), (9970, 9940), (9990, 9970), (10000, 9990)]:
        sparse(sync_offset, previous)
    store.apply(*TP, 1500, 11000)  # an upstream rewind clears the history
    assert [_translate(store, g) for g in (1499, 1500, 2000)] == [-1, 11000, 11001]


def test_keeps_most_distinct_syncs():
    for step in (1, 3, 7, 15, 1023):
        slots = [Sync(0, 0)] * SYNCS_PER_PARTITION
        last = 1
        for offset in range(step, 20000, step):
            slots = updated(slots, Sync(offset, offset), read_to_end=True)
            assert slots[0].upstream == offset and slots[-1].upstream == 0
            count = 1 + sum(slots[i] is not slots[i - 1] for i in range(1, SYNCS_PER_PARTITION))
            assert count - last >= -1, f"expired more than one sync at {offset} (step {step})"
            last = count


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=300))
def test_invariants_and_monotone_translation_on_random_syncs(steps):
    slots = [Sync(0, 0)] * SYNCS_PER_PARTITION
    upstream = 0
    for s in steps:
        upstream += s
        slots = updated(slots, Sync(upstream, upstream * 2), read_to_end=True)
        assert _invariants_hold(slots)
    answers = [translate(slots, g).downstream for g in range(0, upstream + 2, max(1, upstream // 200))]
    known = [a for a in answers if a is not None]
    assert known == sorted(known)  # a fixed store translates monotonically


def test_a_target_offset_maps_back_to_the_least_source_offset_it_can_copy():
    slots = [Sync(100, 10)] * SYNCS_PER_PARTITION
    slots = updated(slots, Sync(500, 40), read_to_end=True)
    assert upstream_of(slots, 40) == 500
    assert upstream_of(slots, 41) == 501  # the checkpoint of a group past the newest sync
    assert upstream_of(slots, 25) == 115  # between two syncs: at least one source record per target record
    assert upstream_of(slots, 10) == 100
    assert upstream_of(slots, 9) is None  # below every kept sync
    assert upstream_of(None, 5) is None
