"""Which clusters the sidecar cannot reach, and why, said at once rather than at the poll's timeout.

A thread looks at the clients' error reports a few times a second: the source admin clients'
and the feeds' metadata clients' (whose error callbacks librdkafka serves only when asked: here),
and what the feeds' consumers recorded. Each poll's outcome confirms a cluster down or proves it
back (mirrorlag.kafka.reachability decides). A change is logged once (WARNING down, INFO back) and
handed to `on_change`, which republishes /readyz and /status. The texts are the clients' own,
whose secret values they already mask.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator

from mirrorlag.kafka.source import SourceAdmin
from mirrorlag.kafka.topic_reader import FeedConsumer
from mirrorlag.kafka.reachability import Change, ClusterState, Reachability

if TYPE_CHECKING:
    from mirrorlag.config.settings import Settings
    from mirrorlag.poll.poller import Poller

log = logging.getLogger("mirrorlag.cluster_watch")  # its name before the move (issue 42): operators' log filters

WATCH_INTERVAL_S = 0.2  # a refused connection is reported within this of librdkafka knowing it


class ClusterWatch:
    def __init__(self, settings: Settings, poller: Poller, on_change: Callable[[], None],
                 interval_s: float = WATCH_INTERVAL_S, clock: Callable[[], float] = time.time) -> None:
        aliases = dict.fromkeys(a for flow in settings.flows for a in (flow.source, flow.target))
        self.reachability = Reachability({a: settings.clusters[a].bootstrap_servers for a in aliases})
        self.sources = tuple(settings.source_aliases)
        self.poller = poller
        self.on_change = on_change
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()  # the watch thread and the poll thread both report
        # Per client (the id of its error record), or source read ("read", alias), the error last read.
        self._seen: dict[object, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirrorlag-cluster-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.look()
            except Exception as exc:  # a watch that fails must not take the sidecar's logs with it
                log.debug("cluster watch: %r", exc)

    def look(self) -> None:
        """Read the clients' new error reports (one look of the watch thread)."""
        for alias, owner, text in self._client_errors():
            # A text is new when it is another object than the one last read (each report makes
            # its own string): a report read before must not count again after a recovery.
            if text is not None and text is not self._seen.get(id(owner)):
                self._seen[id(owner)] = text
                self._report(lambda: self.reachability.client_error(alias, text, self.clock()))
        # A source read that failed in the running poll (a blackholed address times out, saying
        # nothing before): said then, not at the end of the poll, which has its feeds to read.
        for alias, error in list(self.poller.read_errors.items()):
            if error is not None and error is not self._seen.get(("read", alias)):
                self._seen["read", alias] = error
                now = self.clock()
                self._report(lambda: self.reachability.poll_result(alias, error, now, now))

    def _client_errors(self) -> Iterator[tuple[str, object, str | None]]:
        for alias, source in self.poller.sources.items():
            admin = source.admin
            if isinstance(admin, SourceAdmin):  # not a stand-in (benchmarks, tests)
                admin.poll(0)  # serves the error callbacks librdkafka has queued
                yield alias, admin, admin.last_error
        for feed in (*self.poller.feeds, *self.poller.heartbeats):
            reader = getattr(feed, "reader", None)
            if reader is not None:
                if isinstance(reader.consumer, FeedConsumer):
                    reader.consumer.serve_errors()
                yield reader.cluster_alias, reader.errors, reader.errors.last

    def after_poll(self, started: float) -> None:
        """A poll that began at `started` (clock time) ended: what it read confirms or clears."""
        now = self.clock()
        stats = self.poller.stats
        # Sources by their read; other clusters by their feeds (a feed's error on a source cluster
        # is the feed's, in /status feeds[], not the source read's).
        for alias, error in self.poller.read_errors.items():
            if alias in self.sources:
                self._report(lambda: self.reachability.poll_result(alias, error, now, started))
        by_cluster: dict[str, list[str | None]] = {}
        for health in stats.feeds:
            if health.cluster not in self.sources:
                by_cluster.setdefault(health.cluster, []).append(
                    None if health.up else health.last_error or f"{health.feed} feed: client error")
        for alias, errors in by_cluster.items():
            self._report(lambda: self.reachability.feeds_result(alias, errors, now, started))

    def _report(self, observe: Callable[[], Change | None]) -> None:
        with self._lock:
            change = observe()
            if change is None:
                return
            state = change.state
            if state.reachable:
                log.info("cluster %s (bootstrap.servers %s) reachable again%s", state.alias, state.bootstrap_servers,
                         f" after {change.down_for_s:.1f} s" if change.down_for_s is not None else "")
            else:
                log.warning("cluster %s (bootstrap.servers %s) %s: %s; retrying", state.alias, state.bootstrap_servers,
                            "still unreachable, now" if change.was_down else "unreachable", state.error)
        self.on_change()

    def source_down(self) -> ClusterState | None:
        """The first source cluster known to be unreachable: the sidecar is not ready."""
        with self._lock:
            return self.reachability.first_down(self.sources)

    def to_dict(self) -> dict[str, dict[str, object]]:
        with self._lock:
            return self.reachability.to_dict()
