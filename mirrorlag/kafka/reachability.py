"""Whether each cluster the sidecar reads is reachable, and why not: pure logic, no I/O, no clock.

Two kinds of evidence arrive. librdkafka's error callback speaks within milliseconds of a refused
connection, an unresolvable name or a failed TLS or SASL handshake, long before a request times
out; a poll's result comes at the end of the poll. A cluster the last poll read is not proven
down by the callback alone (one broker of several refusing, or an idle connection closed from
state UP, is no outage): only by librdkafka saying all its brokers are down, with a broker's own
failure naming why, or by a poll that failed to read it. One not read yet (at start, or since it
went down) is down at a broker's failure to connect. Only a poll that began after it went down
and read it proves it back (the callback has no word for "connected").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# librdkafka's words for "every broker of the cluster is down" (_ALL_BROKERS_DOWN).
_ALL_DOWN = re.compile(r"\b\d+/\d+ brokers are down\b")
# A broker's own report ("b1:9092/1: ...", "ssl://b1:9093/bootstrap: ..."), not a failed request's.
_FROM_BROKER = re.compile(r"\S+:\d+/\w+: ")
# An established connection that closed: it reconnects on demand; only the reconnect's failure tells.
_FROM_UP = re.compile(r"in state UP\b")
# The error code's name a feed's record puts first ("_TRANSPORT: "): the text says it in words.
_CODE = re.compile(r"^_?[A-Z][A-Z_]*: ")
# The tail of a librdkafka error that changes at each retry without changing its meaning,
# "(after 0ms in state CONNECT, 2 identical error(s) suppressed)", even where a client's record
# of it was cut short.
_NOISE = re.compile(r"\s*\((?:after \d+ms in state \w+)?(?:, )?(?:\d+ identical error\(s\) suppressed)?\)"
                    r"|\s*\((?:after \d+ms|\d+ identical error)[^)]*$")
# A Kafka response starts with its size, 4 bytes big-endian: an HTTP server's reply starts "HTTP",
# which librdkafka reads as a size of 0x48545450 and asks for a larger receive.message.max.bytes.
# The reporting broker's host:port is kept: bootstrap.servers may list several.
_HTTP_REPLY = re.compile(r"(?:(?:\w+://)?(?P<address>[^\s(]+:\d+)/\w+: )?(?:Receive failed: )?Invalid response size "
                         rf"{int.from_bytes(b'HTTP', 'big')} \(\d+\.\.\d+\)(?:: increase receive\.message\.max\.bytes)?")
# Failures told apart by what they say, whichever broker or address they name.
_KINDS = (("Failed to resolve", "resolve"), ("Connection refused", "refused"), ("SSL", "tls"),
          ("certificate", "tls"), ("SASL", "auth"), ("uthenticat", "auth"), ("timed out", "timeout"))


def cause_of(text: str) -> str:
    """An error's text without its code's name and the retry's timing and suppression counts:
    what /status and /readyz show, the same at every retry."""
    return _in_plain_words(_NOISE.sub("", _CODE.sub("", text, count=1)).strip())


def _in_plain_words(cause: str) -> str:
    """A cause whose words mislead said plainly: an HTTP server's reply is no oversized response."""
    return _HTTP_REPLY.sub(lambda m: f"{m['address'] or 'the address'} answers HTTP, not the Kafka protocol: "
                                     "is bootstrap.servers pointing at a web/REST port?", cause)


def without_broker(cause: str) -> str:
    """A cause without the broker that reported it ("b1:9092/1: "): what `check` prints beside
    the cluster's own bootstrap servers."""
    return _FROM_BROKER.sub("", cause, count=1) if _FROM_BROKER.match(cause) else cause


def _kind(cause: str) -> str:
    """What kind of failure a cause is ("refused", "tls", ...): the same failure from another
    broker, or cut short at another length, is no change."""
    body = _FROM_BROKER.split(cause, maxsplit=1)[-1]
    return next((kind for words, kind in _KINDS if words in body), body[:30])


