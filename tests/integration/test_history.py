"""Lag history end to end on real disks and real processes (no Kafka): what Spark and pyarrow read
back, the upload quota against a wall clock, expiry beside a stalled upload, a full disk, an
unwritable directory, SIGTERM and kill -9.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from mirrorlag.config.settings import HistorySettings
from mirrorlag.history import SCHEMA, History
from mirrorlag.history.layout import ROLLUP_RECEIPT, list_segments, marker_path
from mirrorlag.history.quota import CopyQuota
from mirrorlag.history.upload import Uploader
from mirrorlag.model import PartitionKey, PartitionRow, Snapshot, State
from mirrorlag.rollup.manifest import Manifest, Segment
from tests.helpers import eventually

DAY = 86400.0
MIDNIGHT = datetime(2026, 3, 2, tzinfo=timezone.utc).timestamp()


def row(p: int, topic: str = "orders", **fields: Any) -> PartitionRow:
    base: dict[str, Any] = dict(
        state=State.LAGGING, leo=10_000 + p, lro=9_000 + p, lro_feed="offset-syncs", lro_age_s=2.0,
        record_lag=999, record_lag_min=None, record_lag_max=None, record_lag_avg=None,
        time_lag_s=42.0004, freshness_lag_s=7.5, byte_lag_estimate=99_900,
    )
    base.update(fields)
    state = base.pop("state")
    return PartitionRow(PartitionKey("east", "west", topic, p), state, **base)


def snap(ts: float, n: int = 4) -> Snapshot:
    return Snapshot(ts, tuple(row(p) for p in range(n)))


def settings(root: Path, **kw: Any) -> HistorySettings:
    return HistorySettings(dir=root, **kw)


def _assert(condition: bool) -> None:
    assert condition


def read_dir(root: Path) -> pa.Table:
    return ds.dataset(root, format="parquet", partitioning="hive").to_table()


# --- what readers see ---------------------------------------------------------------------------


def test_parquet_round_trip_read_back_with_hive_partitioning(tmp_path: Path) -> None:
    root = tmp_path / "h"
    h = History(settings(root, segment_s=3600, writer_id="mirrorlag-0:9464", refresh_interval_s=15))
    h.start()
    h.append(snap(MIDNIGHT - 1.5, n=2))
    gone = PartitionRow(PartitionKey("east", "west", "orders", 7), State.GONE, None, 41, "connect-offsets",
                        None, None, None, None, None, None)
    unknown = row(8, state=State.UNKNOWN, lro=None, lro_feed=None, record_lag=None, time_lag_s=None,
                  freshness_lag_s=None, byte_lag_estimate=None)
    h.append(Snapshot(MIDNIGHT + 0.25, (row(0), gone, unknown)))
    h.close(timeout_s=10)
    # What a dead process or the uploader leaves beside segments must not disturb a reader.
    (root / "date=2026-03-02" / ".part-9999999999999-deadbeef.parquet.tmp").write_bytes(b"PAR1 half a file")

    table = read_dir(root)
    assert table.schema.remove(table.schema.get_field_index("date")) == SCHEMA
    assert table.schema.field("ts").type == pa.timestamp("ms", tz="UTC")
    got = sorted(table.to_pylist(), key=lambda r: (r["ts"], r["partition"]))
    assert [(r["date"], r["partition"], r["state"]) for r in got] == [
        ("2026-03-01", 0, "LAGGING"), ("2026-03-01", 1, "LAGGING"),
        ("2026-03-02", 0, "LAGGING"), ("2026-03-02", 7, "GONE"), ("2026-03-02", 8, "UNKNOWN"),
    ]
    assert got[0] == dict(
        ts=datetime.fromtimestamp(MIDNIGHT - 1.5, tz=timezone.utc), source="east", target="west", topic="orders",
        partition=0, leo=10_000, lro=9_000, lro_feed="offset-syncs", record_lag=999, time_lag_ms=42_000,
        freshness_lag_ms=7_500, byte_lag_estimate=99_900, state="LAGGING", writer="mirrorlag-0:9464",
        refresh_interval_ms=15_000, date="2026-03-01",
    )
    assert (got[3]["leo"], got[3]["lro"], got[3]["lro_feed"], got[3]["record_lag"], got[3]["time_lag_ms"]) == (
        None, 41, "connect-offsets", None, None)
    assert all(got[4][k] is None for k in ("lro", "lro_feed", "record_lag", "time_lag_ms", "freshness_lag_ms",
                                           "byte_lag_estimate"))
    for segment in list_segments(root):  # zstd, and one date per file
        assert pq.ParquetFile(segment).metadata.row_group(0).column(0).compression == "ZSTD"
    assert h.stats().rows_written_total == 5 and h.stats().healthy


def test_spark_reads_segments_and_skips_temporary_files(tmp_path: Path, spark) -> None:
    root = tmp_path / "h"
    h = History(settings(root))
    h.append(snap(MIDNIGHT - 1.5, n=3))
    h.append(snap(MIDNIGHT + 1.5, n=3))
    h.close(timeout_s=10)
    (root / "date=2026-03-02" / ".part-9999999999999-deadbeef.parquet.tmp").write_bytes(b"PAR1 half a file")
    marker_path(list_segments(root)[0]).touch()
    df = spark.read.parquet(str(root))
    assert df.count() == 6
    assert df.columns == [f.name for f in SCHEMA] + ["date"]
    assert {r["date"].isoformat() for r in df.select("date").distinct().collect()} == {"2026-03-01", "2026-03-02"}
    assert df.where("state = 'LAGGING' AND time_lag_ms = 42000").count() == 6


# --- upload ----------------------------------------------------------------------------------------


def test_quota_accuracy_against_the_wall_clock(tmp_path: Path) -> None:
    """3 MiB at 1 MiB/s over KIP-956's default windows (11 x 1 s) takes 3 s: the first window counts
    as full (SimpleRate), so one window's worth goes at once and the end is at N / Q."""
    root, size, quota = tmp_path / "h", 3 * 2**20, 2**20
    seg = root / "date=2026-03-01" / "part-0000000000001-abcdef01.parquet"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(os.urandom(size))
    u = Uploader(root, f"file://{tmp_path / 'remote'}", quota=CopyQuota(quota, 11, 1.0))
    start = time.monotonic()
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=10, interval=0.005)
    elapsed = time.monotonic() - start
    u.close()
    ratio = elapsed / (size / quota)
    print(f"\nquota accuracy: {size} B at {quota} B/s took {elapsed:.3f} s, ratio {ratio:.3f}")
    assert 0.8 <= ratio <= 1.2
    s = u.stats()
    assert s.upload_bytes_total == size and 1.5 <= s.upload_throttle_seconds_total <= elapsed
    assert (tmp_path / "remote" / "date=2026-03-01" / seg.name).read_bytes() == seg.read_bytes()


