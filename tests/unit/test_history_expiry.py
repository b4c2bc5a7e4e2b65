"""Expiry of local segments: by age (file mtime), never an un-uploaded one when uploads are on."""

from __future__ import annotations

import os
from pathlib import Path

from mirrorlag.history.expiry import Expirer, local_receipt, receipts_here_or_at
from mirrorlag.history.layout import ROLLUP_RECEIPT, list_segments, marker_path
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


# --- waiting for the rollup (docs/design.md §7: nothing expires before it is rolled up) ------------------


def receipt(root: Path, date: str, *segments: Path, where: Path | None = None) -> None:
    """The rollup's manifest of the day, as it leaves it in the history (manifest.py's format)."""
    from mirrorlag.rollup.manifest import Manifest, Segment

    import datetime as dt

    text = Manifest(dt.date.fromisoformat(date), "run1", True,
                    tuple(Segment(s.name, 10, 0) for s in segments)).to_json()
    path = (where or root) / f"date={date}" / ROLLUP_RECEIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def waiting(root: Path, max_age_s: float | None = 14 * DAY, receipts=local_receipt, **kw) -> Expirer:
    return Expirer(root, 7 * DAY, require_uploaded=False, max_age_s=max_age_s, receipts=receipts,
                   clock=lambda: NOW, **kw)


def test_waits_for_the_rollups_receipt_of_each_segment(tmp_path: Path) -> None:
    read = segment(tmp_path, "2026-05-01", 1, 9 * DAY)
    late = segment(tmp_path, "2026-05-01", 2, 8 * DAY)  # arrived after the day was rolled up
    e = waiting(tmp_path)
    assert e.run_once() == 0 and read.exists() and late.exists()  # never rolled up (or the rollup failed)
    receipt(tmp_path, "2026-05-01", read)
    assert e.run_once() == 1 and not read.exists() and late.exists()
    receipt(tmp_path, "2026-05-01", read, late)  # the next night rolled the day up again
    assert e.run_once() == 1 and list_segments(tmp_path) == []
    assert not (tmp_path / "date=2026-05-01").exists()  # the receipt went with the day's last segment


def test_past_the_hard_limit_goes_with_a_warning_naming_the_day(tmp_path: Path, caplog) -> None:
    old = segment(tmp_path, "2026-05-01", 1, 15 * DAY)
    kept = segment(tmp_path, "2026-05-10", 2, 13 * DAY)
    forever = waiting(tmp_path, max_age_s=None)
    assert forever.run_once() == 0
    e = waiting(tmp_path)
    with caplog.at_level("WARNING", logger="mirrorlag.history"):
        assert e.run_once() == 1 and e.run_once() == 0
    assert not old.exists() and kept.exists()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "date=2026-05-01" in warnings[0] and "no rollup has read" in warnings[0]


def test_the_receipt_may_be_at_the_upload_uri(tmp_path: Path) -> None:
    """With an upload the rollup reads the uploaded copies and leaves its receipt beside them."""
    root, store = tmp_path / "local", tmp_path / "store"
    seg = segment(root, "2026-05-01", 1, 9 * DAY, uploaded=True)
    e = Expirer(root, 7 * DAY, require_uploaded=True, max_age_s=14 * DAY,
                receipts=receipts_here_or_at(f"file://{store}", {}), clock=lambda: NOW)
    assert e.run_once() == 0 and seg.exists()
    receipt(root, "2026-05-01", seg, where=store)
    assert e.run_once() == 1 and not seg.exists()


def test_the_sidecar_waits_for_the_rollup_by_default(tmp_path: Path) -> None:
    from mirrorlag.config.settings import HistorySettings
    from mirrorlag.history import History

    history = History(HistorySettings(dir=tmp_path), clock=lambda: NOW)
    assert history.expirer is not None and history.expirer.max_age_s == 14 * DAY
    seg = segment(tmp_path, "2026-05-01", 1, 9 * DAY)
    assert history.expirer.run_once() == 0 and seg.exists()
    receipt(tmp_path, "2026-05-01", seg)
    assert history.expirer.run_once() == 1
