"""The uploader: what it uploads after a restart, idempotence, temp-then-rename, retries, aborts."""

from __future__ import annotations

import gc
import io
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from mirrorlag.history.layout import marker_path
from mirrorlag.history.quota import CopyQuota
from mirrorlag.history.upload import Uploader
from tests.helpers import eventually


def segment(root: Path, ts_ms: int, size: int = 1000, *, uploaded: bool = False) -> Path:
    path = root / "date=2026-05-01" / f"part-{ts_ms:013d}-abcdef01.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(range(256)) * (size // 256) + b"z" * (size % 256))
    if uploaded:
        marker_path(path).touch()
    return path


class SpyFS(LocalFileSystem):
    """The local filesystem, recording what is opened and failing the first `fail` opens."""

    cachable = False

    def __init__(self, fail: int = 0, **kw: Any) -> None:
        super().__init__(auto_mkdir=True, **kw)
        self.fail = fail
        self.opened: list[str] = []

    def _open(self, path: str, mode: str = "rb", **kw: Any) -> Any:
        if "w" in mode:
            self.opened.append(path)
            if self.fail:
                self.fail -= 1
                raise OSError(111, "Connection refused")
        return super()._open(path, mode, **kw)


def _assert(condition: bool) -> None:
    assert condition


def test_a_restart_uploads_exactly_what_has_no_marker(tmp_path: Path) -> None:
    root, dest = tmp_path / "h", tmp_path / "remote"
    done = segment(root, 1, uploaded=True)
    waiting = [segment(root, 2, 1500), segment(root, 3, 2500)]
    u = Uploader(root, str(dest), fs=SpyFS())
    assert (u.stats().pending_upload_bytes, u.stats().pending_upload_segments) == (4000, 2)
    u.start()
    eventually(lambda: _assert(u.stats().pending_upload_segments == 0), timeout=5, interval=0.01)
    assert u.close(timeout_s=2)
    s = u.stats()
    assert (s.upload_bytes_total, s.segments_uploaded_total, s.pending_upload_bytes) == (4000, 2, 0)
    assert all(marker_path(p).exists() for p in waiting)
    for p in waiting:
        assert (dest / "date=2026-05-01" / p.name).read_bytes() == p.read_bytes()
    assert not (dest / "date=2026-05-01" / done.name).exists()
    assert Uploader(root, str(dest), fs=SpyFS()).stats().pending_upload_segments == 0  # and after that restart


def test_copied_before_a_crash_but_unmarked_is_not_copied_again(tmp_path: Path) -> None:
    root, dest = tmp_path / "h", tmp_path / "remote"
    seg = segment(root, 1)
    (dest / "date=2026-05-01").mkdir(parents=True)
    (dest / "date=2026-05-01" / seg.name).write_bytes(seg.read_bytes())
    fs = SpyFS()
    u = Uploader(root, str(dest), fs=fs)
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u.close()
    assert u.stats().upload_bytes_total == 0 and fs.opened == []


def test_a_truncated_copy_at_the_destination_is_replaced(tmp_path: Path) -> None:
    root, dest = tmp_path / "h", tmp_path / "remote"
    seg = segment(root, 1)
    (dest / "date=2026-05-01").mkdir(parents=True)
    (dest / "date=2026-05-01" / seg.name).write_bytes(seg.read_bytes()[:10])
    u = Uploader(root, str(dest), fs=SpyFS())
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u.close()
    assert (dest / "date=2026-05-01" / seg.name).read_bytes() == seg.read_bytes()


def test_with_rename_the_copy_goes_to_a_dot_tmp_name_first(tmp_path: Path) -> None:
    root, dest = tmp_path / "h", tmp_path / "remote"
    seg = segment(root, 1)
    fs = SpyFS()
    u = Uploader(root, f"file://{dest}", fs=fs)
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u.close()
    (opened,) = fs.opened
    assert Path(opened).name == f".{seg.name}.tmp"
    assert sorted(p.name for p in (dest / "date=2026-05-01").iterdir()) == [seg.name]


def test_failures_are_retried_with_backoff_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mirrorlag.history")
    root, dest = tmp_path / "h", tmp_path / "remote"
    seg = segment(root, 1)
    u = Uploader(root, str(dest), fs=SpyFS(fail=3), retry_initial_s=0.01)
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u.close()
    s = u.stats()
    assert (s.upload_failures_total, s.segments_uploaded_total, s.failing) == (3, 1, False)
    messages = [r.getMessage() for r in caplog.records]
    assert sum(" failed: " in m for m in messages) == 1 and sum("recovered" in m for m in messages) == 1


def test_a_vanished_segment_is_forgotten(tmp_path: Path) -> None:
    root = tmp_path / "h"
    u = Uploader(root, str(tmp_path / "remote"), fs=SpyFS())
    u.enqueue(root / "date=2026-05-01" / "part-0000000000001-abcdef01.parquet", 10)
    u.start()
    eventually(lambda: _assert(u.stats().pending_upload_segments == 0), timeout=5, interval=0.01)
    u.close()
    assert u.stats().upload_failures_total == 0


