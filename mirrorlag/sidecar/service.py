"""The long-running sidecar: a poll job on APScheduler, exporters fed from each snapshot."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Sequence

from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from mirrorlag.sidecar.cluster_watch import ClusterWatch
from mirrorlag.config.settings import Settings
from mirrorlag.exporters.http import Deflated, Exposition, ExpositionServer, GzipBody
from mirrorlag.exporters.prometheus import MetricsRenderer, heartbeat_ages, policies_of
from mirrorlag.exporters.status import flow_to_dict, status_chunks
from mirrorlag.feeds.callback import ReplicationTracker
from mirrorlag.process.gc_pacing import GcPacing
from mirrorlag.groups.service import GroupsService, checkpointed
from mirrorlag.history import History
from mirrorlag.model import Snapshot
from mirrorlag.interfaces import HeartbeatSource, LroFeed
from mirrorlag.poll.poller import Poller
from mirrorlag.poll.wiring import lag_engine

if TYPE_CHECKING:
    from mirrorlag.exporters.web_config import WebConfig

log = logging.getLogger("mirrorlag.sidecar")  # its name before the move (issue 42): operators' log filters


def _not_a_skip(record: logging.LogRecord) -> bool:
    """APScheduler's warning at every due poll while one runs: the sidecar says it once, its way."""
    return "maximum number of running instances" not in str(record.msg)


def _scheduler_log() -> logging.Logger:
    """APScheduler's scheduler log (under `apscheduler`, whose level `run` sets) without that warning."""
    logger = logging.getLogger("apscheduler.scheduler.mirrorlag")
    logger.addFilter(_not_a_skip)  # once: a filter already there is not added again
    return logger