def test_upload_end_to_end_and_across_a_restart(tmp_path: Path) -> None:
    root, remote = tmp_path / "h", tmp_path / "remote"
    cfg = settings(root, segment_s=60, upload_uri=f"file://{remote}")
    h = History(cfg)
    h.start()
    for k in range(3):
        h.append(snap(MIDNIGHT + 60 * k))  # two closed segments while running, a third at close
    eventually(lambda: _assert(h.stats().segments_uploaded_total == 2), timeout=10, interval=0.02)
    h.close(timeout_s=10)
    s = h.stats()
    assert s.segments_written_total == 3 and s.pending_upload_segments == 1 and s.pending_upload_bytes > 0

    again = History(cfg)  # a restart: uploads only the final segment, nothing twice
    assert again.stats().pending_upload_segments == 1
    again.start()
    eventually(lambda: _assert(again.stats().pending_upload_segments == 0), timeout=10, interval=0.02)
    again.close(timeout_s=5)
    assert again.stats().upload_bytes_total == list_segments(root)[-1].stat().st_size
    assert read_dir(remote).sort_by("ts").equals(read_dir(root).sort_by("ts"))
    assert all(marker_path(p).exists() for p in list_segments(root))


class BlockingFS(LocalFileSystem):
    """An upload target that hangs on every write until released."""

    cachable = False

    def __init__(self, release: threading.Event) -> None:
        super().__init__(auto_mkdir=True)
        self.release = release
        self.blocked = threading.Event()

    def _open(self, path: str, mode: str = "rb", **kw: Any) -> Any:
        if "w" in mode:
            self.blocked.set()
            self.release.wait()
        return super()._open(path, mode, **kw)


