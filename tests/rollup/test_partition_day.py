"""The per-partition kernel on its own (no Spark): the edge cases a day's window pass had rules
for, through the real map side and merge (partials.py)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from mirrorlag.rollup import buckets, partials
from mirrorlag.rollup.schema import GONE, IN_SYNC, STALLED, STATE_CODES, UNRECOGNIZED

H = 3_600_000
START = 1_700_000_000_000 - 1_700_000_000_000 % (24 * H)
END = START + 24 * H
CAP = 60_000
LAGGING = STATE_CODES["LAGGING"]
NAMES = {code: name for name, code in STATE_CODES.items()}
EDGES = buckets.exact_edges()


def rows(samples: list[tuple[int | None, int, int | None]], topic: str = "t", partition: int = 0,
         writer: str | None = None, interval_ms: int | None = None) -> pa.Table:
    """samples: (ts_ms or None, state code, record lag or None) of one partition; time lag = record lag * 10;
    `writer` and `interval_ms` on every row (None: as written before rows had them)."""
    lags = [lag for *_, lag in samples]
    return pa.table({
        "source": ["A"] * len(samples), "target": ["B"] * len(samples), "topic": [topic] * len(samples),
        "partition": pa.array([partition] * len(samples), pa.int32()),
        "ts": pa.array([ts for ts, *_ in samples], pa.timestamp("ms", tz="UTC")),
        "state": [NAMES.get(code, "WEIRD") for _, code, _ in samples],
        "record_lag": pa.array(lags, pa.int64()),
        "time_lag_ms": pa.array([None if lag is None else lag * 10 for lag in lags], pa.int64()),
        "freshness_lag_ms": pa.array([None] * len(samples), pa.int64()),
        "byte_lag_estimate": pa.array([None] * len(samples), pa.int64()),
        "writer": pa.array([writer] * len(samples), pa.string()),
        "refresh_interval_ms": pa.array([interval_ms] * len(samples), pa.int64()),
    }).select(partials.READ)


def merged(parts: list[pa.Table]) -> list[dict]:
    """Each table through the map side on its own (as separate tasks would), then one merge."""
    partial = pa.Table.from_batches([b for t in parts for b in partials.partials(t, EDGES, START)], schema=partials.PARTIAL)
    return pa.Table.from_batches(list(partials.merge(partial, START, END, CAP)), schema=partials.MERGED).to_pylist()


def _day(samples: list[tuple[int | None, int, int | None]]) -> dict:
    [day] = merged([rows(samples)])
    return day


def test_intervals_in_time_order_whatever_the_input_order():
    m = 60_000
    samples = [(START + 2 * m, STALLED, 5), (START, IN_SYNC, 1), (START + 3 * m, IN_SYNC, 2),
               (START + m, STALLED, 7), (START + 10 * m, GONE, None), (START + 4 * m, STALLED, 3)]
    day = _day(samples)
    # 0..1 in sync, 1..3 stalled (one episode), 3..4 in sync, 4..10 stalled (capped at 60 s), GONE: nothing;
    # each run of STALLED samples starts where its first one's time lag says (70 ms, 30 ms before it).
    assert day["samples"] == 6
    assert day["covered_ms"] == 4 * m + CAP
    assert day["stalled_ms"] == 2 * m + CAP + 100
    assert day["out_of_sync_ms"] == 2 * m + CAP + 100
    assert (day["stall_episodes"], day["longest_stall_ms"]) == (2, 2 * m + 70)
    assert (day["first_ms"], day["last_ms"]) == (START, START + 10 * m)
    assert day["hours_ms"][0] == 2 * m + CAP + 100 and sum(day["hours_ms"]) == 2 * m + CAP + 100
    assert day == _day(list(reversed(samples)))


def test_null_times_come_first_and_account_for_the_cap_in_hour_zero():
    day = _day([(None, LAGGING, 1), (START + 23 * H + 59 * 60_000, IN_SYNC, 1), (None, UNRECOGNIZED, None)])
    # The timed sample, the day's first, also stands for the cap before it (no earlier sample
    # of the day), and runs to midnight (60 s).
    assert day["covered_ms"] == 2 * CAP + 60_000 + 60_000
    assert day["out_of_sync_ms"] == 2 * CAP
    assert day["covered_hours_ms"][0] == 2 * CAP and day["covered_hours_ms"][23] == 120_000
    assert day["unknown_state_samples"] == 1
    assert day["first_ms"] == day["last_ms"] == START + 23 * H + 59 * 60_000


def test_lag_figures_are_nearest_rank_within_one_percent_and_nulls_counted_apart():
    rng = np.random.default_rng(3)
    lags = rng.integers(0, 1_000_000, 997).tolist() + [None] * 3
    day = _day([(START + i * 15_000, IN_SYNC, lag) for i, lag in enumerate(lags)])
    known = np.array([v for v in lags if v is not None])
    assert day["null_record_lag_samples"] == day["null_time_lag_samples"] == 3
    assert (day["record_lag_min"], day["record_lag_max"]) == (known.min(), known.max())
    assert day["record_lag_avg"] == known.astype(float).sum() / known.size
    assert day["time_lag_max_s"] == known.max() * 10 / 1000.0
    for q in (50, 95, 99):
        exact = np.percentile(known, q, method="inverted_cdf")
        got = day[f"record_lag_p{q}"]
        assert got in known and exact <= got <= exact * 1.01
    hist = day["record_lag"]
    assert sum(hist["n"]) == 1000 and hist["bucket"][-1] is None and hist["n"][-1] == 3


def test_a_partition_without_lags_has_null_figures():
    day = _day([(START, IN_SYNC, None)])
    assert day["record_lag_min"] is None and day["record_lag_p99"] is None and day["time_lag_avg_s"] is None
    assert day["null_record_lag_samples"] == 1
    assert day["record_lag"] == {"bucket": [None], "n": [1], "vmin": [None], "vmax": [None], "vsum": [None]}


def _spread(n: int, seed: int) -> tuple[list[pa.Table], pa.Table]:
    """Two partitions' samples, one of them all in one part, the other's dealt at random over
    three parts (so each part's first and last samples fall between other parts' samples), in
    shuffled row order; and the same rows as one table."""
    rng = np.random.default_rng(seed)
    codes = [IN_SYNC, STALLED, LAGGING, GONE, UNRECOGNIZED]
    spread = [(START + int(t), int(rng.choice(codes, p=[0.5, 0.3, 0.1, 0.05, 0.05])), None if rng.random() < 0.05 else int(rng.integers(0, 10**6)))
              for t in np.sort(rng.choice(24 * H // 1000, n, replace=False)) * 1000]
    spread += [(None, STALLED, 5), (spread[3][0], LAGGING, 7)]  # a null time, and a tie on time
    alone = [(START + i * 15_000, STALLED if 10 <= i < 20 else IN_SYNC, i) for i in range(100)]
    part = rng.integers(0, 3, len(spread))
    order = rng.permutation(len(spread))
    parts = [rows([spread[i] for i in order if part[i] == p]) for p in range(3)]
    parts[1] = pa.concat_tables([parts[1], rows(alone, partition=1)])
    return parts, pa.concat_tables([rows(spread), rows(alone, partition=1)])


def test_parts_anywhere_merge_to_the_day_of_all_samples_together():
    for seed in range(5):
        parts, whole = _spread(500, seed)
        assert merged(parts) == merged([whole])
        assert merged(parts[::-1]) == merged([whole])  # parts in any order
        days = {d["partition"]: d for d in merged(parts)}
        assert days[1]["samples"] == 100 and days[1]["stall_episodes"] == 1  # all in one part


def test_stall_episode_across_parts_is_one_episode():
    # Samples alternate between two parts: a run of STALLED samples spans both, and a
    # part's last sample is followed by the other part's first.
    stalled = [(START + i * 15_000, STALLED if 4 <= i < 12 else IN_SYNC, i) for i in range(20)]
    parts = [rows(stalled[0::2]), rows(stalled[1::2])]
    [day] = merged(parts)
    # The run starts 40 ms before its first sample (its time lag), and the last one runs to the cap, not to midnight.
    assert (day["stall_episodes"], day["longest_stall_ms"]) == (1, 8 * 15_000 + 40)
    assert day["covered_ms"] == 19 * 15_000 + CAP
    assert day == _day(stalled)


def test_a_topics_figures_are_those_of_all_its_partitions_samples_together():
    rng = np.random.default_rng(9)
    a = [(START + i * 15_000, IN_SYNC, None if i % 50 == 0 else int(rng.integers(0, 10**6))) for i in range(300)]
    b = [(START + i * 15_000, LAGGING, int(rng.integers(0, 10**4))) for i in range(200)]
    per = pa.Table.from_pylist(merged([rows(a, partition=0), rows(b, partition=1)]), schema=partials.MERGED)
    [topic] = pa.Table.from_batches(list(partials.level_figures(per, ["source", "target", "topic"]))).to_pylist()
    [together] = merged([rows(a + b)])  # one partition holding both partitions' samples
    assert {k: v for k, v in topic.items() if k not in ("source", "target", "topic")} == \
        {k: together[k] for k in topic if k not in ("source", "target", "topic")}
    assert topic["null_record_lag_samples"] == 6


def test_the_report_curves_are_each_five_minutes_maxima_and_worst_state():
    from mirrorlag.rollup import slots

    AT_RISK = STATE_CODES["AT_RISK"]
    m = 60_000
    samples = [(START + 1 * m, IN_SYNC, 3), (START + 2 * m, STALLED, 9), (START + 4 * m, LAGGING, None),  # slot 0
               (START + 6 * m, AT_RISK, 1), (START + 7 * m, STALLED, 2),  # slot 1: AT_RISK wins
               (START + 11 * m, UNRECOGNIZED, None),  # slot 2: no lag at all
               (START + 23 * H + 59 * m, GONE, 4), (START + 25 * H, IN_SYNC, 1),  # a time past the day: the last slot
               (None, STALLED, 100)]  # no time: in no slot
    parts = [rows(samples[0::2]), rows(samples[1::2])]  # slot 0 and 1 cut across parts
    [day] = merged(parts)
    curve = slots.decode(day["series"])
    assert curve.hours == [0.0, 5 / 60, 10 / 60, 23 + 55 / 60]
    assert curve.record_lag == [9, 2, None, 4]
    assert curve.time_lag_s == [0.09, 0.02, None, 0.04]
    assert curve.states == ["STALLED", "AT_RISK", None, "IN_SYNC"]
    assert day["series"] == _day(samples)["series"]


def test_a_slots_state_holds_as_long_as_the_tables_count_its_samples():
    """The long history's shading (slots.Slots.held): a 10-minute poll STALLED all day is shaded
    the whole day, as its tables count 86,400 s (before: every other 5-minute slot); a 15 s poll
    that stops for 20 minutes is shaded 60 s (its cap) into the gap, and no more."""
    from mirrorlag.rollup import slots
    from mirrorlag.rollup.charts import _spans
    from mirrorlag.rollup.report_model import Series

    def shaded(day: dict) -> list[tuple[float, float]]:
        c = slots.decode(day["series"])
        return [(a, b) for a, b, _ in _spans(Series("p", c.hours, c.record_lag, c.time_lag_s, c.states, c.until))]

    m = 60_000
    [ten] = merged([rows([(START + i * 10 * m, STALLED, 5) for i in range(144)], interval_ms=10 * m)])
    assert ten["stalled_ms"] == 24 * H and shaded(ten) == [(0.0, 24.0)]
    quarter = [(START + i * 15_000, STALLED, 5) for i in range(4 * 60 * 2)]  # 00:00-02:00
    quarter += [(START + 2 * H + 20 * m + i * 15_000, STALLED, 5) for i in range(4 * 60)]  # 02:20-03:20
    [gap] = merged([rows(quarter, interval_ms=15_000)])
    (a0, a1), (b0, b1) = shaded(gap)
    # 01:59:45 + 60 s, the first run's last sample's cap (to the slot's resolution: its slot ends at 02:00)
    assert (a0, b0) == (0.0, 2 + 20 / 60) and a1 == 2 + 1 / 60
    assert b1 == 3 + 20 / 60 + 1 / 60  # the day's last sample: to its cap, not to midnight


def test_polls_of_the_same_partitions_take_the_transpose_and_give_the_same_parts(monkeypatch):
    # The sidecar writes every poll's partitions in one order: the map side then orders rows by
    # a transpose and sorts each partition's values as a row. Same parts as the general path.
    rng = np.random.default_rng(11)
    polls, keys = 40, [("t", p) for p in range(5)] + [("u", 0)]
    samples = {k: [(START + i * 15_000, int(rng.choice([IN_SYNC, STALLED, LAGGING, UNRECOGNIZED])),
                    None if rng.random() < 0.1 else int(rng.choice([rng.integers(0, 100), rng.integers(0, 10**15)])))
                   for i in range(polls)] for k in keys}
    samples[("t", 3)] = [(ts, code, None) for ts, code, _ in samples[("t", 3)]]  # no lag at all
    table = pa.concat_tables([rows([samples[k][i]], topic=k[0], partition=k[1]) for i in range(polls) for k in keys])
    ids, n = partials.group_ids([table.column(c).combine_chunks() for c in partials.KEY])
    assert partials.Groups(ids, n).polls == polls

    def parts() -> pa.Table:
        return pa.Table.from_batches(list(partials.partials(table, EDGES, START)), schema=partials.PARTIAL)

    fast = parts()
    monkeypatch.setattr(partials, "_polls", lambda ids, n: 0)
    monkeypatch.setattr(partials, "_period", lambda ids: 0)
    assert fast.equals(parts())
    assert partials.Groups(ids, n).polls == 0
    hashed = partials.group_ids([table.column(c).combine_chunks() for c in partials.KEY])
    assert hashed[1] == n and (hashed[0] == ids).all()


def test_polls_without_any_lag_have_null_figures():
    # Every sample of a task without a lag (no LRO known anywhere yet): the transpose path too.
    table = pa.concat_tables([rows([(START + i * 15_000, UNRECOGNIZED, None)], partition=p) for i in range(3) for p in range(2)])
    ids, n = partials.group_ids([table.column(c).combine_chunks() for c in partials.KEY])
    assert partials.Groups(ids, n).polls == 3
    days = pa.Table.from_batches(list(partials.merge(pa.Table.from_batches(list(partials.partials(table, EDGES, START)),
                                                                           schema=partials.PARTIAL), START, END, CAP))).to_pylist()
    assert [(d["samples"], d["record_lag_p99"], d["null_record_lag_samples"]) for d in days] == [(3, None, 3)] * 2


def test_a_period_is_found_only_where_the_keys_repeat_in_one_order():
    period = partials._period
    assert period(np.array([3, 1, 2, 3, 1, 2])) == 3
    assert period(np.array([3, 1, 3, 2])) == 0  # the first key again, but not the same order
    assert period(np.array([3, 1, 1, 3, 1, 1])) == 0  # a key twice within the period
    assert period(np.array([3, 1, 2, 3, 1])) == 0  # a poll cut short
    assert period(np.array([3, 1, 2])) == 0 and period(np.array([], np.int64)) == 0


def test_samples_without_a_time_of_the_day_stay_with_their_partition():
    # Codes of the day travel in 32 bits, any other in full: a merge of several partitions' parts
    # gives each partition its own, as a merge of that partition alone does.
    m = 60_000
    a = [(START + m, STALLED, 1), (None, LAGGING, 2), (START - 5 * m, STALLED, 3), (START + 2 * m, IN_SYNC, 4)]
    b = [(START + 3 * m, IN_SYNC, 5), (END + 7 * m, LAGGING, 6), (None, UNRECOGNIZED, None), (None, STALLED, 8)]
    parts = [pa.concat_tables([rows(a[:2]), rows(b[:3], partition=1)]), pa.concat_tables([rows(b[3:], partition=1), rows(a[2:])])]
    days = {d["partition"]: d for d in merged(parts)}
    assert days[0] == _day(a) and [days[1]] == merged([rows(b, partition=1)])
    assert (days[0]["samples"], days[1]["samples"]) == (4, 4)


# --- the poll interval and several writers (writers.py) --------------------------------------------


def test_a_sample_stands_for_up_to_four_poll_intervals_of_its_writer():
    poll = 120_000
    stalled_all_day = [(START + i * poll, STALLED, 5) for i in range(24 * H // poll)]
    [day] = merged([rows(stalled_all_day, writer="w", interval_ms=poll)])
    assert day["covered_ms"] == day["stalled_ms"] == day["out_of_sync_ms"] == 24 * H
    assert (day["stall_episodes"], day["longest_stall_ms"]) == (1, 24 * H)
    # The same rows as written before rows had their interval: each stands for the 60 s cap.
    [old] = merged([rows(stalled_all_day)])
    assert old["covered_ms"] == old["stalled_ms"] == 12 * H
    # A gap past 4 intervals (an 8-minute hole in a 120 s poll; 10:00 to 10:08) is no data.
    holed = [s for s in stalled_all_day if not START + 10 * H < s[0] < START + 10 * H + 8 * 60_000]
    [gap] = merged([rows(holed, writer="w", interval_ms=poll)])
    assert gap["covered_ms"] == 24 * H - 8 * 60_000 + 4 * poll


def _two_writers(offset_ms: int, flip: bool) -> tuple[list, list]:
    """A day at 15 s, stalled 10:00-11:00, as two sidecars saw it: b polls `offset_ms` later and,
    with `flip`, calls every third stalled sample LAGGING."""
    s = 15_000
    a = [(START + i * s, STALLED if 10 * H <= i * s < 11 * H else IN_SYNC, i % 50) for i in range(24 * H // s)]
    b = [(ts + offset_ms, LAGGING if flip and state == STALLED and i % 3 == 0 else state, lag + 1)
         for i, (ts, state, lag) in enumerate(a)]
    return a, b


def test_two_writers_side_by_side_give_the_figures_of_one():
    a, b = _two_writers(7_000, flip=True)
    alone = merged([rows(a, writer="pod-a", interval_ms=15_000)])
    # Each writer's rows in two tasks, in any order: the merge keeps pod-a (as many samples, smaller id).
    both = merged([rows(b[:3000], writer="pod-b", interval_ms=15_000), rows(a[2000:], writer="pod-a", interval_ms=15_000),
                   rows(a[:2000], writer="pod-a", interval_ms=15_000), rows(b[3000:], writer="pod-b", interval_ms=15_000)])
    assert both == alone
    assert (alone[0]["stall_episodes"], alone[0]["longest_stall_ms"], alone[0]["samples"]) == (1, H, 5760)
    # Today's answer without writers, for the record: the interleaved states shatter the stall.
    [mixed] = merged([rows(a + b)])
    assert mixed["stall_episodes"] > 75 and mixed["samples"] == 2 * 5760


def test_the_fuller_writer_counts_whatever_its_id():
    a, b = _two_writers(3_000, flip=True)
    [alone] = merged([rows(b, writer="pod-b", interval_ms=15_000)])
    [both] = merged([rows(a[:-10], writer="pod-a", interval_ms=15_000), rows(b, writer="pod-b", interval_ms=15_000)])
    assert both == alone and both["stall_episodes"] == 240 // 3  # pod-b's own view: a LAGGING sample every 45 s


def test_a_writer_that_took_over_adds_its_part_of_the_day():
    a, b = _two_writers(4_000, flip=False)
    # pod-a until 12:05, then pod-b (a rolling update: five minutes of both).
    morning = [x for x in a if x[0] < START + 12 * H + 5 * 60_000]
    afternoon = [x for x in b if x[0] >= START + 12 * H]
    [day] = merged([rows(morning, writer="pod-a", interval_ms=15_000), rows(afternoon, writer="pod-b", interval_ms=15_000)])
    # Within the five minutes of both, pod-a's samples (the fuller writer) alone.
    assert day["samples"] == len(morning) + len([x for x in afternoon if x[0] > morning[-1][0]])
    assert day["covered_ms"] >= 24 * H - 15_000 and (day["stall_episodes"], day["longest_stall_ms"]) == (1, H)


def test_rows_with_and_without_a_writer_in_one_day():
    """The day a sidecar was upgraded: rows without writer and interval until noon, then with."""
    poll = 120_000
    samples = [(START + i * poll, LAGGING, 5) for i in range(24 * H // poll)]
    [day] = merged([rows(samples[:360]), rows(samples[360:], writer="w", interval_ms=poll)])
    # Disjoint in time: both count; the partition-day's cap is the larger, 4 x 120 s.
    assert day["samples"] == 720 and day["out_of_sync_ms"] == 24 * H


# --- the midnight gap and a stall's start (issue 41 item 4) ---------------------------------------


def _timed(samples: list[tuple[int, int, int | None]], time_lag_ms: list[int | None], interval_ms: int) -> pa.Table:
    """rows() with each sample's own time lag."""
    t = rows(samples, writer="w", interval_ms=interval_ms)
    return t.set_column(t.schema.get_field_index("time_lag_ms"), "time_lag_ms", pa.array(time_lag_ms, pa.int64()))


