"""`check`'s status line, perfdata and threshold ranges (mirrorlag.check.output), read back as a
Nagios-style consumer reads them (tests.nagios)."""

from __future__ import annotations

import math

import pytest

from mirrorlag.check.output import Range, Status, Thresholds, Window, groups_verdict, partitions_verdict, unknown_line
from mirrorlag.groups.assess import GroupPartition, GroupReadiness
from mirrorlag.groups.readiness import GroupState, PartitionReadiness
from mirrorlag.model import PartitionKey, PartitionRow, State
from tests.nagios import parse


def row(partition: int, state: State, record_lag: int | None = 0, time_lag_s: float | None = 0.0,
        topic: str = "orders") -> PartitionRow:
    return PartitionRow(PartitionKey("A", "B", topic, partition), state, 100, None, "offset-syncs", 1.0,
                        record_lag, None, None, None, time_lag_s)


@pytest.mark.parametrize("text,low,high,inside", [
    ("10", 0, 10, False), ("10:", 10, math.inf, False), ("~:10", -math.inf, 10, False),
    ("10:20", 10, 20, False), ("@10:20", 10, 20, True), ("2.5", 0, 2.5, False), ("-5:-1", -5, -1, False),
])
def test_ranges_parse_as_the_guidelines_say(text, low, high, inside):
    r = Range.parse(text)
    assert (r.low, r.high, r.inside, r.text) == (low, high, inside, text)


@pytest.mark.parametrize("text,value,alerts", [
    ("10", 10, False), ("10", 11, True), ("10", -1, True), ("10:", 9, True), ("10:", 1e9, False),
    ("~:10", -1e9, False), ("~:10", 11, True), ("10:20", 15, False), ("10:20", 21, True),
    ("@10:20", 15, True), ("@10:20", 9, False),
])
def test_a_value_outside_the_range_alerts(text, value, alerts):
    assert Range.parse(text).alerts(value) is alerts


@pytest.mark.parametrize("text", ["", ":", "abc", "20:10", ":10", "1:2:3", "@"])
def test_a_bad_range_is_refused(text):
    with pytest.raises(ValueError):
        Range.parse(text)


def test_all_in_sync_is_ok_with_counts_in_perfdata():
    v = partitions_verdict([row(p, State.IN_SYNC) for p in range(120)])
    status, text, perf = parse(v.line)
    assert (v.status, status, text) == (Status.OK, "OK", "120 partitions IN_SYNC")
    assert perf["in_sync"] == ("120", "", "", "", "0", "120")
    assert perf["lagging"][0] == "0" and perf["records_behind"][0] == "0" and perf["time_lag"][:2] == ("0", "s")


def test_behind_names_the_worst_first_and_caps_the_list():
    rows = [row(p, State.IN_SYNC) for p in range(100)]
    rows += [row(100 + p, State.LAGGING, 1234 + p, 45.0 + p) for p in range(6)]
    rows += [row(200, State.REWIND, 5, 3.0), row(201, State.STALLED, 7, 2.0)]
    v = partitions_verdict(rows)
    status, text, perf = parse(v.line)
    assert (v.status, status) == (Status.CRITICAL, "CRITICAL")  # STALLED
    assert text.startswith("8 of 108 partitions not IN_SYNC: A->B orders/201 STALLED 7 records 2 s, "
                           "A->B orders/200 REWIND 5 records 3 s, A->B orders/105 LAGGING 1,239 records 50 s, ")
    assert text.endswith(", and 3 more")
    assert perf["records_behind"][0] == "1239" and perf["time_lag"][:2] == ("50", "s")
    assert (perf["lagging"][0], perf["stalled"][0], perf["rewind"][0], perf["in_sync"][0]) == ("6", "1", "1", "100")


@pytest.mark.parametrize("state,status", [
    (State.LAGGING, Status.WARNING), (State.REWIND, Status.WARNING), (State.UNKNOWN, Status.WARNING),
    (State.STALLED, Status.CRITICAL), (State.RESET, Status.CRITICAL), (State.AT_RISK, Status.CRITICAL),
])
def test_every_state_but_in_sync_alerts_by_default(state, status):
    assert partitions_verdict([row(0, State.IN_SYNC), row(1, state, 3, 40.0)]).status is status