class ObjectStore(MemoryFileSystem):
    """S3-like: no rename, and an object exists only once its upload is closed (completed)."""

    protocol = "fakeobj"
    cachable = False
    store: dict = {}
    pseudo_dirs = [""]

    def _open(self, path: str, mode: str = "rb", **kw: Any) -> Any:
        if "w" not in mode:
            return super()._open(path, mode, **kw)
        fs, path = self, self._strip_protocol(path)

        class Upload(io.BytesIO):
            def close(self) -> None:
                if not self.closed:
                    fs.store[path] = MemoryFile(fs, path, self.getvalue())
                super().close()

            def discard(self) -> None:
                io.BytesIO.close(self)  # the multipart upload is aborted: nothing appears

        return Upload()


def test_object_store_writes_the_final_key_and_an_interrupted_copy_is_discarded(tmp_path: Path) -> None:
    root = tmp_path / "h"
    seg = segment(root, 1, size=20_000)
    fs = ObjectStore()
    base = f"/history-{uuid.uuid4().hex}"
    final = f"{base}/date=2026-05-01/{seg.name}"
    # 1000 B/s: the first window's 1000 bytes go at once, the rest would take ~19 s.
    u = Uploader(root, base, fs=fs, quota=CopyQuota(1000, 11, 1.0))
    u.start()
    eventually(lambda: _assert(u.stats().upload_bytes_total >= 1000), timeout=5, interval=0.01)
    assert u.close(timeout_s=2)
    assert not fs.exists(final) and not [k for k in fs.store if k.startswith(base)]
    assert u.stats().upload_throttle_seconds_total > 0 and u.stats().pending_upload_segments == 1

    u2 = Uploader(root, base, fs=fs)  # no quota: the next start copies it whole, to the final key
    u2.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u2.close()
    assert fs.cat_file(final) == seg.read_bytes()


def test_close_interrupts_a_throttle_wait_promptly(tmp_path: Path) -> None:
    root = tmp_path / "h"
    segment(root, 1, size=50_000)
    u = Uploader(root, str(tmp_path / "remote"), fs=SpyFS(), quota=CopyQuota(1000, 11, 1.0))
    u.start()
    eventually(lambda: _assert(u.stats().upload_bytes_total >= 1000), timeout=5, interval=0.01)
    done = threading.Event()
    threading.Thread(target=lambda: (u.close(timeout_s=5), done.set())).start()
    assert done.wait(1.0)


class CommitOnClose:
    """Like fsspec's buffered object-store files: close() completes the upload with what was
    written, and __del__ closes. Its writes fail after the first; its abort cannot get through."""

    def __init__(self, fs: "CommitOnCloseFS", path: str) -> None:
        self.fs, self.path, self.data, self.closed = fs, path, b"", False

    def write(self, chunk: bytes) -> None:
        if self.data and self.fs.fail_writes:
            self.fs.fail_writes -= 1
            raise OSError(104, "Connection reset by peer")
        self.data += chunk

    def discard(self) -> None:
        raise OSError(104, "Connection reset by peer")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.fs.completed[self.path] = self.data
            self.fs.commits.append(len(self.data))

    def __del__(self) -> None:
        self.close()


class CommitOnCloseFS:
    protocol = "fakeobj"

    def __init__(self) -> None:
        self.completed: dict[str, bytes] = {}
        self.commits: list[int] = []  # sizes of every upload completed
        self.fail_writes = 1

    def info(self, path: str) -> dict:
        if path not in self.completed:
            raise FileNotFoundError(path)
        return {"size": len(self.completed[path])}

    def open(self, path: str, mode: str) -> CommitOnClose:
        return CommitOnClose(self, path)


def test_an_abandoned_object_store_upload_is_never_completed_when_collected(tmp_path: Path) -> None:
    root = tmp_path / "h"
    seg = segment(root, 1, size=3000)
    fs = CommitOnCloseFS()
    u = Uploader(root, "/bucket/h", fs=fs, chunk_bytes=1000, retry_initial_s=0.05)
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u.close()
    gc.collect()  # the failed attempt's file, closed by nobody but its __del__
    assert u.stats().upload_failures_total == 1
    assert fs.commits == [3000]
    assert fs.completed == {f"/bucket/h/date=2026-05-01/{seg.name}": seg.read_bytes()}


def test_a_destination_that_cannot_be_looked_at_is_still_written(tmp_path: Path) -> None:
    """A role with s3:PutObject but not s3:ListBucket gets 403 for a missing key, not 404."""

    class NoList(SpyFS):
        def info(self, path: str, **kw: Any) -> Any:
            raise PermissionError(13, "Forbidden")

    root, dest = tmp_path / "h", tmp_path / "remote"
    seg = segment(root, 1)
    u = Uploader(root, str(dest), fs=NoList())
    u.start()
    eventually(lambda: _assert(marker_path(seg).exists()), timeout=5, interval=0.01)
    u.close()
    assert (dest / "date=2026-05-01" / seg.name).read_bytes() == seg.read_bytes()
    assert u.stats().upload_failures_total == 0