class Sidecar:
    def __init__(
        self,
        settings: Settings,
        feeds: Sequence[LroFeed] = (),
        trackers: Sequence[ReplicationTracker] = (),
        heartbeats: Sequence[HeartbeatSource] = (),
        serve_http: bool = True,
        gc_pacing: GcPacing | None = None,
        web: WebConfig | None = None,
    ) -> None:
        self.settings = settings
        # The long-running process (`mirrorlag run`) owns the interpreter's collector; a Sidecar
        # embedded in someone else's process (tests, the demo) leaves it alone.
        self.gc_pacing = gc_pacing
        self.poller = Poller(settings, lag_engine(settings), feeds, trackers, heartbeats)
        self._feeds = feeds
        # Failover readiness (docs/design.md §9), built at start: its clients connect to both clusters.
        self.groups: GroupsService | None = None
        self.group_history: History | None = None  # the groups' rows, beside the partitions' history
        self._groups_lock = threading.Lock()  # close() never under a running groups read
        self.renderer = MetricsRenderer(
            detail=settings.metrics_detail != "lag", policies=policies_of(settings.flows),
            series_max=settings.metrics_partition_series_max if settings.metrics_detail == "auto" else None)
        self.web = web  # TLS and basic auth of the listener (--web.config.file); None: plain HTTP
        self.server = ExpositionServer(settings.http_host, settings.http_port, web=web) if serve_http else None
        self.latest: Snapshot | None = None
        self.listeners: list[Callable[[Snapshot], None]] = []
        self.history = History.from_settings(settings.history)  # None when mirrorlag.history.dir is unset
        if self.history is not None:
            self.listeners.append(self.history.append)
        self._poll_lock = threading.Lock()  # a manual poll() never runs beside the scheduled one
        self._scheduler = BackgroundScheduler(
            # The groups job on its own thread: a slow group listing never delays a poll.
            executors={"default": ThreadPoolExecutor(1), "groups": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC", logger=_scheduler_log(),
        )
        self._scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)
        self._skips = 0  # due polls skipped while the current one runs
        self._overrunning = False  # the last poll overran its interval (said once, not every poll)
        self.watch = ClusterWatch(settings, self.poller, self._republish)
        # What the last poll published, kept so that a cluster's change republishes /readyz and
        # /status without a poll: (snapshot, metrics, openmetrics, status extra).
        self._published: tuple[Snapshot | None, GzipBody, GzipBody | None, dict] | None = None
        self._publish_lock = threading.Lock()

    @property
    def ready(self) -> bool:
        """Config loaded and the latest poll read every source cluster (or polling is disabled)."""
        return self.not_ready_because() is None

    def not_ready_because(self) -> str | None:
        """None when ready; else which source cluster and why, or that no poll has ended yet."""
        if self.settings.refresh_interval_s is None:
            return None
        if (down := self.watch.source_down()) is not None:
            return down.describe()
        stats = self.poller.stats
        if stats.last_poll_at is None:
            return "no poll has completed yet"
        if stats.last_success_at != stats.last_poll_at:
            failed = [f"cluster {alias}: {why}" for alias, why in self.poller.read_errors.items() if why]
            return "; ".join(failed) or "the last poll did not read every source cluster"
        return None

    def poll(self) -> Snapshot:
        pacing = self.gc_pacing
        # The pacing inside the lock: a poll that waited for another must not find the collector
        # switched back on by the first one's end.
        with self._poll_lock, pacing.around_poll() if pacing is not None else contextlib.nullcontext():
            started = time.time()
            snapshot = self.poller.poll_once()
            self.watch.after_poll(started)
            self.latest = snapshot
            self._publish(snapshot)
            for listener in self.listeners:
                listener(snapshot)
        return snapshot

    def _poll_job(self) -> None:
        started = time.monotonic()
        try:
            self.poll()
        except Exception as exc:  # the sidecar never dies of a poll; the next one retries
            log.error("poll failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
        self._report_overrun(time.monotonic() - started)
        if self.groups is not None and self.latest is not None and self._scheduler.get_job("groups") is None:
            # The first groups run once a poll has published LROs to assess against.
            self._scheduler.add_job(self._groups_job, "interval", seconds=self.settings.failover.interval_s,
                                    next_run_time=datetime.now().astimezone(), id="groups", executor="groups")

    def _groups_job(self) -> None:
        assert self.groups is not None
        try:
            with self._groups_lock:
                self.groups.run()
        except Exception as exc:  # like a poll: logged, retried at the next run
            log.error("failover readiness run failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
            return
        self._republish()  # /status's groups as this run left them

    def _skipped(self, event: object) -> None:
        if getattr(event, "job_id", "poll") == "poll":
            self._skips += 1  # on the scheduler's thread; read after the poll on the executor's

    def _report_overrun(self, took_s: float) -> None:
        """Once when polls start to take longer than their interval, once when they fit again."""
        interval = self.settings.refresh_interval_s or 0.0
        skipped, self._skips = self._skips, 0
        overran = skipped > 0 or took_s > interval
        if overran and not self._overrunning:
            log.warning("poll took %.1f s, longer than the %g s interval (replication.record.lag.metric."
                        "refresh.interval): %d due poll(s) skipped, the next at its due time; "
                        "said again only once polls fit the interval", took_s, interval, skipped)
        elif overran:
            log.debug("poll took %.1f s, longer than the %g s interval: %d due poll(s) skipped",
                      took_s, interval, skipped)
        elif self._overrunning:
            log.info("polls fit the %g s interval again (the last took %.1f s)", interval, took_s)
        self._overrunning = overran

    def _publish(self, snapshot: Snapshot | None) -> None:
        if self.server is None:
            return
        stats = self.poller.stats
        history = self.history.stats() if self.history is not None else None
        groups_history = self.group_history.stats() if self.group_history is not None else None
        extra = {
            "polls_total": stats.polls_total,
            "last_success_at": stats.last_success_at,
            "last_poll_duration_s": round(stats.last_poll_duration_s, 4),
            "flows": [flow_to_dict(flow) for flow in self.settings.flows],
            "feeds": [dataclasses.asdict(health) for health in stats.feeds],
            # Why partitions without an LRO are UNKNOWN rather than owed from their log start.
            "evidence_unread": {f"{flow.source}->{flow.target}": why for flow, why in stats.evidence_unread.items()},
            "probe_outcomes": stats.probe_outcomes_total,
            "heartbeat_age_s": {f"{flow.source}->{flow.target}": round(age, 3)
                                for flow, age in heartbeat_ages(stats).items()},
            "history": dataclasses.asdict(history) if history is not None else None,
            "groups_history": dataclasses.asdict(groups_history) if groups_history is not None else None,
        }
        # Compressed here, after the poll, a family at a time on the render's threads: compressing
        # on the first scrape would make that scrape wait, and this way the whole text never
        # exists at once. The per-partition families are the same text in both formats: their
        # compressed pieces are shared, only the tail differs (OpenMetrics types and `# EOF`).
        # /metrics's mirrorlag_history_* count both datasets, so their alerts cover the groups' too.
        both = history.plus(groups_history) if history is not None and groups_history is not None else history
        block = list(self.renderer.partition_pieces(snapshot, Deflated.of))
        self._published = (
            snapshot,
            GzipBody.join([*block, Deflated.of((self.renderer.tail(snapshot, stats, both),))]),
            GzipBody.join([*block, Deflated.of((self.renderer.tail(snapshot, stats, both, True),))]),
            extra,
        )
        self._republish()

    def _republish(self) -> None:
        """The last poll's bodies with readiness and the clusters' reachability as they are now."""
        if self.server is None or self._published is None:
            return
        with self._publish_lock:
            snapshot, metrics, openmetrics, extra = self._published
            why = self.not_ready_because()
            # Right after "ready": why not, and each cluster's reachability (`since`: epoch s).
            head = {"not_ready_because": why, "clusters": self.watch.to_dict(), **extra}
            groups = self.groups
            members = () if groups is None else (("groups_flows", groups.flows_json), ("groups", groups.status_json))
            self.server.current = Exposition(
                metrics=metrics, openmetrics=openmetrics, ready=why is None, not_ready_because=why,
                render_status=functools.partial(status_chunks, snapshot, why is None, head, members),
                after_status=self.gc_pacing.release if self.gc_pacing is not None else None,
            )

    def start(self) -> None:
        if self.history is not None:
            self.history.start()
        if self.server is not None:
            self._publish(None)  # /healthz and /metrics answer before the first poll completes
            self.server.start()
            log.info("serving /metrics, /healthz, /readyz, /status on %s:%d%s",
                     self.settings.http_host, self.server.port,
                     f" ({self.web.describe()}, from {self.web.path})" if self.web is not None else "")
        interval = self.settings.refresh_interval_s
        if interval is None:
            log.warning("replication.record.lag.metric.refresh.interval = -1: lag polling is disabled")
        else:
            if checkpointed(self.settings):
                self.groups = GroupsService.build(self.settings, lambda: self.latest, self._feeds)
                self.renderer.registry.register(self.groups.collector)
                if self.settings.history is not None:
                    self.group_history = History.for_groups(self.settings.history, self.settings.failover.interval_s)
                    self.group_history.start()
                    self.groups.listeners.append(self.group_history.append)
            self._scheduler.add_job(self._poll_job, "interval", seconds=interval,
                                    next_run_time=datetime.now().astimezone(), id="poll")
            self.watch.start()
        self._scheduler.start()

    def stop(self, timeout_s: float = 4.5) -> bool:
        """Stop polling, flush the history, stop serving; False when an in-flight poll, or the
        clients' close, was left (the caller then exits without waiting for librdkafka).

        The poll gets at most 2.5 s to finish; the history's final segment gets the rest (at
        least 1 s), since rows already taken must not be lost on a SIGTERM. The Kafka clients
        close on threads of their own meanwhile: a consumer of a cluster that cannot be reached
        takes ~5 s to close, which must not hold up the history or the exit.
        """
        deadline = time.monotonic() + timeout_s
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        self.watch.stop()
        closing: list[threading.Thread] = []
        finished = self._poll_lock.acquire(timeout=min(2.5, timeout_s))
        if finished:  # never under a running poll: librdkafka would free what it uses
            closing.append(_close_then_release(self.poller.close, self._poll_lock, "poller"))
        if self.groups is not None and self._groups_lock.acquire(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
            # likewise never under a running read (else left to the process's exit)
            closing.append(_close_then_release(self.groups.close, self._groups_lock, "groups"))
        if self.group_history is not None:  # its rows are few: a share of what is left
            self.group_history.close(timeout_s=max(0.5, (deadline - time.monotonic()) / 3))
        if self.history is not None:
            self.history.close(timeout_s=max(1.0, deadline - time.monotonic()))
        if self.server is not None:
            self.server.stop()
        for thread in closing:
            thread.join(max(0.0, deadline - time.monotonic()))
        return finished and not any(thread.is_alive() for thread in closing)


def _close_then_release(close: Callable[[], None], lock: threading.Lock, what: str) -> threading.Thread:
    """`close()` on a daemon thread of its own, then `lock` released (held by the caller)."""
    def run() -> None:
        try:
            close()
        except Exception:  # a close that fails leaves nothing to save
            log.exception("closing the %s's clients failed", what)
        finally:
            lock.release()
    thread = threading.Thread(target=run, name=f"mirrorlag-close-{what}", daemon=True)
    thread.start()
    return thread
