"""The exporters' documents joined whole, as tests and benchmarks read them. The sidecar never
joins them: it compresses each a family or a piece at a time (Sidecar._publish)."""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from mirrorlag.exporters.prometheus import MetricsRenderer, PartitionBlock
from mirrorlag.exporters.status import status_chunks
from mirrorlag.history import HistoryStats
from mirrorlag.interfaces import PollStats
from mirrorlag.model import RowColumns, Snapshot


def _as_is(pieces: tuple) -> tuple:
    return pieces


def block_pieces(block: PartitionBlock, cols: RowColumns) -> Iterator[bytes | pa.Buffer]:
    """The per-partition block a family at a time, as bytes-like pieces."""
    for pieces in block.families_encoded(cols, _as_is):
        yield from pieces


def metrics_text(renderer: MetricsRenderer, snapshot: Snapshot | None, stats: PollStats,
                 history: HistoryStats | None = None) -> bytes:
    """The whole /metrics exposition text."""
    return b"".join(piece for pieces in renderer.render_encoded(snapshot, stats, history, _as_is) for piece in pieces)


def status_document(snapshot: Snapshot | None, ready: bool, extra: dict[str, Any]) -> bytes:
    """The whole /status document."""
    return b"".join(status_chunks(snapshot, ready, extra))