@dataclass
class ClusterState:
    alias: str
    bootstrap_servers: str
    reachable: bool | None = None  # None: nothing known yet
    error: str | None = None  # why it is unreachable (secret values already masked by the client)
    since: float | None = None  # when `reachable` last changed (epoch s)
    # Callback evidence since the cluster was last read: all brokers down, and the latest cause.
    _all_down: bool = False
    _cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers, "reachable": self.reachable,
                "error": self.error, "since": self.since}

    def describe(self) -> str:
        """`cluster src (bootstrap.servers b1:9092): cause` -- what a log line or /readyz says."""
        return f"cluster {self.alias} (bootstrap.servers {self.bootstrap_servers}): {self.error}"


@dataclass(frozen=True)
class Change:
    """A cluster that went down, changed its cause, or came back: one log line each."""

    state: ClusterState
    was_down: bool = False  # down already, with another cause
    down_for_s: float | None = None  # on recovery: how long it was down


class Reachability:
    def __init__(self, bootstrap_servers: Mapping[str, str]) -> None:
        self.clusters = {alias: ClusterState(alias, servers) for alias, servers in bootstrap_servers.items()}

    def client_error(self, alias: str, text: str, now: float) -> Change | None:
        """A librdkafka error callback's text for a cluster's client."""
        state = self.clusters.get(alias)
        if state is None:
            return None
        if _ALL_DOWN.search(text):
            state._all_down = True
        elif _FROM_BROKER.search(text) and not _FROM_UP.search(text):
            state._cause = cause_of(text)
        if state._cause is not None and (state._all_down or state.reachable is not True):
            return self._down(state, state._cause, now)
        return None

    def poll_result(self, alias: str, error: str | None, now: float, poll_started: float) -> Change | None:
        """What a poll that began at `poll_started` and ended at `now` found of a cluster."""
        state = self.clusters.get(alias)
        if state is None:
            return None
        if error is not None:
            # A cause the callback already gave (refused, unresolvable) says more than the
            # request's timeout: it stays while the cluster stays down.
            return None if state.reachable is False else self._down(state, cause_of(error), now)
        if state.reachable is False and state.since is not None and state.since > poll_started:
            return None  # went down while this poll ran: its answers may predate that
        state._all_down, state._cause = False, None
        if state.reachable is None:
            state.reachable, state.since = True, now
            return None
        if state.reachable:
            return None
        down_for = now - state.since if state.since is not None else None
        state.reachable, state.error, state.since = True, None, now
        return Change(state, down_for_s=down_for)

    def feeds_result(self, alias: str, errors: Sequence[str | None], now: float,
                     poll_started: float) -> Change | None:
        """What a poll's feeds found of a cluster they read: each feed's error, None if it had
        none. A failed request is the poll failing to read the cluster; a broker's own report
        (one broker of several refusing, say) is left to client_error's rule."""
        failed = [error for error in errors if error is not None]
        if not failed:
            return self.poll_result(alias, None, now, poll_started)
        requests = [error for error in failed if not _FROM_BROKER.search(error)]
        return self.poll_result(alias, requests[0], now, poll_started) if requests else None

    def _down(self, state: ClusterState, cause: str, now: float) -> Change | None:
        was_down = state.reachable is False
        if was_down and state.error is not None and _kind(state.error) == _kind(cause):
            state.error = cause  # the same failure, from another broker or address: no new line
            return None
        if not was_down:
            state.since = now
        state.reachable, state.error = False, cause
        return Change(state, was_down)

    def first_down(self, aliases: tuple[str, ...]) -> ClusterState | None:
        """The first of `aliases` known to be unreachable."""
        return next((s for a in aliases if (s := self.clusters.get(a)) is not None and s.reachable is False), None)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {alias: state.to_dict() for alias, state in self.clusters.items()}
