"""The target-progress translation (DESIGN §3): LRO >= U + (T - 1 - D), capped at the LEO - 1."""

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
