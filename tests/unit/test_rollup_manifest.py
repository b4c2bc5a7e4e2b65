"""What a run does with a day, from its inputs as listed and its manifest (rollup/manifest.py)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from mirrorlag.rollup.errors import RollupError
from mirrorlag.rollup.manifest import Action, Manifest, Segment, day_end_ms, decide, is_final, trend_dependents

DAY = date(2024, 3, 10)
END = day_end_ms(DAY)
M = 60_000
A, B = Segment("part-a.parquet", 1000, END - 600 * M), Segment("part-b.parquet", 2000, END + 5 * M)


def previous(*segments: Segment, final: bool = True, gap: float = 60.0) -> Manifest:
    return Manifest(DAY, "r0", final, segments, {"flow_daily": ("f.parquet",)}, gap, END)


def d(prev, segs, now_ms=END + 120 * M, asked=False, force=False, gap=60.0):
    return decide(DAY, prev, segs, now_ms=now_ms, settle_ms=60 * M, max_gap_seconds=gap, asked=asked, force=force)


def test_round_trip_and_a_bad_manifest_is_one_clear_error():
    m = previous(A, B)
    assert Manifest.from_json(m.to_json(), "x") == m and m.bytes == 3000 and m.newest_ms == B.mtime_ms
    with pytest.raises(RollupError, match="^out/_manifests/x.json: not a rollup manifest .*delete it"):
        Manifest.from_json('{"format": 1, "day": "2024-03-10"}', "out/_manifests/x.json")


def test_final_once_over_and_settled():
    assert not is_final(DAY, [A], END - 1, 0)  # not over yet
    assert not is_final(DAY, [A, B], END + 30 * M, 60 * M)  # newest segment 25 min old
    assert is_final(DAY, [A, B], END + 65 * M, 60 * M)


def test_new_changed_unchanged():
    assert d(None, [A]).action is Action.ROLL and d(None, [A]).final
    assert d(previous(A), [A, B]).action is Action.ROLL  # a late segment
    assert d(previous(A), [A]).action is Action.UNCHANGED
    assert d(previous(A), [A], asked=True).action is Action.ROLL  # --date: again, whatever its manifest
    assert d(previous(A), [A], gap=120.0).action is Action.ROLL
    assert d(None, []).action is Action.NONE and d(previous(A), []).action is Action.KEEP


def test_provisional_until_settled_then_rolled_again_to_be_final():
    early = d(None, [A, B], now_ms=END + 10 * M)
    assert early.action is Action.ROLL and not early.final
    assert d(previous(A, B, final=False), [A, B], now_ms=END + 20 * M).action is Action.UNCHANGED
    later = d(previous(A, B, final=False), [A, B])
    assert later.action is Action.ROLL and later.final and later.why == "now final"


def test_fewer_inputs_keep_the_day_or_refuse_unless_forced():
    shrunk = Segment(B.name, 1500, B.mtime_ms)
    for segs in ([A], [A, shrunk]):
        kept = d(previous(A, B), segs)
        assert kept.action is Action.KEEP and "gone or smaller" in kept.why
        assert d(previous(A, B), segs, asked=True).action is Action.REFUSE
        assert d(previous(A, B), segs, asked=True, force=True).action is Action.ROLL


def test_trend_dependents_are_the_committed_days_within_the_trend_window_after():
    committed = [DAY + timedelta(days=i) for i in range(-3, 70)]
    deps = trend_dependents([DAY], committed)
    assert deps == [DAY + timedelta(days=i) for i in range(1, 56)]  # the growth rule reads 8 weeks
    assert trend_dependents([DAY, DAY + timedelta(days=2)], committed)[:2] == [DAY + timedelta(days=1), DAY + timedelta(days=3)]
    assert trend_dependents([], committed) == []


def test_the_groups_segments_are_inputs_too():
    G = Segment("part-g.parquet", 300, END + 2 * M)
    with_groups = Manifest(DAY, "r0", True, (A, B), {"flow_daily": ("f.parquet",)}, 60.0, END, (G,))
    assert Manifest.from_json(with_groups.to_json(), "x") == with_groups
    # A manifest from before the groups' history was an input reads as naming none.
    old = previous(A, B).to_json().replace('"group_segments": [],', "")
    assert '"group_segments"' not in old and Manifest.from_json(old, "x").group_segments == ()
    # The receipt for _groups/date=DAY/ names the group segments as its segments.
    assert with_groups.groups_receipt().segments == (G,) and with_groups.groups_receipt().group_segments == ()

    def dg(prev, groups, **kw):
        return decide(DAY, prev, [A, B], now_ms=END + 120 * M, settle_ms=60 * M, max_gap_seconds=60.0,
                      asked=False, force=False, group_segments=groups, **kw)

    assert dg(with_groups, [G]).action is Action.UNCHANGED
    late = dg(previous(A, B), [G])
    assert late.action is Action.ROLL and late.why == "the consumer groups' inputs changed"
    gone = dg(with_groups, [])
    assert gone.action is Action.KEEP and "1 group segments" in gone.why
    # The settle time counts the groups' newest segment too.
    assert not dg(previous(A, B), [Segment("part-h.parquet", 1, END + 100 * M)]).final
