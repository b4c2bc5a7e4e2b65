"""Copy closed segments to `mirrorlag.history.upload.uri`, throttled by a KIP-956 byte-rate quota.

One thread, oldest segment first. A segment goes to the same relative path at the destination
(`date=YYYY-MM-DD/part-....parquet`), so a reader of the destination sees the local layout.

- Idempotent: a segment already at the destination with the same size is not copied again. On a
  filesystem with rename (local, HDFS, SFTP) the copy goes to a dot-prefixed `.tmp` name first
  and is renamed into place; on an object store (S3, GCS, ...) an object appears only when its
  upload completes, so the copy goes straight to the final key, and an interrupted one is
  discarded (multipart upload aborted), never completed.
- Durable state: a `.<segment>.uploaded` marker beside the local segment once the copy is in
  place. A restart uploads exactly the segments without one; a crash between the copy and the
  marker costs a size check, not a second copy.
- Failures are counted and retried with exponential backoff; the log says so once per change.
  Before retrying a segment on an object store, and before the first attempt of one a previous
  process left, the multipart uploads left open for its key are aborted (objectstore.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mirrorlag.history.health import FailureState
from mirrorlag.history.layout import fsync_dir, list_segments, marker_path, relative
from mirrorlag.history.objectstore import abort_incomplete
from mirrorlag.history.quota import CopyQuota

log = logging.getLogger("mirrorlag.history")

# Filesystems where a rename is a real, atomic rename (not a copy and delete).
RENAME_PROTOCOLS = frozenset({"file", "local", "hdfs", "arrow_hdfs", "viewfs", "webhdfs", "sftp", "ssh"})
CHUNK_BYTES = 256 * 1024


class _Stopped(Exception):
    pass


@dataclass(frozen=True)
class UploadStats:
    upload_bytes_total: int
    upload_throttle_seconds_total: float
    upload_failures_total: int
    segments_uploaded_total: int
    pending_upload_bytes: int
    pending_upload_segments: int
    failing: bool
    last_error: str


class Uploader:
    def __init__(
        self,
        root: Path,
        uri: str,
        *,
        quota: CopyQuota | None = None,
        fs: Any | None = None,  # an fsspec filesystem; with it, `uri` is a path inside it
        clock: Callable[[], float] = time.monotonic,
        chunk_bytes: int = CHUNK_BYTES,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 60.0,
        storage_options: Mapping[str, Any] | None = None,  # for fsspec.url_to_fs (objectstore.py)
        redact: Callable[[str], str] = str,  # masks secrets in error texts (log, /status)
    ) -> None:
        self.root = Path(root)
        self._uri = uri
        self._options = dict(storage_options or {})
        self._fs = fs  # None: made from the URL on the upload thread (it may connect, and fail)
        self._base = str(uri).rstrip("/")
        self._rename = self._local = False  # set with the filesystem, by _filesystem()
        self._fs_ready = False
        self._quota = quota
        self._chunk = max(1, min(chunk_bytes, quota.max_chunk)) if quota is not None else chunk_bytes
        self._clock = clock
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._health = FailureState(log, "uploading segments", redact)

        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._queue: deque[Path] = deque()
        self._pending: dict[Path, int] = {}  # segment -> local size, until its marker exists
        self._interrupted: set[Path] = set()  # may have left an open multipart upload behind
        self._thread: threading.Thread | None = None
        self._bytes = 0
        self._throttle_s = 0.0
        self._failures = 0
        self._uploaded = 0

        # What a previous process left without a marker is still to upload.
        for segment in list_segments(self.root):
            if not marker_path(segment).exists():
                try:
                    self._add(segment, segment.stat().st_size)
                except OSError:
                    continue
                self._interrupted.add(segment)

    def _add(self, segment: Path, size: int) -> None:
        if segment not in self._pending:
            self._pending[segment] = size
            self._queue.append(segment)

    def enqueue(self, segment: Path, size: int) -> None:
        """A segment was closed (the writer's on_segment callback)."""
        with self._lock:
            self._add(segment, size)
            self._wake.notify()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="mirrorlag-history-upload", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float = 1.0) -> bool:
        """Stop between chunks; an interrupted copy is left for the next start. False if still busy."""
        self._stop.set()
        with self._lock:
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

    def stats(self) -> UploadStats:
        with self._lock:
            return UploadStats(
                upload_bytes_total=self._bytes,
                upload_throttle_seconds_total=self._throttle_s,
                upload_failures_total=self._failures,
                segments_uploaded_total=self._uploaded,
                pending_upload_bytes=sum(self._pending.values()),
                pending_upload_segments=len(self._pending),
                failing=self._health.failing,
                last_error=self._health.last_error,
            )

    # --- upload thread -----------------------------------------------------------------------------

    def _loop(self) -> None:
        backoff = self._retry_initial_s
        while not self._stop.is_set():
            with self._lock:
                while not self._queue and not self._stop.is_set():
                    self._wake.wait()
                if self._stop.is_set():
                    return
                segment = self._queue[0]
            try:
                self._upload(segment)
            except _Stopped:
                return
            except Exception as err:
                if not segment.exists():  # removed behind our back: nothing left to upload
                    log.warning("history: segment %s disappeared before its upload", segment)
                    self._done(segment, uploaded=False)
                    continue
                with self._lock:
                    self._failures += 1
                    self._interrupted.add(segment)
                self._health.failed(err, f" (next attempt in {backoff:.0f} s)")
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, self._retry_max_s)
                continue
            backoff = self._retry_initial_s
            self._health.succeeded()
            self._done(segment, uploaded=True)

    def _done(self, segment: Path, uploaded: bool) -> None:
        with self._lock:
            if self._queue and self._queue[0] == segment:
                self._queue.popleft()
            self._pending.pop(segment, None)
            self._interrupted.discard(segment)
            self._uploaded += uploaded

    def _filesystem(self) -> Any:
        if not self._fs_ready:
            if self._fs is None:
                import fsspec

                fs, base = fsspec.core.url_to_fs(self._uri, **self._options)
                self._fs, self._base = fs, base.rstrip("/")
            protocol = self._fs.protocol
            protocols = {protocol} if isinstance(protocol, str) else set(protocol)
            self._rename = bool(protocols & RENAME_PROTOCOLS)
            self._local = bool(protocols & {"file", "local"})
            self._fs_ready = True
        return self._fs

    def _upload(self, segment: Path) -> None:
        fs = self._filesystem()
        dest = f"{self._base}/{relative(self.root, segment)}"
        size = segment.stat().st_size
        if self._has(dest, size):
            self._mark(segment)  # copied by an earlier process that died before its marker
            return
        parent, name = dest.rsplit("/", 1)
        target = f"{parent}/.{name}.tmp" if self._rename else dest
        if self._rename:
            fs.makedirs(parent, exist_ok=True)
        elif segment in self._interrupted and abort_incomplete(fs, dest):
            log.info("history: aborted an interrupted multipart upload of %s", dest)
        with open(segment, "rb") as src:
            out = fs.open(target, "wb")
            try:
                while chunk := src.read(self._chunk):
                    if self._stop.is_set():
                        raise _Stopped
                    self._throttle(len(chunk))
                    out.write(chunk)
                    with self._lock:
                        self._bytes += len(chunk)
            except BaseException:
                self._abort(out)
                raise
            out.close()  # object stores complete the upload here
        if self._rename:
            if not self._local and fs.exists(dest):
                fs.rm(dest)  # HDFS-style renames do not replace; a same-size copy was taken above
            fs.mv(target, dest)
        self._mark(segment)

    def _has(self, dest: str, size: int) -> bool:
        try:
            return int(self._fs.info(dest)["size"]) == size
        except FileNotFoundError:
            return False
        except PermissionError:
            # S3 answers 403, not 404, for a missing key to a role without s3:ListBucket: upload it
            # (again, at worst); a role that cannot write either fails at the write, with its error.
            return False

    def _abort(self, out: Any) -> None:
        try:
            if self._rename:
                out.close()  # leaves a partial dot-prefixed .tmp that readers skip; overwritten next time
            elif hasattr(out, "discard"):
                out.discard()  # never close(): that would complete a truncated object
        except Exception as err:
            log.debug("history: aborting an upload: %s", type(err).__name__)
        finally:
            if not self._rename:
                _disarm(out)

    def _mark(self, segment: Path) -> None:
        marker = marker_path(segment)
        with open(marker, "wb"):
            pass
        try:
            fsync_dir(marker.parent)
        except OSError:
            pass  # best effort: a lost marker costs one size check at the destination, not a copy

    def _throttle(self, nbytes: int) -> None:
        quota = self._quota
        if quota is None:
            return
        while True:
            now = self._clock()
            delay = quota.delay(now, nbytes)
            if delay <= 1e-9:
                quota.record(nbytes, now)
                return
            stopped = self._stop.wait(delay)
            slept = self._clock() - now
            with self._lock:
                self._throttle_s += slept
            if stopped:
                raise _Stopped


def _disarm(out: Any) -> None:
    """Mark an abandoned object-store upload closed, whether or not its abort got through: fsspec's
    buffered files close() themselves when collected, and that close would complete the multipart
    upload with the parts sent so far, a truncated object under the segment's final name."""
    try:
        out.closed = True
    except AttributeError:
        pass  # a read-only `closed` (io classes): their close() cannot complete anything
