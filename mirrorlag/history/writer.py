"""Buffer snapshots and write them as Parquet segments, off the poll thread.

Three stages, each with its own owner:

- `append` (poll thread) queues a reference to the snapshot's columns: O(1), no copy, no lock
  held for long. A Snapshot is immutable, so holding its columns is safe.
- the encoder thread turns queued snapshots, one at a time, into Arrow record batches (fewer
  bytes a row than the snapshot's columns) and decides segment boundaries: a new UTC date, rows
  `segment_s` newer than the segment's first, `max_rows`, or `segment_s` of wall clock since the
  segment opened (so an idle sidecar still closes it).
- the writer thread writes closed segments: Parquet (zstd) to a dot-prefixed `.tmp` name that
  carries the writer's id (several sidecars may write one history dir), fsync
  the file, rename, fsync the directory. A failing write (disk full, read-only) keeps the segment
  buffered and retries with backoff; a hung disk stalls only this thread. After each write it
  lists the segment's directory: a segment it did not write, written since it started, whose
  `writer` column is its own id (the Parquet footer's statistics: no rows read) means a second
  sidecar with this id writes the same history (look_for_twin), which the rollup cannot tell
  apart from this one: warned once, and counted (`same_id_segments_total`).

Everything held in memory (queued, being encoded, open, closed but unwritten) counts against
`buffer_max_rows`; over it the oldest rows are dropped and counted, never the poll thread blocked.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from mirrorlag.history.health import FailureState
from mirrorlag.history.layout import (
    default_writer_id, fsync_dir, make_dirs, remove_tmp_files, segment_name, tmp_path, utc_date, writer_tag,
)
from mirrorlag.history.schema import SCHEMA, encode
from mirrorlag.model import RowColumns, Snapshot

log = logging.getLogger("mirrorlag.history")

# The footer key holding when a segment was written (time.time(), as text): how look_for_twin tells
# a segment written while this process runs from one an earlier process with its id left behind.
WRITTEN_AT = b"mirrorlag.written_at"

SegmentCallback = Callable[[Path, int], None]  # (closed segment path, size in bytes)
# (first ts in ms, the snapshot's columns, writer id, refresh interval in ms) -> a record batch
Encoder = Callable[[int, Any, str, "int | None"], pa.RecordBatch]


@dataclass(eq=False)
class _Segment:
    date: str  # UTC date of every row in it
    first_ts_ms: int
    opened_at: float  # clock() when its first row arrived
    batches: deque[tuple[int, pa.RecordBatch]] = field(default_factory=deque)  # (ts ms, rows)
    rows: int = 0

    def trim(self, n: int) -> int:
        """Drop up to `n` of the oldest rows; return how many went."""
        dropped = 0
        while self.batches and dropped < n:
            ts, batch = self.batches[0]
            if batch.num_rows <= n - dropped:
                self.batches.popleft()
                dropped += batch.num_rows
            else:
                cut = n - dropped
                self.batches[0] = (ts, batch.slice(cut))
                dropped += cut
        self.rows -= dropped
        return dropped


@dataclass(frozen=True)
class WriterStats:
    rows_written_total: int
    segments_written_total: int
    dropped_rows_total: int
    write_errors_total: int
    buffered_rows: int
    failing: bool
    last_error: str
    same_id_segments_total: int = 0  # segments another process wrote with this writer id (look_for_twin)


class SegmentWriter:
    def __init__(
        self,
        root: Path,
        *,
        segment_s: float = 300.0,
        max_rows: int = 1_000_000,
        buffer_max_rows: int = 2_000_000,
        clock: Callable[[], float] = time.time,
        on_segment: SegmentCallback | None = None,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 30.0,
        writer_id: str | None = None,
        refresh_interval_ms: int | None = None,
        encoder: Encoder = encode,
        schema: pa.Schema = SCHEMA,
    ) -> None:
        """`writer_id` names this writer on every row and in its temporary files (None: the
        host's name); `refresh_interval_ms` is the sidecar's poll interval, on every row so that
        the rollup knows how long a sample stands for (None: polling off, or not known).
        `encoder` and `schema`: what a row is (the partitions' by default; group_schema's for
        the groups' history)."""
        if max_rows < 1 or buffer_max_rows < 1 or not segment_s > 0:
            raise ValueError("segment_s, max_rows and buffer_max_rows must be positive")
        if refresh_interval_ms is not None and refresh_interval_ms <= 0:
            raise ValueError("refresh_interval_ms must be positive")
        self.root = Path(root)
        self.writer_id = writer_id or default_writer_id()
        self.refresh_interval_ms = refresh_interval_ms
        self._encoder = encoder
        self._schema = schema
        self._tag = writer_tag(self.writer_id)
        self.segment_s = float(segment_s)
        self.max_rows = int(max_rows)
        self.buffer_max_rows = int(buffer_max_rows)
        self._segment_ms = round(self.segment_s * 1000)
        self._clock = clock
        self._on_segment = on_segment
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._health = FailureState(log, f"writing segments under {self.root}")

        self._lock = threading.Lock()
        self._encoder_wake = threading.Condition(self._lock)
        self._writer_wake = threading.Condition(self._lock)
        self._pending: deque[tuple[int, RowColumns]] = deque()
        self._pending_rows = 0
        self._encoding_rows = 0
        self._open: _Segment | None = None
        self._sealed: deque[_Segment] = deque()
        self._sealed_rows = 0
        self._inflight: _Segment | None = None  # sealed[0] while the writer writes it: never trimmed
        self._accepting = True
        self._closing = False
        self._encoder_done = False
        self._abandon = False
        self._retry_at = 0.0  # time.monotonic() before which the writer does not retry
        self._backoff = retry_initial_s
        self._dropping = False
        self._threads: list[threading.Thread] = []

        self._rows_written = 0
        self._segments_written = 0
        self._dropped = 0
        self._write_errors = 0
        # When this process started, on the clock each segment's footer records its writing with
        # (WRITTEN_AT): not the files' mtimes, which the kernel takes from a coarser clock (up to a
        # tick behind time.time()) or, on a network volume, from the server's.
        self._started_wall = time.time()
        self._mine: set[str] = set()  # names of the segments this writer wrote
        self._looked: dict[Path, set[str]] = {}  # per directory, the segment names seen
        self._same_id = 0

        # This writer, killed mid-write before, left its .tmp behind; nobody will finish it. Only
        # its own: another sidecar on this dir may be writing its .tmp now. Never raises: an
        # unwritable or missing dir shows up as write errors, not as a sidecar that won't start.
        remove_tmp_files(self.root, self._tag)

    # --- poll thread ---------------------------------------------------------------------------

    def append(self, snapshot: Snapshot) -> None:
        """Queue one snapshot's rows. Constant time; never blocks on disk; never raises."""
        rows = snapshot.columns
        if not len(rows):
            return
        ts_ms = round(snapshot.taken_at * 1000)
        with self._lock:
            if not self._accepting:  # after close(): nobody would write them
                self._dropped += len(rows)
                return
            self._pending.append((ts_ms, rows))
            self._pending_rows += len(rows)
            if self._buffered() > self.buffer_max_rows:
                self._enforce_cap()
            self._encoder_wake.notify()

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._threads:
                return
            self._threads = [
                threading.Thread(target=self._encode_loop, name="mirrorlag-history-encoder", daemon=True),
                threading.Thread(target=self._write_loop, name="mirrorlag-history-writer", daemon=True),
            ]
        for thread in self._threads:
            thread.start()

    def close(self, timeout_s: float = 4.0) -> bool:
        """Write everything buffered, the open segment as a final one; False if the deadline won.

        Rows still unwritten at the deadline (disk full, hung disk) are counted as dropped.
        """
        deadline = time.monotonic() + timeout_s
        self.start()  # never started: the same threads drain it
        with self._lock:
            if self._abandon:  # closed before, and gave up then
                return False
            self._accepting = False
            self._closing = True
            self._retry_at = 0.0  # one more attempt now, whatever the backoff said
            self._encoder_wake.notify_all()
            self._writer_wake.notify_all()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if not any(t.is_alive() for t in self._threads):
            return True
        with self._lock:
            self._abandon = True
            lost = self._buffered()
            self._dropped += lost
            self._writer_wake.notify_all()
        log.error("history: %d buffered row(s) not written by the shutdown deadline (%s)",
                  lost, self._health.last_error or "writer busy")
        return False

    def stats(self) -> WriterStats:
        with self._lock:
            return WriterStats(
                rows_written_total=self._rows_written,
                segments_written_total=self._segments_written,
                dropped_rows_total=self._dropped,
                write_errors_total=self._write_errors,
                buffered_rows=self._buffered(),
                failing=self._health.failing,
                last_error=self._health.last_error,
                same_id_segments_total=self._same_id,
            )

    # --- buffer bookkeeping (lock held) ----------------------------------------------------------

    def _buffered(self) -> int:
        open_rows = self._open.rows if self._open is not None else 0
        return self._pending_rows + self._encoding_rows + open_rows + self._sealed_rows

    def _enforce_cap(self) -> None:
        # Oldest first: closed-but-unwritten segments, then the open one, then raw snapshots. The
        # segment being written and the snapshots being encoded are not touched (bounded: one
        # segment, one batch of snapshots).
        excess = self._buffered() - self.buffer_max_rows
        if excess <= 0:
            return
        dropped = 0
        for seg in list(self._sealed):
            if dropped >= excess:
                break
            if seg is self._inflight:
                continue
            n = seg.trim(excess - dropped)
            self._sealed_rows -= n
            dropped += n
            if seg.rows == 0:
                self._sealed.remove(seg)
        if dropped < excess and self._open is not None:
            dropped += self._open.trim(excess - dropped)
            if self._open.rows == 0:
                self._open = None
        while dropped < excess and self._pending:
            ts_ms, rows = self._pending[0]
            cut = min(len(rows), excess - dropped)
            if cut == len(rows):
                self._pending.popleft()
            else:
                self._pending[0] = (ts_ms, rows[cut:])
            self._pending_rows -= cut
            dropped += cut
        self._dropped += dropped
        if dropped and not self._dropping:
            self._dropping = True
            log.warning("history: over mirrorlag.history.buffer.max.rows (%d): dropping the oldest rows "
                        "until segments can be written (%s)", self.buffer_max_rows,
                        self._health.last_error or "writer behind")

    def _route(self, ts_ms: int, batch: pa.RecordBatch) -> None:
        date = utc_date(ts_ms)
        offset, n = 0, batch.num_rows
        while offset < n:
            seg = self._open
            if seg is not None and (seg.date != date or ts_ms - seg.first_ts_ms >= self._segment_ms):
                self._seal_open()
                seg = None
            if seg is None:
                seg = self._open = _Segment(date, ts_ms, self._clock())
            take = min(n - offset, self.max_rows - seg.rows)
            seg.batches.append((ts_ms, batch if take == n else batch.slice(offset, take)))
            seg.rows += take
            offset += take
            if seg.rows >= self.max_rows:
                self._seal_open()

    def _seal_open(self) -> None:
        seg, self._open = self._open, None
        if seg is not None and seg.rows:
            self._sealed.append(seg)
            self._sealed_rows += seg.rows
            self._writer_wake.notify()

    def _roll_due_in(self) -> float | None:
        """Seconds until the open segment is due by wall clock; None when nothing is open."""
        if self._open is None:
            return None
        return self._open.opened_at + self.segment_s - self._clock()

    # --- encoder thread ----------------------------------------------------------------------------

    def _encode_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    due = self._roll_due_in()
                    if due is not None and due <= 0:
                        break
                    # Capped so that a wall clock that jumps (or an injected one) is noticed within a second.
                    self._encoder_wake.wait(1.0 if due is None else min(due, 1.0))
                # One snapshot at a time: rows being encoded cannot be dropped, so keep them few.
                chunk = self._pending.popleft() if self._pending else None
                if chunk is not None:
                    self._encoding_rows = len(chunk[1])
                    self._pending_rows -= self._encoding_rows
                closing = self._closing
            routed: tuple[int, pa.RecordBatch] | None = None
            if chunk is not None:
                ts_ms, rows = chunk
                try:
                    routed = (ts_ms, self._encoder(ts_ms, rows, self.writer_id, self.refresh_interval_ms))
                except Exception:  # a bug, not the disk: lose this snapshot, keep the thread
                    log.exception("history: cannot encode a snapshot of %d rows; skipped", len(rows))
            with self._lock:
                if chunk is not None and routed is None:
                    self._dropped += self._encoding_rows
                self._encoding_rows = 0
                if routed is not None:
                    self._route(*routed)
                due = self._roll_due_in()
                if due is not None and due <= 0:
                    self._seal_open()
                if closing and not self._pending:
                    self._seal_open()  # the final segment
                    self._encoder_done = True
                    self._writer_wake.notify_all()
                    return
                self._enforce_cap()

    # --- writer thread -----------------------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._abandon:
                        return
                    if self._sealed:
                        wait_s = self._retry_at - time.monotonic()
                        if wait_s <= 0:
                            break
                        self._writer_wake.wait(wait_s)
                    elif self._encoder_done:
                        return
                    else:
                        self._writer_wake.wait()
                seg = self._inflight = self._sealed[0]
                batches = [batch for _, batch in seg.batches]
                first_ts_ms = seg.batches[0][0]
                rows = seg.rows
            try:
                path, size = self._write(seg.date, first_ts_ms, batches)
            except Exception as err:  # OSError above all, but nothing may kill this thread
                with self._lock:
                    self._inflight = None
                    self._write_errors += 1
                    self._retry_at = time.monotonic() + self._backoff
                    self._backoff = min(self._backoff * 2, self._retry_max_s)
                    buffered = self._buffered()
                self._health.failed(err, f" ({buffered} rows buffered, cap {self.buffer_max_rows})")
                continue
            with self._lock:
                if self._abandon:  # close() gave up on us and counted these rows as dropped
                    return
                self._inflight = None
                self._sealed.popleft()  # still `seg`: the cap never trims or removes the in-flight one
                self._sealed_rows -= rows
                self._rows_written += rows
                self._segments_written += 1
                self._backoff = self._retry_initial_s
                self._retry_at = 0.0
                if self._dropping and self._buffered() < self.buffer_max_rows:
                    self._dropping = False
            self._health.succeeded()
            self.look_for_twin(path)
            if self._on_segment is not None:
                try:
                    self._on_segment(path, size)
                except Exception:
                    log.exception("history: segment callback failed for %s", path)

    def look_for_twin(self, written: Path) -> int:
        """After writing `written`: the segments of its directory this writer has not seen yet,
        written since it started and not by it, whose rows all name this writer id; each is
        counted, the first warned about. One listing per segment written, and a footer read per
        new segment of another process (other writers' too: they are told apart by the id in
        the footer). Returns how many were found now; never raises."""
        directory = written.parent
        self._mine.add(written.name)
        seen = self._looked.setdefault(directory, set())
        found = 0
        try:
            entries = [e for e in os.scandir(directory)
                       if e.name.startswith("part-") and e.name.endswith(".parquet") and e.name not in seen]
        except OSError:
            return 0
        for entry in entries:
            seen.add(entry.name)
            if entry.name in self._mine:
                continue
            try:
                written_at = _written_by(entry.path, self.writer_id)
                if written_at is None or written_at < self._started_wall:
                    continue
            except (OSError, ValueError, pa.ArrowException):
                continue  # removed meanwhile, or not a Parquet file: nothing to say about it
            found += 1
            with self._lock:
                self._same_id += 1
                first = self._same_id == 1
            if first:
                log.warning("history: %s in %s was written by another process with this writer id (%s) since this "
                            "sidecar started: two sidecars with one mirrorlag.history.writer.id write this history, "
                            "and the rollup cannot tell their samples apart; give each sidecar an id of its own "
                            "(counted in same_id_segments_total, warned once)", entry.name, directory, self.writer_id)
        return found

    def _write(self, date: str, first_ts_ms: int, batches: list[pa.RecordBatch]) -> tuple[Path, int]:
        directory = self.root / f"date={date}"
        make_dirs(directory)  # again on every attempt: the dir may be back, or gone
        final = directory / segment_name(first_ts_ms)
        tmp = tmp_path(final, self._tag)
        table = pa.Table.from_batches(batches, self._schema)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), WRITTEN_AT: repr(time.time()).encode()})
        try:
            write_parquet(table, tmp)
            size = os.stat(tmp).st_size
            os.rename(tmp, final)  # a fresh uuid name: never replaces anything
        except BaseException:
            try:
                os.unlink(tmp)  # free the space a partial file holds (ENOSPC) and leave no litter
            except OSError:
                pass
            raise
        try:
            fsync_dir(directory)
        except OSError as err:
            # The segment is complete and in place; writing it again would duplicate its rows.
            log.warning("history: cannot fsync %s after adding %s: %s", directory, final.name, err)
        return final, size


def _written_by(path: str, writer_id: str) -> float | None:
    """When the segment at `path` was written (its footer's WRITTEN_AT; its mtime if it has none),
    if every row of it names `writer_id` (the footer's statistics of the `writer` column: min = max
    = the id); None otherwise."""
    meta = pq.read_metadata(path)
    names = meta.schema.names
    if "writer" not in names or not meta.num_row_groups:
        return None
    column = names.index("writer")
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or stats.null_count:
            return None
        if not (stats.min == stats.max == writer_id):
            return None
    written_at = (meta.metadata or {}).get(WRITTEN_AT)
    return float(written_at) if written_at is not None else os.stat(path).st_mtime


def write_parquet(table: pa.Table, path: Path) -> None:
    """zstd Parquet at `path`, on disk when this returns.

    Written natively by Arrow (no Python file object: the GIL is released while it compresses),
    then fsynced through a second descriptor: fsync applies to the file, not to the descriptor.
    """
    with pa.OSFile(str(path), "wb") as sink:
        pq.write_table(table, sink, compression="zstd")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