def test_expiry_is_not_blocked_by_a_stalled_upload(tmp_path: Path) -> None:
    root = tmp_path / "h"
    old = time.time() - 8 * DAY
    uploaded, waiting = [root / "date=2026-03-01" / f"part-000000000000{i}-abcdef01.parquet" for i in (1, 2)]
    uploaded.parent.mkdir(parents=True)
    for p in (uploaded, waiting):
        p.write_bytes(b"x" * 1234)
        os.utime(p, (old, old))
    marker_path(uploaded).touch()
    # The day was rolled up (its receipt names both): only the upload holds `waiting` back.
    receipt = Manifest(date(2026, 3, 1), "run-1", True, tuple(Segment(p.name, 1234, int(old * 1000)) for p in (uploaded, waiting)))
    (root / "date=2026-03-01" / ROLLUP_RECEIPT).write_text(receipt.to_json())

    release = threading.Event()
    fs = BlockingFS(release)
    # The destination under tmp_path: the released upload completes, and a copy left at a fixed
    # path would read as already uploaded on the next run (nothing would block).
    h = History(settings(root, upload_uri=str(tmp_path / "remote"), retention_s=7 * DAY), upload_fs=fs,
                expiry_interval_s=0.05)
    try:
        h.start()
        assert fs.blocked.wait(5)  # the uploader hangs on `waiting`
        eventually(lambda: _assert(h.stats().expired_segments_total == 1), timeout=5, interval=0.02)
        assert not uploaded.exists() and waiting.exists()  # never expire what is not uploaded
        s = h.stats()
        assert s.pending_upload_bytes == 1234 and s.pending_upload_segments == 1
        h.append(snap(time.time()))  # and the writer is not held up either
        start = time.monotonic()
        h.close(timeout_s=4)
        assert time.monotonic() - start < 4.5
        assert h.stats().rows_written_total == 4
    finally:
        release.set()


def test_the_groups_history_expires_only_what_the_rollups_receipt_names(tmp_path: Path) -> None:
    """`_groups/` is an input of the nightly rollup too (group_daily): its segments wait for the
    receipt the rollup leaves in their own day directory, as the partitions' do."""
    root = tmp_path / "h"
    old = time.time() - 8 * DAY
    day = root / "_groups" / "date=2026-03-01"
    read, late = [day / f"part-000000000000{i}-abcdef01.parquet" for i in (1, 2)]
    day.mkdir(parents=True)
    for p in (read, late):
        p.write_bytes(b"x" * 1234)
        os.utime(p, (old, old))
    receipt = Manifest(date(2026, 3, 1), "run-1", True, (), group_segments=(Segment(read.name, 1234, int(old * 1000)),))
    (day / ROLLUP_RECEIPT).write_text(receipt.groups_receipt().to_json())
    h = History.for_groups(settings(root, retention_s=7 * DAY), 60.0, expiry_interval_s=0.05)
    try:
        h.start()
        eventually(lambda: _assert(h.stats().expired_segments_total == 1), timeout=5, interval=0.02)
        time.sleep(0.2)  # a few more passes: the segment the rollup never read stays
        assert not read.exists() and late.exists() and h.stats().expired_segments_total == 1
    finally:
        h.close(timeout_s=2)


# --- failures -------------------------------------------------------------------------------------


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs ({done.stderr.decode().strip()}); "
                    "tests/unit/test_history_writer.py covers ENOSPC by injection")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
    return filler


