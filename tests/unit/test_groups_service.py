"""The groups service's /status rows: one JSON array, encoded a piece at a time."""

import json

from mirrorlag.groups.service import ROWS_A_PIECE, encode_rows


def test_group_rows_encode_in_pieces_to_one_json_array():
    rows = [{"group": f"g{i}", "reread_records": None if i % 7 else i} for i in range(2 * ROWS_A_PIECE + 3)]
    assert json.loads(encode_rows(rows)) == rows
    assert encode_rows([]) == b"[]" and json.loads(encode_rows(rows[:1])) == rows[:1]
