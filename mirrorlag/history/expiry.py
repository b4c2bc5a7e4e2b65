"""Delete local segments older than `mirrorlag.history.retention.ms`, on a thread of its own.

Separate from the uploader on purpose: a throttled, failing or hung upload must not keep the
disk filling with segments that were uploaded long ago. The one link between them is on disk:
with an upload configured, a segment without its `.uploaded` marker is never deleted (its bytes
show as pending_upload_bytes, which is what to alert on).

Nor is one deleted before the nightly rollup has read it (docs/design.md §7): the rollup leaves its
manifest of the day, naming the segments it read, in the day's directory (layout.ROLLUP_RECEIPT;
with an upload, where the rollup reads: the same relative path at the upload URI, looked up
there when it is not here). Past `mirrorlag.history.retention.max.ms` a segment goes whatever
the rollup did, with a warning naming its day: a rollup that never runs must not fill the disk.

A segment's age is its file's mtime: written when the segment closed, so it is never earlier than
the segment's newest row, and nothing is deleted while any of its rows is inside the retention.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

from mirrorlag.history.health import FailureState
from mirrorlag.history.layout import (
    DATE_DIR, ROLLUP_RECEIPT, SEGMENT_NAME, UPLOADED_SUFFIX, list_segments, marker_path, utc_date,
)

# A day's directory -> its receipt's text, None when there is none (local_receipt, or History's
# lookup at the upload URI as well).
Receipts = Callable[[Path], "str | None"]


def local_receipt(day_dir: Path) -> str | None:
    try:
        return (day_dir / ROLLUP_RECEIPT).read_text("utf-8")
    except FileNotFoundError:
        return None


def receipts_here_or_at(uri: str, storage_options: dict) -> Receipts:
    """The receipt in the local day directory, else at the upload URI (the rollup reads the
    uploaded copies there and leaves its receipt beside them). The store is asked only for days
    with segments past retention, once a pass each; a failure to ask keeps the day (logged)."""
    state: dict[str, object] = {}

    def lookup(day_dir: Path) -> str | None:
        text = local_receipt(day_dir)
        if text is not None:
            return text
        try:
            if "fs" not in state:
                import fsspec

                state["fs"], base = fsspec.core.url_to_fs(uri, **storage_options)
                state["base"] = str(base).rstrip("/")
            fs = state["fs"]
            with fs.open(f"{state['base']}/{day_dir.name}/{ROLLUP_RECEIPT}", "rb") as f:  # type: ignore[attr-defined]
                return f.read().decode("utf-8")
        except FileNotFoundError:
            return None
        except Exception as err:  # an unreachable store must not stop expiry of other days
            log.debug("history: cannot read the rollup receipt of %s at %s: %s", day_dir.name, uri, err)
            return None

    return lookup


def receipt_names(text: str | None) -> frozenset[str]:
    """The segment names a receipt (the rollup's manifest) says were read; none when unreadable."""
    if text is None:
        return frozenset()
    try:
        return frozenset(str(s[0]) for s in json.loads(text)["segments"])
    except (ValueError, KeyError, TypeError, IndexError):
        log.warning("history: unreadable rollup receipt (%s...): its day waits for retention.max.ms", text[:40])
        return frozenset()

log = logging.getLogger("mirrorlag.history")


class Expirer:
    def __init__(
        self,
        root: Path,
        retention_s: float,
        *,
        require_uploaded: bool,
        max_age_s: float | None = None,
        receipts: Receipts | None = None,
        clock: Callable[[], float] = time.time,
        interval_s: float | None = None,
    ) -> None:
        """`max_age_s`: past it a segment goes whether or not the rollup read it (None: never);
        `receipts`: where the rollup's receipts are read (None: expiry does not wait for it)."""
        self.root = Path(root)
        self.retention_s = float(retention_s)
        self.require_uploaded = require_uploaded
        self.max_age_s = max_age_s
        self._receipts = receipts
        self._warned: set[str] = set()  # days already warned about (once per day, not per pass)
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
        read: dict[Path, frozenset[str]] = {}  # each day's receipt, read once a pass
        for segment in list_segments(self.root):
            try:
                age = now - segment.stat().st_mtime
                if age <= self.retention_s:
                    continue
                marker = marker_path(segment)
                if self.require_uploaded and not marker.exists():
                    continue  # not uploaded yet: keep, whatever its age
                if not self._rolled_up(segment, age, read):
                    continue
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

    def _rolled_up(self, segment: Path, age: float, read: dict[Path, frozenset[str]]) -> bool:
        """Whether the rollup's receipt for the segment's day names it, or it is past the hard limit."""
        if self._receipts is None:
            return True
        day = segment.parent
        if day not in read:
            read[day] = receipt_names(self._receipts(day))
        if segment.name in read[day]:
            return True
        if self.max_age_s is None or age <= self.max_age_s:
            return False
        if day.name not in self._warned:
            self._warned.add(day.name)
            log.warning("history: expiring segments of %s that no rollup has read (older than "
                        "mirrorlag.history.retention.max.ms, %.0f s): that day's rollup lacks them", day.name, self.max_age_s)
        return True

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
                    if not any(SEGMENT_NAME.fullmatch(e.name) for e in os.scandir(date.path)):
                        # the day's last segment went: its receipt has nothing left to vouch for
                        (Path(date.path) / ROLLUP_RECEIPT).unlink(missing_ok=True)
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