def test_disk_full_is_counted_logged_once_and_writing_resumes(
    tiny_tmpfs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real ENOSPC: a 512 KiB tmpfs filled to the last block."""
    caplog.set_level(logging.INFO, logger="mirrorlag.history")
    root = tiny_tmpfs / "h"
    root.mkdir()
    filler = fill(tiny_tmpfs)
    h = History(settings(root, segment_s=3600, segment_max_rows=2000, buffer_max_rows=10_000),
                write_retry_initial_s=0.05)
    h.start()
    for k in range(3):
        h.append(Snapshot(MIDNIGHT + k, tuple(row(p) for p in range(1000))))  # the poller is never refused
    eventually(lambda: _assert(h.stats().write_errors_total >= 2), timeout=5, interval=0.02)
    s = h.stats()
    assert not s.healthy and "No space left" in s.last_error
    assert s.rows_written_total == 0 and s.buffered_rows == 3000 and s.dropped_rows_total == 0
    assert not list(root.rglob("*.tmp")) and list_segments(root) == []

    filler.unlink()  # space returns
    eventually(lambda: _assert(h.stats().rows_written_total == 2000), timeout=5, interval=0.02)
    assert h.stats().healthy
    h.close(timeout_s=5)
    assert read_dir(root).num_rows == 3000
    messages = [r.getMessage() for r in caplog.records]
    assert sum(" failed: " in m for m in messages) == 1, messages
    assert sum("recovered" in m for m in messages) == 1, messages


def test_a_dir_under_a_regular_file_never_raises_into_the_poller(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    h = History(settings(tmp_path / "file" / "h", segment_max_rows=4, buffer_max_rows=8), write_retry_initial_s=0.02)
    h.start()
    for k in range(5):
        h.append(snap(MIDNIGHT + k))
    eventually(lambda: _assert(h.stats().write_errors_total >= 2), timeout=5, interval=0.02)
    s = h.stats()
    assert not s.healthy and s.buffered_rows <= 8 + 4 and s.dropped_rows_total >= 20 - 12
    start = time.monotonic()
    h.close(timeout_s=1)
    assert time.monotonic() - start < 1.5
    assert h.stats().dropped_rows_total == 20  # unwritable to the end: every row accounted for


def test_an_immutable_dir_is_retried_until_writable_again(tmp_path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr not available")
    root = tmp_path / "h"
    root.mkdir()
    if subprocess.run(["chattr", "+i", str(root)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i not permitted here (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs)")
    try:
        h = History(settings(root, segment_s=3600, segment_max_rows=4), write_retry_initial_s=0.05)
        h.start()
        h.append(snap(MIDNIGHT))
        eventually(lambda: _assert(h.stats().write_errors_total >= 1), timeout=5, interval=0.02)
        assert not h.stats().healthy and "Operation not permitted" in h.stats().last_error
    finally:
        subprocess.run(["chattr", "-i", str(root)], check=True)
    eventually(lambda: _assert(h.stats().rows_written_total == 4), timeout=5, interval=0.02)
    h.close(timeout_s=5)
    assert h.stats().healthy and read_dir(root).num_rows == 4


# --- processes: SIGTERM and kill -9 ----------------------------------------------------------------

CHILD = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    from mirrorlag.config.settings import HistorySettings
    from mirrorlag.history import History
    from mirrorlag.model import PartitionKey, PartitionRow, Snapshot, State

    root, mode = Path(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3])
    rows = tuple(PartitionRow(PartitionKey("east", "west", f"t{p % 50}", p), State.IN_SYNC, p, p - 1, "offset-syncs",
                              0.0, 0, None, None, None, 0.0, 0.0) for p in range(n))
    h = History(HistorySettings(dir=root, segment_s=3600, segment_max_rows=max(n, 1)))
    h.start()
    if mode == "sigterm":
        def stop(*_):
            h.close(timeout_s=4.0)
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        h.append(Snapshot(time.time(), rows))
        print("appended", flush=True)
        while True:
            time.sleep(1)
    else:  # write segments for ever, until killed
        print("writing", flush=True)
        while True:
            h.append(Snapshot(time.time(), rows))
            time.sleep(0.01)
""")


def child(root: Path, mode: str, n: int) -> subprocess.Popen[str]:
    log = root.parent / f"{mode}.log"  # a file, not a pipe nobody drains
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), mode, str(n)],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() in ("appended", "writing"), log.read_text()
    return proc


def test_sigterm_flushes_the_open_buffer_within_five_seconds(tmp_path: Path) -> None:
    root = tmp_path / "h"
    proc = child(root, "sigterm", 100_000)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0, (tmp_path / "sigterm.log").read_text()
    assert time.monotonic() - start < 5.0
    assert read_dir(root).num_rows == 100_000 and not list(root.rglob("*.tmp"))


def test_kill_9_while_writing_leaves_only_complete_segments(tmp_path: Path) -> None:
    root = tmp_path / "h"
    proc = child(root, "loop", 50_000)
    try:
        eventually(lambda: _assert(len(list_segments(root)) >= 2), timeout=15, interval=0.01)
        # Kill while a segment is half-written, to leave a temporary file for the restart to clean.
        deadline = time.monotonic() + 5
        while not list(root.rglob("*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.001)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    left = list(root.rglob("*.tmp"))
    segments = list_segments(root)
    for segment in segments:  # every visible file reads completely
        table = pq.read_table(segment)
        assert table.num_rows == 50_000 and table.schema == SCHEMA
    assert read_dir(root).num_rows == 50_000 * len(segments)

    h = History(settings(root))  # the restart
    assert not list(root.rglob("*.tmp")), "the restart removes what the dead process left"
    h.append(snap(time.time()))
    h.close(timeout_s=5)
    assert read_dir(root).num_rows == 50_000 * len(segments) + 4
    print(f"\nkill -9: {len(segments)} complete segments, {len(left)} temporary file(s) left and removed")
