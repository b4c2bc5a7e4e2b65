"""Does each cluster of `check`'s flows answer at all, and if not, why: what an UNKNOWN names.

`check` asks every cluster one DescribeCluster at its start, beside its own reads and on a client
of its own. librdkafka tells why a connection failed (refused, a name that does not resolve, a TLS
or SASL failure) only to a client's error callback, a cluster that never answers (a blackholed
address) says nothing at all, and the check's own reads, stuck in a request, cannot be asked.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mirrorlag.config.settings import ClusterSettings, Settings
from mirrorlag.check.deadline import Deadline
from mirrorlag.errors import MirrorlagError
from mirrorlag.kafka.source import LIBRDKAFKA_LOGGER, masked, refused_config, secret_values
from mirrorlag.kafka.reachability import cause_of, without_broker

POLL_S = 0.05  # how often a waiting probe serves librdkafka's error callbacks, and sees a stop
# How long an UNKNOWN waits for the other clusters' reasons once one source is found down: librdkafka
# tells a refused or unresolvable address within milliseconds, but not all at the same instant.
SETTLE_S = 0.25


def plain(error: str) -> str:
    """librdkafka's error text as an operator reads it: "127.0.0.1:1/bootstrap: Connect to ...
    failed: Connection refused (after 0ms in state CONNECT)" without the broker's name and the
    connection state's detail (the same cleaning as `run`'s reachability messages)."""
    return without_broker(cause_of(error))[:300]


@dataclass
class Reach:
    """One cluster as the probe found it: answered, or the reason librdkafka gave (None: none yet)."""

    alias: str
    roles: tuple[str, ...]  # "source", "target": what the cluster is to the flows
    bootstrap_servers: str
    answered: bool = False
    error: str | None = None
    down: bool = False  # librdkafka found every broker down (refused, unresolvable, a failed handshake)
    _generic: bool = False  # `error` only says every broker is down: a specific reason replaces it
    told: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)  # a reason, or done

    @property
    def name(self) -> str:
        return f"{' and '.join(self.roles)} cluster {self.alias} ({self.bootstrap_servers})"

    def reason(self, waited_s: float | None) -> str | None:
        """Why it has not answered: librdkafka's reason, else how long it was waited for (None:
        the check did not wait for it, having its answer from another cluster)."""
        return self.error or (f"no answer within {waited_s:g} s" if waited_s is not None else None)

    def record(self, text: str, all_down: bool) -> None:
        self.down |= all_down
        if self.error is None or (self._generic and not all_down):
            self.error, self._generic = text, all_down
        self.told.set()


class ReachProbes:
    """One daemon thread per cluster, each asking until it is answered, the deadline or stop().
    `wake` is set when a source cluster has every broker down: no verdict can come from it."""

    def __init__(self, settings: Settings, deadline: Deadline, wake: threading.Event) -> None:
        self.deadline = deadline
        self._wake = wake
        self._stop = threading.Event()
        sources = {f.source for f in settings.flows}
        targets = {f.target for f in settings.flows}
        self.reaches: list[Reach] = []
        self.threads: list[threading.Thread] = []
        for alias in sorted(sources | targets, key=lambda a: (a not in sources, a)):
            cluster = settings.clusters[alias]
            roles = tuple(role for role, aliases in (("source", sources), ("target", targets)) if alias in aliases)
            reach = Reach(alias, roles, cluster.bootstrap_servers)
            thread = threading.Thread(target=self._ask, args=(cluster, reach), name=f"reach-{alias}", daemon=True)
            self.reaches.append(reach)
            self.threads.append(thread)
            thread.start()

    def unanswered(self) -> Iterator[Reach]:
        return (reach for reach in self.reaches if not reach.answered)

    def sources_down(self) -> list[str]:
        return [r.alias for r in self.reaches if "source" in r.roles and r.down and not r.answered]

    def settle(self, seconds: float) -> None:
        """Waits up to `seconds` for each unanswered cluster to give its reason (or its probe to
        end): an UNKNOWN answered at one source's failure names the others' too."""
        end = time.monotonic() + seconds
        for reach in self.unanswered():
            reach.told.wait(max(0.0, end - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()

    def _ask(self, cluster: ClusterSettings, reach: Reach) -> None:
        try:
            self._ask_until_done(cluster, reach)
        finally:
            reach.told.set()

    def _ask_until_done(self, cluster: ClusterSettings, reach: Reach) -> None:
        secrets = secret_values(cluster)

        def record(err: KafkaError) -> None:
            reach.record(plain(masked(err.str(), secrets)), all_down=err.code() == KafkaError._ALL_BROKERS_DOWN)
            if reach.down and "source" in reach.roles:
                self._wake.set()

        try:
            with refused_config(cluster):
                admin = AdminClient({**cluster.client, "error_cb": record, "logger": LIBRDKAFKA_LOGGER})
            future = admin.describe_cluster(request_timeout=max(self.deadline.remaining(), 0.01))
        except (MirrorlagError, KafkaException) as exc:  # the check's own clients fail the same way: exit 2
            reach.error = masked(str(exc), secrets)[:300]
            return
        while not future.done() and not self._stop.is_set() and (left := self.deadline.remaining()) > 0:
            admin.poll(min(POLL_S, left))  # serves `record`
        admin.poll(0)
        if future.done():
            exc = future.exception()
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            # The cluster's own refusal (an authorization error, an old broker) is an answer too.
            reach.answered = exc is None or (isinstance(err, KafkaError) and err.code() > 0)
