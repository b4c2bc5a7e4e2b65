"""Where history lives on disk: names, listing, markers, temporary files and fsync.

    <dir>/date=YYYY-MM-DD/part-<first ts ms, 13 digits>-<uuid8>.parquet     a closed segment
    <dir>/date=YYYY-MM-DD/.part-....parquet.<writer tag>.tmp              being written by that writer
    <dir>/date=YYYY-MM-DD/.part-....parquet.uploaded                      copied to the upload URI

Everything that is not a closed segment starts with a dot: Spark (InMemoryFileIndex skips names
starting with `_` or `.`) and pyarrow.dataset (ignore_prefixes=['.', '_']) both skip it, so a
reader of the directory only ever sees complete segments.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import uuid
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger(__name__)

SEGMENT_NAME = re.compile(r"part-(?P<ts>[0-9]{13})-(?P<id>[0-9a-f]{8})\.parquet")
DATE_DIR = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}")
TMP_SUFFIX = ".tmp"
# Before writers had ids: nobody writes these names any more, so whoever starts may remove them.
LEGACY_TMP_NAME = re.compile(r"\.part-[0-9]{13}-[0-9a-f]{8}\.parquet\.tmp")
UPLOADED_SUFFIX = ".uploaded"
# The rollup's receipt for a day it rolled up (its manifest: mirrorlag/rollup/manifest.py), which
# expiry waits for. A dot name: no reader of the history sees it as a segment.
ROLLUP_RECEIPT = ".rollup-manifest.json"


def utc_date(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000.0, tz=timezone.utc).date().isoformat()


def segment_name(first_ts_ms: int) -> str:
    # Zero-padded so that names sort by time as strings; the uuid makes two segments that start in
    # the same millisecond (or two sidecars sharing an upload target) distinct.
    return f"part-{first_ts_ms:013d}-{uuid.uuid4().hex[:8]}.parquet"


def default_writer_id(port: int | None = None) -> str:
    """The host's name, and the HTTP listener's port when given (two sidecars on one host listen on
    different ports). A pod's hostname is its name: stable across container restarts, different
    for each replica, which is what the rollup needs to tell writers apart."""
    host = socket.gethostname() or "localhost"
    return host if port is None else f"{host}:{port}"


def writer_tag(writer_id: str) -> str:
    """The writer's id as a file-name part: readable, without dots or slashes, and unique (a
    hash of the whole id, since two ids may read the same once cleaned)."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", writer_id)[:40]
    return f"{clean}-{hashlib.sha1(writer_id.encode()).hexdigest()[:8]}"


def tmp_path(final: Path, tag: str) -> Path:
    """Where writer `tag` (writer_tag) writes `final` before the rename."""
    return final.with_name(f".{final.name}.{tag}{TMP_SUFFIX}")


def marker_path(segment: Path) -> Path:
    return segment.with_name(f".{segment.name}{UPLOADED_SUFFIX}")


def relative(root: Path, segment: Path) -> str:
    """`date=YYYY-MM-DD/part-....parquet`: the same relative path locally and at the upload URI."""
    return segment.relative_to(root).as_posix()


def list_segments(root: Path) -> list[Path]:
    """Closed segments, oldest first (names sort by first timestamp). Missing dir: none."""
    found: list[Path] = []
    try:
        dates = [d for d in os.scandir(root) if d.is_dir() and DATE_DIR.fullmatch(d.name)]
    except OSError:
        return found
    for date in dates:
        try:
            found.extend(Path(e.path) for e in os.scandir(date.path) if SEGMENT_NAME.fullmatch(e.name))
        except OSError:
            continue  # a date dir removed under us by expiry
    found.sort(key=lambda p: p.name)
    return found


def remove_tmp_files(root: Path, tag: str) -> int:
    """Delete the temporary files writer `tag` left under `root` when it died mid-write (and
    untagged ones of versions before writer ids); never raises. Another writer's are its own
    business: it may be writing them now."""
    removed = 0
    own = f".{tag}{TMP_SUFFIX}"
    try:
        tmps = [p for p in root.rglob(f"*{TMP_SUFFIX}")
                if (p.name.endswith(own) or LEGACY_TMP_NAME.fullmatch(p.name)) and p.is_file()]
    except OSError:
        return 0
    for tmp in tmps:
        try:
            tmp.unlink()
            removed += 1
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("history: cannot remove temporary file %s: %s", tmp, err)
    if removed:
        log.info("history: removed %d temporary file(s) left by an earlier process under %s", removed, root)
    return removed


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in `path` durable (POSIX: fsync the directory itself)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """mkdir -p that also fsyncs each parent it added an entry to, so a new date dir survives a crash."""
    missing: list[Path] = []
    p = path
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
        fsync_dir(d.parent)