def test_the_days_first_sample_stands_for_the_time_since_midnight_up_to_the_cap():
    for poll, phase in ((15_000, 7_000), (120_000, 119_000), (600_000, 599_000)):
        ts = list(range(START + phase, END, poll))
        [day] = merged([_timed([(t, STALLED, 5) for t in ts], [t - START + 3 * H for t in ts], poll)])
        assert day["covered_ms"] == day["stalled_ms"] == day["out_of_sync_ms"] == day["longest_stall_ms"] == 24 * H
        assert day["stall_episodes"] == 1 and sum(day["covered_hours_ms"]) == 24 * H
        # In sync, or without a time lag: the same span, in the first sample's state.
        [ok] = merged([_timed([(t, IN_SYNC, 0) for t in ts], [0] * len(ts), poll)])
        assert (ok["covered_ms"], ok["out_of_sync_ms"]) == (24 * H, 0)
    # At most the cap: a first sample at 00:09:59 of a 120 s poll stands for 480 s before it.
    [late] = merged([_timed([(START + 599_000, LAGGING, 5)], [None], 120_000)])
    assert late["covered_ms"] == late["out_of_sync_ms"] == 480_000 + 480_000


def test_a_stall_starts_where_its_first_samples_time_lag_says_within_the_previous_interval():
    poll = 120_000
    stall_from, stall_to = START + 10 * H + 7_000, START + 11 * H + 7_000  # both on a poll (phase 7 s)
    ts = list(range(START + 7_000, END, poll))
    samples = [(t, STALLED if stall_from < t < stall_to else IN_SYNC, 5) for t in ts]
    lags = [t - stall_from if stall_from < t < stall_to else 0 for t in ts]
    [day] = merged([_timed(samples, lags, poll)])
    assert (day["stalled_ms"], day["longest_stall_ms"], day["stall_episodes"], day["out_of_sync_ms"]) == (H, H, 1, H)
    assert day["covered_ms"] == 24 * H
    # Bounded by the previous sample: a time lag of a day still starts the run there.
    [long] = merged([_timed(samples, [lag * 1000 for lag in lags], poll)])
    assert (long["stalled_ms"], long["longest_stall_ms"]) == (H, H)
    # No time lag: no evidence before the first STALLED sample (a poll short, as before).
    [blind] = merged([_timed(samples, [None] * len(ts), poll)])
    assert blind["stalled_ms"] == H - poll
    # Spread over parts in any order, the same day; the sample-by-sample count agrees.
    whole = _timed(samples, lags, poll)
    assert merged([whole.slice(0, 310), whole.slice(500), whole.slice(310, 190)][::-1]) == [day]
    counted = partials.counted_samples(whole, END, CAP).to_pylist()
    assert sum(x["accounted_ms"] for x in counted) == day["covered_ms"]
    assert sum(x["accounted_ms"] for x in counted if x["state"] == "STALLED") == H


