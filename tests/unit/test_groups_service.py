"""The groups service's /status rows: one JSON array, encoded a piece at a time."""

import json

from mirrorlag.groups.service import ROWS_A_PIECE, encode_rows


def test_group_rows_encode_in_pieces_to_one_json_array():
    rows = [{"group": f"g{i}", "reread_records": None if i % 7 else i} for i in range(2 * ROWS_A_PIECE + 3)]
    assert json.loads(encode_rows(rows)) == rows
    assert encode_rows([]) == b"[]" and json.loads(encode_rows(rows[:1])) == rows[:1]


def test_the_two_histories_count_as_one_on_metrics():
    from mirrorlag.history import HistoryStats

    partitions = HistoryStats(10, 2, 0, 0, 100, 0.5, 0, 0, 1, True, buffered_rows=3)
    groups = HistoryStats(4, 1, 1, 2, 50, 0.25, 1, 7, 0, False, last_error="writing segments: disk full")
    both = partitions.plus(groups)
    assert (both.rows_written_total, both.write_errors_total, both.pending_upload_bytes) == (14, 2, 7)
    assert (both.upload_throttle_seconds_total, both.buffered_rows) == (0.75, 3)
    assert not both.healthy and both.last_error == "writing segments: disk full"
    assert partitions.plus(partitions).healthy
