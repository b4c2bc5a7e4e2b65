"""Delete local segments older than `mirrorlag.history.retention.ms`, on a thread of its own.

Separate from the uploader on purpose: a throttled, failing or hung upload must not keep the
disk filling with segments that were uploaded long ago. The one link between them is on disk:
with an upload configured, a segment without its `.uploaded` marker is never deleted (its bytes
show as pending_upload_bytes, which is what to alert on).

A segment's age is its file's mtime: written when the segment closed, so it is never earlier than
the segment's newest row, and nothing is deleted while any of its rows is inside the retention.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

from mirrorlag.history.health import FailureState
from mirrorlag.history.layout import DATE_DIR, SEGMENT_NAME, UPLOADED_SUFFIX, list_segments, marker_path, utc_date

log = logging.getLogger("mirrorlag.history")


class Expirer:
    def __init__(
        self,
        root: Path,
        retention_s: float,
        *,
        require_uploaded: bool,
        clock: Callable[[], float] = time.time,
        interval_s: float | None = None,
    ) -> None:
        self.root = Path(root)
        self.retention_s = float(retention_s)
        self.require_uploaded = require_uploaded
        # Often enough that a short test retention works, rarely enough to cost nothing.
        self.interval_s = interval_s if interval_s is not None else min(60.0, max(1.0, retention_s / 10))
        self._clock = clock
        self._health = FailureState(log, f"expiring segments under {self.root}")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._expired = 0

    @property
    def expired_segments_total(self) -> int:
        with self._lock:
            return self._expired

    @property
    def failing(self) -> bool:
        return self._health.failing

    def run_once(self) -> int:
        """One pass; returns how many segments it deleted. Never raises."""
        now = self._clock()
        deleted = 0
        error: OSError | None = None
        for segment in list_segments(self.root):
            try:
                if now - segment.stat().st_mtime <= self.retention_s:
                    continue
                marker = marker_path(segment)
                if self.require_uploaded and not marker.exists():
                    continue  # not uploaded yet: keep, whatever its age
                segment.unlink()
                deleted += 1
                marker.unlink(missing_ok=True)
            except FileNotFoundError:
                continue
            except OSError as err:
                error = err
        error = self._tidy(now) or error
        with self._lock:
            self._expired += deleted
        if error is None:
            self._health.succeeded()
        else:
            self._health.failed(error)
        if deleted:
            log.info("history: expired %d segment(s) older than %.0f s", deleted, self.retention_s)
        return deleted

    def _tidy(self, now: float) -> OSError | None:
        """Markers whose segment is gone (a crash between the two unlinks), and date dirs that are
        empty and old enough that the writer will not write into them again."""
        oldest_live_date = utc_date(int((now - self.retention_s - 86400) * 1000))
        error: OSError | None = None
        try:
            dates = [e for e in os.scandir(self.root) if e.is_dir() and DATE_DIR.fullmatch(e.name)]
        except OSError:
            return None  # no dir yet: nothing to tidy
        for date in dates:
            try:
                for entry in os.scandir(date.path):
                    name = entry.name
                    if name.startswith(".") and name.endswith(UPLOADED_SUFFIX):
                        segment = name[1:-len(UPLOADED_SUFFIX)]
                        if SEGMENT_NAME.fullmatch(segment) and not os.path.exists(os.path.join(date.path, segment)):
                            os.unlink(entry.path)
                if date.name.removeprefix("date=") < oldest_live_date:
                    try:
                        os.rmdir(date.path)
                    except OSError:
                        pass  # not empty (a segment waiting for its upload): fine
            except FileNotFoundError:
                continue
            except OSError as err:
                error = err
        return error

    # --- own thread ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="mirrorlag-history-expiry", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float = 1.0) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.interval_s)
