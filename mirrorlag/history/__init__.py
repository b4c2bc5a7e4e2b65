"""Lag history that Spark can trust (docs/design.md §7): Parquet segments, optional throttled upload, expiry.

Wiring (the sidecar owns the lifecycle):

    history = History.from_settings(settings.history)   # None when mirrorlag.history.dir is unset
    if history is not None:
        history.start()
        sidecar.listeners.append(history.append)         # poll thread, O(1), never raises
    ...
    on SIGTERM, after the poller has stopped:  history.close(timeout_s=...)

`stats()` is cheap and thread-safe: call it when rendering /metrics or /status.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from mirrorlag.config.settings import HistorySettings
from mirrorlag.history.expiry import Expirer, local_receipt, receipts_here_or_at
from mirrorlag.history.objectstore import quiet_sdk_logs, redactor, s3_protocol, storage_options
from mirrorlag.history.quota import CopyQuota
from mirrorlag.history.group_schema import GROUPS_DIR, SCHEMA as GROUPS_SCHEMA, encode as encode_groups
from mirrorlag.history.schema import SCHEMA, encode
from mirrorlag.history.upload import Uploader
from mirrorlag.history.writer import Encoder, SegmentWriter
from mirrorlag.model import Snapshot

log = logging.getLogger("mirrorlag.history")

__all__ = ["History", "HistorySettings", "HistoryStats", "SCHEMA"]


@dataclass(frozen=True)
class HistoryStats:
    rows_written_total: int  # rows in segments renamed into place
    segments_written_total: int
    dropped_rows_total: int  # over buffer.max.rows, unencodable, or unwritten at shutdown
    write_errors_total: int  # failed segment writes (each retry counts)
    upload_bytes_total: int
    upload_throttle_seconds_total: float  # time the quota held the uploader back
    upload_failures_total: int
    pending_upload_bytes: int  # local segments not uploaded yet: expiry keeps them, alert on growth
    expired_segments_total: int
    healthy: bool  # writing, uploading and expiring all succeed at their latest attempt
    buffered_rows: int = 0  # rows in memory, not yet in a segment on disk (<= buffer.max.rows)
    segments_uploaded_total: int = 0
    pending_upload_segments: int = 0
    last_error: str = ""  # the latest failure of a failing job, for /status; "" when healthy
    same_id_segments_total: int = 0  # segments another process wrote with this writer id (writer.look_for_twin)

    def plus(self, other: "HistoryStats") -> "HistoryStats":
        """Both datasets' figures as one (the partitions' and the groups' history on /metrics):
        counts added, healthy only when both are, the first error named."""
        added = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self)
                 if f.name not in ("healthy", "last_error")}
        return HistoryStats(**added, healthy=self.healthy and other.healthy,
                            last_error=self.last_error or other.last_error)


class History:
    def __init__(
        self,
        settings: HistorySettings,
        *,
        clock: Callable[[], float] = time.time,
        upload_fs: Any | None = None,  # an fsspec filesystem instead of the URL's (tests)
        expiry_interval_s: float | None = None,
        write_retry_initial_s: float = 0.5,
        upload_retry_initial_s: float = 1.0,
        encoder: Encoder = encode,
        schema: pa.Schema = SCHEMA,
    ) -> None:
        """`encoder`, `schema`: the rows' kind (History.for_groups). The nightly rollup reads
        either kind, so expiry waits for its receipt of their day."""
        self.settings = settings
        root = Path(settings.dir)
        self.uploader: Uploader | None = None
        if settings.upload_uri is not None:
            quota = None
            if settings.upload_max_bytes_per_s is not None:
                quota = CopyQuota(settings.upload_max_bytes_per_s, settings.upload_quota_window_num,
                                  settings.upload_quota_window_s)
            if s3_protocol(settings.upload_uri):
                quiet_sdk_logs()
            self.uploader = Uploader(root, settings.upload_uri, quota=quota, fs=upload_fs,
                                     retry_initial_s=upload_retry_initial_s,
                                     storage_options=storage_options(settings.upload_uri, settings.upload_s3),
                                     redact=redactor(settings.upload_s3))
        self.writer = SegmentWriter(
            root,
            segment_s=settings.segment_s,
            max_rows=settings.segment_max_rows,
            buffer_max_rows=settings.buffer_max_rows,
            clock=clock,
            on_segment=self.uploader.enqueue if self.uploader is not None else None,
            retry_initial_s=write_retry_initial_s,
            writer_id=settings.writer_id or None,
            refresh_interval_ms=None if settings.refresh_interval_s is None else round(settings.refresh_interval_s * 1000),
            encoder=encoder, schema=schema,
        )
        self.expirer: Expirer | None = None
        if settings.retention_s is not None:
            receipts = local_receipt if settings.upload_uri is None else receipts_here_or_at(
                settings.upload_uri, storage_options(settings.upload_uri, settings.upload_s3))
            self.expirer = Expirer(root, settings.retention_s, require_uploaded=self.uploader is not None,
                                   max_age_s=settings.retention_max_s, receipts=receipts,
                                   clock=clock, interval_s=expiry_interval_s)

    @classmethod
    def from_settings(cls, settings: HistorySettings | None, **kwargs: Any) -> History | None:
        """A History for `settings`, or None when history is disabled. Raises nothing for a bad or
        full directory: that is reported through stats() and the log, and retried."""
        return None if settings is None else cls(settings, **kwargs)

    @classmethod
    def for_groups(cls, settings: HistorySettings, interval_s: float, **kwargs: Any) -> History:
        """The consumer groups' history: group_schema's rows in `<dir>/_groups/` (uploaded to
        `<uri>/_groups/`), one per group partition per groups run, under the same segment,
        quota and retention settings. The nightly rollup reads them (group_daily) and leaves its
        receipt naming them in their own day directory, which expiry waits for as for the
        partitions' (up to retention.max.ms)."""
        uri = settings.upload_uri
        return cls(dataclasses.replace(settings, dir=Path(settings.dir) / GROUPS_DIR, refresh_interval_s=interval_s,
                                       upload_uri=None if uri is None else f"{uri.rstrip('/')}/{GROUPS_DIR}"),
                   encoder=encode_groups, schema=GROUPS_SCHEMA, **kwargs)

    def append(self, snapshot: Snapshot) -> None:
        """Poll thread: queue the snapshot's rows (O(1); never blocks, never raises)."""
        try:
            self.writer.append(snapshot)
        except Exception:  # nothing may raise into the poller
            log.exception("history: append failed")

    def start(self) -> None:
        """Start the encoder and writer threads, the uploader's and the expirer's."""
        self.writer.start()
        if self.uploader is not None:
            self.uploader.start()
        if self.expirer is not None:
            self.expirer.start()

    def close(self, timeout_s: float = 4.0) -> None:
        """Flush the buffer into a final segment and stop every thread, within `timeout_s`.

        Upload and expiry stop first (between chunks): they hold nothing that is lost, while the
        writer holds the rows. A copy interrupted here resumes at the next start.
        """
        deadline = time.monotonic() + timeout_s
        if self.expirer is not None:
            self.expirer.close(timeout_s=0.0)
        if self.uploader is not None:
            self.uploader.close(timeout_s=min(0.5, timeout_s / 8))
        self.writer.close(timeout_s=max(0.0, deadline - time.monotonic()))
        if self.expirer is not None:
            self.expirer.close(timeout_s=max(0.0, deadline - time.monotonic()))

    def stats(self) -> HistoryStats:
        w = self.writer.stats()
        u = self.uploader.stats() if self.uploader is not None else None
        e = self.expirer
        errors = [w.last_error, u.last_error if u else ""]
        return HistoryStats(
            rows_written_total=w.rows_written_total,
            segments_written_total=w.segments_written_total,
            dropped_rows_total=w.dropped_rows_total,
            write_errors_total=w.write_errors_total,
            upload_bytes_total=u.upload_bytes_total if u else 0,
            upload_throttle_seconds_total=u.upload_throttle_seconds_total if u else 0.0,
            upload_failures_total=u.upload_failures_total if u else 0,
            pending_upload_bytes=u.pending_upload_bytes if u else 0,
            expired_segments_total=e.expired_segments_total if e else 0,
            healthy=not (w.failing or (u is not None and u.failing) or (e is not None and e.failing)),
            buffered_rows=w.buffered_rows,
            segments_uploaded_total=u.segments_uploaded_total if u else 0,
            pending_upload_segments=u.pending_upload_segments if u else 0,
            last_error="; ".join(x for x in errors if x),
            same_id_segments_total=w.same_id_segments_total,
        )
