"""A snapshot's rows as typed columns: what goes in comes back out, slices and joins keep rows whole."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, strategies as st

from mirrorlag.model import FLOAT_FIELDS, INT_FIELDS, PartitionKey, PartitionRow, RowColumns, Snapshot, State

INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
FLOAT = st.floats(allow_nan=False)  # NaN is how a float column says unknown


@st.composite
def rows(draw) -> PartitionRow:
    key = PartitionKey(draw(st.sampled_from(["A", 'q"\\'])), "B", draw(st.text(max_size=3)), draw(st.integers(0, 9)))
    fields = {name: draw(st.none() | INT64) for name in INT_FIELDS}
    fields |= {name: draw(st.none() | FLOAT) for name in FLOAT_FIELDS}
    return PartitionRow(key, draw(st.sampled_from(list(State))), lro_feed=draw(st.none() | st.sampled_from(["callback", "x", "offset-syncs"])),
                        freshness_lower_bound=draw(st.booleans()), **fields)


def same(a: PartitionRow, b: PartitionRow) -> None:
    assert a == b
    assert [type(v) for v in a] == [type(v) for v in b]


@given(st.lists(rows(), max_size=20))
def test_rows_come_back_as_they_went_in(given_rows: list[PartitionRow]) -> None:
    back = Snapshot(7.5, given_rows).rows
    assert len(back) == len(given_rows)
    for a, b in zip(back, given_rows):
        same(a, b)


@given(st.lists(rows(), max_size=12), st.lists(rows(), max_size=12), st.integers(0, 12), st.integers(0, 12))
def test_slices_joins_and_placements_keep_rows_whole(first: list, second: list, lo: int, hi: int) -> None:
    a, b = RowColumns.from_rows(first), RowColumns.from_rows(second)
    assert (a + b).rows() == first + second
    assert a[lo:hi].rows() == first[lo:hi]
    both = RowColumns.from_rows(first + second)
    at = np.arange(len(first), len(first) + len(second))
    both.place(at, RowColumns.from_rows(list(reversed(second))))  # the values, not the keys, move
    assert both.rows() == first + [r._replace(key=s.key) for r, s in zip(reversed(second), second)]


def test_unknown_is_a_mask_or_nan_never_a_number() -> None:
    row = PartitionRow(PartitionKey("A", "B", "t", 0), State.UNKNOWN, None, None, None, None, None, None, None, None, None)
    cols = RowColumns.from_rows([row, row._replace(leo=0, time_lag_s=0.0)])
    leo, known = cols.column("leo")
    assert known.tolist() == [False, True] and leo[1] == 0
    time_lag, known = cols.column("time_lag_s")
    assert known.tolist() == [False, True] and math.isnan(time_lag[0])
    assert cols.states().tolist() == [State.UNKNOWN, State.UNKNOWN]


def test_a_float_or_an_int_past_int64_in_an_int_field_is_rounded_or_clipped() -> None:
    # Kafka's offsets are int64; only an estimate (bytes = lag x mean size) can pass it.
    row = PartitionRow(PartitionKey("A", "B", "t", 0), State.LAGGING, 10, 5, "x", 1.0, 4.0, None, None, None, 1.0,
                       byte_lag_estimate=2 ** 70)
    back = RowColumns.from_rows([row, row._replace(byte_lag_estimate=12.6)]).rows()
    assert (back[0].record_lag, back[0].byte_lag_estimate, back[1].byte_lag_estimate) == (4, 2 ** 63 - 1, 13)


def test_lean_columns_keep_every_value_and_hold_a_constant_once():
    keys = [PartitionKey("A", "B", "t", p) for p in range(4)]
    given = [PartitionRow(key, State.IN_SYNC, 10 + key.partition, 9, "x", 1.5, 0, None, None, None,
                          0.0 if key.partition else -0.0, records_lost=0) for key in keys]
    cols = RowColumns.from_rows(given)
    lean = cols.lean()
    assert lean.rows() == cols.rows() == given
    assert lean.ints["records_lost"].strides == (0,) and not lean.ints["records_lost"].flags.writeable
    assert lean.floats["record_lag_min"].strides == (0,)  # all NaN: unknown everywhere
    assert lean.ints["leo"].strides == (8,)
    # -0.0 is not 0.0 bit for bit: the column stays whole, and each row keeps its sign.
    assert [math.copysign(1, v) for v in lean.floats["time_lag_s"]] == [-1, 1, 1, 1]
    assert (lean[1:3] + lean).rows() == given[1:3] + given
