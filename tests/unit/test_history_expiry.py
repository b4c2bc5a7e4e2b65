"""Expiry of local segments: by age (file mtime), never an un-uploaded one when uploads are on."""

from __future__ import annotations

import os
from pathlib import Path

from mirrorlag.history.expiry import Expirer
from mirrorlag.history.layout import list_segments, marker_path
from tests.helpers import eventually

DAY = 86400.0
NOW = 1_780_000_000.0  # 2026-05-28


def segment(root: Path, date: str, ts_ms: int, age_s: float, *, uploaded: bool = False) -> Path:
    path = root / f"date={date}" / f"part-{ts_ms:013d}-abcdef01.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * 10)
    os.utime(path, (NOW - age_s, NOW - age_s))
    if uploaded:
        marker_path(path).touch()
    return path


def expirer(root: Path, *, require_uploaded: bool, retention_s: float = 7 * DAY) -> Expirer:
    return Expirer(root, retention_s, require_uploaded=require_uploaded, clock=lambda: NOW)


def test_deletes_old_segments_and_keeps_young_ones(tmp_path: Path) -> None:
    old = segment(tmp_path, "2026-05-01", 1, 8 * DAY)
    young = segment(tmp_path, "2026-05-27", 2, 6 * DAY)
    e = expirer(tmp_path, require_uploaded=False)
    assert e.run_once() == 1
    assert list_segments(tmp_path) == [young] and not old.exists()
    assert e.expired_segments_total == 1 and not e.failing


def test_never_deletes_a_segment_that_is_not_uploaded(tmp_path: Path) -> None:
    done = segment(tmp_path, "2026-05-01", 1, 30 * DAY, uploaded=True)
    waiting = segment(tmp_path, "2026-05-01", 2, 30 * DAY)
    e = expirer(tmp_path, require_uploaded=True)
    assert e.run_once() == 1
    assert not done.exists() and not marker_path(done).exists()
    assert waiting.exists()
    marker_path(waiting).touch()  # its upload finally completes
    assert e.run_once() == 1 and list_segments(tmp_path) == []


def test_age_is_the_file_time_not_the_name(tmp_path: Path) -> None:
    # A segment that opened long ago (name) but closed recently (mtime) still holds recent rows.
    recent = segment(tmp_path, "2026-05-01", 1, 1 * DAY)
    assert expirer(tmp_path, require_uploaded=False).run_once() == 0 and recent.exists()


def test_tidies_orphan_markers_and_old_empty_date_dirs(tmp_path: Path) -> None:
    segment(tmp_path, "2026-05-01", 1, 8 * DAY, uploaded=True)
    orphan = tmp_path / "date=2026-05-27" / ".part-0000000000009-abcdef01.parquet.uploaded"
    orphan.parent.mkdir()
    orphan.touch()
    today = tmp_path / "date=2026-05-28"
    today.mkdir()  # empty, but the writer may be about to write into it
    e = expirer(tmp_path, require_uploaded=True)
    assert e.run_once() == 1
    assert not (tmp_path / "date=2026-05-01").exists()
    assert not orphan.exists() and today.exists()


def test_missing_dir_is_not_an_error(tmp_path: Path) -> None:
    e = expirer(tmp_path / "nope", require_uploaded=False)
    assert e.run_once() == 0 and not e.failing


def test_thread_runs_and_stops(tmp_path: Path) -> None:
    segment(tmp_path, "2026-05-01", 1, 8 * DAY)
    e = Expirer(tmp_path, 7 * DAY, require_uploaded=False, clock=lambda: NOW, interval_s=0.01)
    e.start()
    eventually(lambda: _assert(e.expired_segments_total == 1), timeout=5, interval=0.01)
    assert e.close(timeout_s=2)


def _assert(condition: bool) -> None:
    assert condition