def test_counted_samples_agree_with_the_merge_on_spread_parts():
    for seed in range(3):
        parts, whole = _spread(400, seed)
        days = {d["partition"]: d for d in merged(parts)}
        counted = partials.counted_samples(whole, END, CAP).to_pylist()
        for p, day in days.items():
            mine = [x for x in counted if x["partition"] == p]
            assert sum(x["accounted_ms"] for x in mine) == day["covered_ms"]
            assert sum(x["accounted_ms"] for x in mine if x["state"] == "STALLED") == day["stalled_ms"]


# --- one writer per time span, and one writer id twice (issue 41 item 5) -----------------------------


def _handoff() -> tuple[list, list]:
    """pod-a until 10:34:45, pod-b from 10:25:04 (a rolling update: under 10 minutes of both), at
    15 s; t/0 stalls 10:00-11:00 (pod-b's view 4 s later), and pod-a calls every third of its
    stalled samples within 10:26-10:34 LAGGING."""
    a, b = _two_writers(4_000, flip=False)
    morning = [(ts, LAGGING if state == STALLED and START + 10 * H + 26 * 60_000 <= ts < START + 10 * H + 34 * 60_000
                and i % 3 == 0 else state, lag) for i, (ts, state, lag) in enumerate(a) if ts < START + 10 * H + 35 * 60_000]
    afternoon = [x for x in b if x[0] >= START + 10 * H + 25 * 60_000]
    return morning, afternoon