def test_thresholds_judge_the_lag_instead_of_lagging():
    rows = [row(0, State.IN_SYNC), row(1, State.LAGGING, 500, 45.0)]
    assert partitions_verdict(rows, Thresholds(warning=Range.parse("60"))).status is Status.OK
    v = partitions_verdict(rows, Thresholds(warning=Range.parse("30"), critical=Range.parse("120")))
    status, text, perf = parse(v.line)
    assert v.status is Status.WARNING and "(time lag 45 s outside the threshold)" in text
    assert perf["time_lag"] == ("45", "s", "30", "120", "0", "")
    v = partitions_verdict(rows, Thresholds(critical_records=Range.parse("100")))
    assert v.status is Status.CRITICAL and parse(v.line)[2]["records_behind"] == ("500", "", "", "100", "0", "")
    # STALLED stays CRITICAL whatever the lag thresholds say
    stalled = [row(0, State.STALLED, 1, 1.0)]
    assert partitions_verdict(stalled, Thresholds(warning=Range.parse("60"))).status is Status.CRITICAL


def test_a_window_cut_short_is_said():
    v = partitions_verdict([row(0, State.LAGGING, 3, 40.0)], window=Window(8.2, 30.0))
    assert "; window 8 s of 30 s: a partition behind that catches up later reads LAGGING" in parse(v.line)[1]
    assert "window" not in partitions_verdict([row(0, State.IN_SYNC)], window=Window(8.2, 30.0)).line


def test_unknown_lag_is_u_and_unknown_line_has_no_perfdata():
    status, _, perf = parse(partitions_verdict([row(0, State.UNKNOWN, None, None)]).line)
    assert status == "WARNING" and perf["records_behind"][0] == "U" and perf["time_lag"][0] == "U"
    assert parse(unknown_line("a | b\n  c")) == ("UNKNOWN", "a / b c", {})


def group(name: str, *states_rereads: tuple[GroupState, int | None]) -> GroupReadiness:
    return GroupReadiness(name, [GroupPartition("orders", p, 10, None, None, PartitionReadiness(
        state, None, None, reread, 0, 0, 5_000)) for p, (state, reread) in enumerate(states_rereads)])


def test_groups_ready_is_ok_and_the_worst_groups_are_named():
    ready = [("A->B", group(f"g{i}", (GroupState.READY, 0))) for i in range(3)]
    status, text, perf = parse(groups_verdict(ready).line)
    assert (status, text) == ("OK", "3 consumer groups READY")
    assert perf["ready"] == ("3", "", "", "", "0", "3") and perf["checkpoint_age"][:2] == ("5", "s")
    v = groups_verdict(ready + [("A->B", group("audit", (GroupState.REREAD_HIGH, 1234), (GroupState.READY, 1))),
                                ("A->C", group("billing", (GroupState.UNMAPPED, None)))])
    status, text, perf = parse(v.line)
    assert v.status is Status.WARNING
    assert text == "2 of 5 consumer groups not READY: A->C billing UNMAPPED, A->B audit REREAD_HIGH re-read (sum) 1,235"
    assert perf["reread_records"][0] == "1235" and perf["reread_high"][0] == "1" and perf["unmapped"][0] == "1"


def test_the_checks_window_keeps_a_rewind_it_saw():
    """A partition caught up at the first poll whose LRO then stepped back reads REWIND, not IN_SYNC."""
    from mirrorlag.check.run import _verdict

    rewound = row(0, State.REWIND, 29, 0.0)._replace(lro=20)
    assert _verdict(rewound, True, 49).state is State.REWIND
    assert partitions_verdict([_verdict(rewound, True, 49)]).status is Status.WARNING
    assert _verdict(row(0, State.LAGGING, 3, 1.0), True, 49).state is State.IN_SYNC
