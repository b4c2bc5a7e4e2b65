"""The /status document, rendered a piece at a time, is exactly one json.dumps of the whole."""

from __future__ import annotations

import json

from mirrorlag.exporters.status import STATUS_PIECE_ROWS, row_to_dict, status_chunks
from mirrorlag.model import PartitionKey, PartitionRow, Snapshot, State
from tests.exposition import status_document


def _rows(n: int) -> tuple[PartitionRow, ...]:
    return tuple(PartitionRow(PartitionKey("a", "b", f"t{i % 7}", i), State.LAGGING if i % 3 else State.IN_SYNC,
                              100 + i, 90 + i, "callback", 1.25, 9, 1.0, 12.0, 5.5, 0.5 * i)
                 for i in range(n))


def _whole(snapshot: Snapshot | None, extra: dict) -> bytes:
    doc = {"ready": True, "taken_at": snapshot.taken_at if snapshot is not None else None, **extra,
           "partitions": [row_to_dict(r) for r in snapshot.rows] if snapshot else []}
    return json.dumps(doc, separators=(",", ":")).encode()


def test_pieces_join_to_the_document_json_dumps_writes() -> None:
    extra = {"polls_total": 3, "feeds": [{"feed": "callback", "up": True}], "history": None}
    for n in (0, 1, STATUS_PIECE_ROWS, 2 * STATUS_PIECE_ROWS + 1):
        snapshot = Snapshot(1700000000.5, _rows(n))
        assert status_document(snapshot, True, extra) == _whole(snapshot, extra), n
        assert json.loads(status_document(snapshot, True, extra))["partitions"][-1:] == \
            [row_to_dict(r) for r in snapshot.rows[-1:]]
    assert status_document(None, True, extra) == _whole(None, extra)


def test_a_large_document_comes_in_pieces() -> None:
    chunks = list(status_chunks(Snapshot(0.0, _rows(3 * STATUS_PIECE_ROWS)), False, {}))
    assert len(chunks) == 2 + 3
    assert max(map(len, chunks)) < 2 * sum(map(len, chunks)) / 3


def test_encoded_members_follow_the_partitions_as_json() -> None:
    rows = b'[{"group":"g","partition":0}]'
    doc = json.loads(b"".join(status_chunks(Snapshot(0.0, _rows(2)), True, {"x": 1}, [("groups", rows)])))
    assert list(doc) == ["ready", "taken_at", "x", "partitions", "groups"]
    assert len(doc["partitions"]) == 2 and doc["groups"] == [{"group": "g", "partition": 0}]