def test_a_handoffs_overlap_counts_one_writer_per_time_span():
    morning, afternoon = _handoff()
    parts = [rows(morning, writer="pod-a", interval_ms=15_000), rows(afternoon, writer="pod-b", interval_ms=15_000)]
    [day] = merged(parts)
    # Within the overlap pod-b (more samples) alone: the stall stays one episode, pod-a's from
    # 10:00:00 to pod-b's first sample, then pod-b's to 11:00:04.
    assert (day["stall_episodes"], day["longest_stall_ms"], day["stalled_ms"]) == (1, H + 4_000, H + 4_000)
    overlap = [x for x in morning if x[0] >= afternoon[0][0]]
    assert day["samples"] == len(morning) + len(afternoon) - len(overlap)
    assert day["covered_ms"] == 24 * H
    counted = partials.counted_samples(pa.concat_tables(parts), END, CAP).to_pylist()
    assert len(counted) == day["samples"]
    assert sum(x["accounted_ms"] for x in counted if x["state"] == "STALLED") == day["stalled_ms"]
    assert merged(parts[::-1]) == [day] and day["doubled_writer"] is None


def test_two_sidecars_with_one_writer_id_are_named():
    a, b = _two_writers(7_000, flip=False)
    [twice] = merged([rows(a, writer="pod-a", interval_ms=15_000), rows(b, writer="pod-a", interval_ms=15_000)])
    assert twice["doubled_writer"] == "pod-a" and twice["samples"] == 2 * len(a)  # still rolled up
    [once] = merged([rows(a, writer="pod-a", interval_ms=15_000)])
    assert once["doubled_writer"] is None
    # One slow poll (its snapshot 10 s late) makes one close pair, not a second sidecar.
    slow = [(ts + (10_000 if i == 100 else 0), state, lag) for i, (ts, state, lag) in enumerate(a)]
    [late] = merged([rows(slow, writer="pod-a", interval_ms=15_000)])
    assert late["doubled_writer"] is None
    # Beside a writer that took over: each writer's samples on their own.
    morning, afternoon = _handoff()
    [both] = merged([rows(morning, writer="pod-a", interval_ms=15_000),
                     rows([(ts + 5_000, s, lag) for ts, s, lag in morning[-600:]], writer="pod-a", interval_ms=15_000),
                     rows(afternoon, writer="pod-b", interval_ms=15_000)])
    assert both["doubled_writer"] == "pod-a"
