"""gil.pieces: consecutive slices that cover the sequence exactly once, in order."""

from __future__ import annotations

import pytest

from mirrorlag.process.gil import STEP, pieces


@pytest.mark.parametrize("n", [0, 1, STEP - 1, STEP, STEP + 1, 3 * STEP + 7])
def test_pieces_cover_everything_once_in_order(n: int) -> None:
    items = tuple(range(n))
    got = list(pieces(items))
    assert [x for piece in got for x in piece] == list(items)
    assert all(0 < len(piece) <= STEP for piece in got) or n == 0
    assert len(got) == max(1, -(-n // STEP))


def test_a_short_sequence_is_its_own_only_piece() -> None:
    items = [1, 2, 3]
    assert next(pieces(items)) is items  # no copy when nothing needs cutting
