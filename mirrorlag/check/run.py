"""`mirrorlag check`: one verdict for cron, Nagios and humans, within `--timeout`.

A single look cannot say how long a partition has been behind, so the check applies KIP-16's rule
over its own window: a partition is IN_SYNC when it is caught up, or when within the window the
mirror copies every record that existed when the check began. One that does not is LAGGING, or
STALLED when its last replicated offset never moved. The window is `--timeout`, capped at the
flow's replication.lag.time.max.ms.

`--timeout` bounds the whole run, Nagios-style: the reads run on a worker thread, and at the
deadline the check answers with what it has. Its exit codes are Nagios' (check_output.Status):
0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (a cluster could not be read, no answer came within the
timeout, or a configuration or usage error), and its first line is a Monitoring Plugins status
line with perfdata (check_output).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from mirrorlag.check.deadline import Deadline
from mirrorlag.check.groups import answer as answer_groups
from mirrorlag.check.groups import read_groups
from mirrorlag.check.output import Status, Thresholds, Window, partitions_verdict, unknown_line
from mirrorlag.check.reach import SETTLE_S, ReachProbes
from mirrorlag.config import load_settings
from mirrorlag.config.settings import Settings
from mirrorlag.config.strimzi import StrimziSource
from mirrorlag.errors import MirrorlagError
from mirrorlag.exporters.status import row_to_dict
from mirrorlag.groups.monitor import GroupsSnapshot
from mirrorlag.feeds.external import build_feeds
from mirrorlag.model import PartitionKey, PartitionRow, State
from mirrorlag.poll.poller import Poller
from mirrorlag.poll.wiring import lag_engine

EXIT_OK, EXIT_WARNING, EXIT_UNKNOWN = Status.OK, Status.WARNING, Status.UNKNOWN
RECHECK_INTERVAL_S = 1.0
# Kept at the end of --timeout: the window's last poll answers, the clients close, the verdict prints.
RESERVE_S = 0.5
# How long past the deadline the threads get to end (a probe sees its stop within its poll) before
# the process exits without them: a librdkafka client closing against a dead cluster can block.
GRACE_S = 0.05
# States the check's own window cannot clear: waiting does not bring deleted records back.
FINAL = (State.UNKNOWN, State.RESET, State.AT_RISK)

log = logging.getLogger("mirrorlag.check")


class SourceUnread(Exception):
    """A poll could not read these source clusters: no verdict on their partitions."""

    def __init__(self, aliases: Sequence[str]) -> None:
        super().__init__(", ".join(aliases))
        self.aliases = tuple(aliases)


@dataclass
class _Work:
    """The worker's progress, read by the main thread when it answers or at the deadline."""

    phase: str = "creating the clients"
    rows: list[PartitionRow] | None = None  # the verdict so far: set after the first poll, then after each
    groups: GroupsSnapshot | None = None  # check --groups: the groups' readiness, once read
    error: BaseException | None = None
    window: Window | None = None  # set when the window ended before KIP-16's full one
    answered: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)  # an answer, or a source found down


@dataclass(frozen=True)
class Output:
    """How the verdict is shown: `verbose` adds the per-partition table, `quiet` prints nothing when OK."""

    as_json: bool = False
    verbose: bool = False
    quiet: bool = False
    thresholds: Thresholds = Thresholds()


def run_check(config_paths: Sequence[str], as_json: bool, timeout_s: float, started: float | None = None,
              groups: bool = False, output: Output | None = None, strimzi: StrimziSource | None = None) -> int:
    """The check's exit status; `started` (time.monotonic()) is when the command began, so that
    the timeout counts its imports too. `groups`: the consumer groups' failover readiness instead
    of the partitions' states (check_groups)."""
    output = dataclasses.replace(output or Output(), as_json=as_json)
    if timeout_s <= 0:
        raise MirrorlagError(f"--timeout must be positive, got {timeout_s}")
    deadline = Deadline.after(timeout_s, started)
    settings = load_settings(config_paths, strimzi)
    # librdkafka refuses a socket timeout under 10 ms
    settings = dataclasses.replace(settings, request_timeout_s=min(settings.request_timeout_s, max(timeout_s, 0.01)))
    work = _Work()
    reach = ReachProbes(settings, deadline, work.wake)
    worker = threading.Thread(target=_work, args=(settings, deadline, work, groups), name="check", daemon=True)
    worker.start()
    work.wake.wait(deadline.remaining())
    if not work.answered.is_set() or isinstance(work.error, SourceUnread):  # UNKNOWN: say why of each
        reach.settle(min(SETTLE_S, deadline.remaining()))
    reach.stop()
    if work.answered.is_set() and work.error is not None and not isinstance(work.error, SourceUnread):
        raise work.error  # a client librdkafka would not build (exit 2), or a bug
    status = _answer(work, reach, deadline, output)
    # A worker that answered is closing its clients: it gets until the deadline. One that did not is
    # stuck in a read that the verdict no longer needs.
    _leave([worker, *reach.threads], deadline.at if work.answered.is_set() else 0.0, status)
    return status


def _work(settings: Settings, deadline: Deadline, work: _Work, groups: bool = False) -> None:
    poller = None
    try:
        poller = Poller(settings, lag_engine(settings), build_feeds(settings))
        work.phase = "reading the clusters"
        if groups:
            rows = _poll(poller)  # the LROs a group's re-read is counted against
            work.phase = "reading the consumer groups"
            work.groups = read_groups(settings, rows, max(0.01, deadline.remaining() - RESERVE_S))
            work.rows = rows
        else:
            work.rows = _observe(poller, deadline.seconds, deadline, work)
    except BaseException as exc:  # handed to the main thread
        work.error = exc
    finally:
        work.answered.set()
        work.wake.set()
        if poller is not None:
            poller.close()  # the feeds' consumers and the source probe's; may block: the main thread does not wait


def _answer(work: _Work, reach: ReachProbes, deadline: Deadline, output: Output) -> int:
    """Prints the verdict and returns its exit status."""
    as_json = output.as_json
    if unread := _unread_sources(work, reach):
        return _unknown(f"could not read source cluster {', '.join(unread)}", reach, deadline, as_json, unread)
    rows = work.rows
    if rows is None:  # not even a first poll answered
        return _unknown(f"timed out after {deadline.seconds:g} s {work.phase}", reach, deadline, as_json)
    if work.groups is not None:
        return answer_groups(work.groups, as_json, output.verbose, output.quiet)
    verdict = partitions_verdict(rows, output.thresholds, work.window)
    if as_json:
        json.dump([row_to_dict(r) for r in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return verdict.status
    if not (output.quiet and verdict.status is Status.OK):
        print(verdict.line)
    if output.verbose or (sys.stdout.isatty() and not output.quiet):
        _print_table(rows)
    return verdict.status


def _unread_sources(work: _Work, reach: ReachProbes) -> Sequence[str]:
    """The source clusters the check could not read: those a poll failed on, or, before the
    poll answers, those with every broker down (waiting for the timeout would not change that)."""
    if isinstance(work.error, SourceUnread):
        return work.error.aliases
    return () if work.answered.is_set() else reach.sources_down()


def _unknown(reason: str, reach: ReachProbes, deadline: Deadline, as_json: bool,
             unread: Sequence[str] = ()) -> int:
    """UNKNOWN: the reason and, per cluster that did not answer (or could not be read), why."""
    # Clusters still being waited for are "no answer" only once the deadline passed.
    waited = deadline.seconds if deadline.remaining() == 0 else None
    details = [(r.name, why) for r in reach.unanswered() if (why := r.reason(waited)) is not None]
    details += [(r.name, "answered, but its metadata or end offsets could not be read")
                for r in reach.reaches if r.answered and r.alias in unread]
    if as_json:
        json.dump({"status": "UNKNOWN", "reason": reason, "clusters": [
            {"cluster": r.alias, "roles": list(r.roles), "bootstrap_servers": r.bootstrap_servers,
             "answered": r.answered, "error": None if r.answered else r.reason(waited)}
            for r in reach.reaches]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(unknown_line(reason))
        for name, why in details or [("every cluster", "answered; the check's own reads did not end in time")]:
            print(f"  {name}: {why}")
    return EXIT_UNKNOWN


def _leave(threads: Sequence[threading.Thread], until: float, status: int) -> None:
    """Waits for the check's threads until `until` (time.monotonic(); at least a grace); exits
    the process at once if one is still in librdkafka, which would otherwise hold it open."""
    end = max(until, time.monotonic() + GRACE_S)
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(status)


def _observe(poller: Poller, timeout_s: float, deadline: Deadline | None = None,
             work: _Work | None = None) -> list[PartitionRow]:
    """The verdict of the check's window. With `work`, the verdict as of each poll is published
    there too: a poll of the window still out at the deadline leaves the verdict of the one before."""
    start = time.monotonic()
    rows = _poll(poller)
    took = time.monotonic() - start  # a poll's duration, to start none that would end past the deadline
    first_leo = {r.key: r.leo for r in rows}
    first_lro = {r.key: r.lro for r in rows}
    resolved = {r.key for r in rows if _settled(r, None)}

    def verdict() -> list[PartitionRow]:
        return [_verdict(r, r.key in resolved, first_lro.get(r.key)) for r in rows]

    # UNKNOWN, RESET and AT_RISK cannot settle by waiting; everything else gets its window (an
    # UNKNOWN that is only a time lag the probe could not prove too: the window can prove it).
    waiting = {r.key for r in rows if r.key not in resolved and not _final(r)}
    log.debug("first poll: %d partition(s) read, %d behind to watch", len(rows), len(waiting))
    polled = 0.0  # when the window's last poll began
    while waiting:
        if work is not None:  # published with the verdict: the deadline may come during the next poll
            work.rows, work.window = verdict(), _window(poller, waiting, polled - start if polled else 0.0)
        window = max(min(timeout_s, poller.settings.flow(k.flow).engine.lag_time_max_s) for k in waiting)
        now = time.monotonic()
        if now - start + RECHECK_INTERVAL_S > window:
            break
        if deadline is not None and now + RECHECK_INTERVAL_S + took + RESERVE_S > deadline.at:
            break  # the window ends where the whole run must
        time.sleep(RECHECK_INTERVAL_S)
        polled = time.monotonic()
        rows = [r for r in _poll(poller) if r.key in first_leo]
        took = time.monotonic() - polled
        settled = {r.key for r in rows if r.key in waiting and _settled(r, first_leo[r.key])}
        resolved |= settled
        waiting -= settled
    if work is not None:
        work.window = _window(poller, waiting, polled - start if polled else 0.0)
    return verdict()


def _window(poller: Poller, waiting: set[PartitionKey], watched_s: float) -> Window | None:
    """How long the partitions still behind were watched, of KIP-16's window (their flows'
    replication.lag.time.max.ms): a partition judged on less may yet catch up in time."""
    if not waiting:
        return None
    return Window(watched_s, max(poller.settings.flow(k.flow).engine.lag_time_max_s for k in waiting))


def _poll(poller: Poller) -> list[PartitionRow]:
    snapshot = poller.poll_once()
    if poller.stats.poll_errors_total:
        raise SourceUnread(sorted(poller.stats.poll_errors_total))
    return [r for r in snapshot.rows if r.state is not State.GONE]


def _final(row: PartitionRow) -> bool:
    """A state the check's window cannot clear. A flagged lower bound (the probe could not date
    record LRO + 1) is no such state: copying all that existed when the check began proves it."""
    return row.state in FINAL and not (row.state is State.UNKNOWN and row.time_lag_lower_bound)


def _settled(row: PartitionRow, leo_at_start: int | None) -> bool:
    """Caught up now, or the mirror has copied everything that existed when the check began."""
    if _final(row):
        return False
    if row.record_lag == 0:  # an empty partition has no LRO, and nothing to copy
        return True
    return row.lro is not None and leo_at_start is not None and row.lro + 1 >= leo_at_start


def _verdict(row: PartitionRow, resolved: bool, lro_at_start: int | None) -> PartitionRow:
    # REWIND as the engine said it: MM2 resumed from an older commit during the window and copies
    # records again (duplicates on the target), a WARNING even where it caught up before.
    if _final(row) or row.state is State.REWIND:
        return row
    if resolved:
        return row._replace(state=State.IN_SYNC)
    moved = row.lro != lro_at_start
    return row._replace(state=State.LAGGING if moved else State.STALLED)


# The table's columns: the keys of /status and `check --json` (row_to_dict), so one name means one thing.
COLUMNS = ("flow", "topic", "partition", "leo", "lro", "record_lag", "time_lag_s", "state", "lro_feed")
NUMERIC = {"partition", "leo", "lro", "record_lag", "time_lag_s"}


def _print_table(rows: list[PartitionRow]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    if not rows:
        console.print("no partitions in the configured flows")
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in NUMERIC else "left")
    for r in rows:
        d = row_to_dict(r)
        lag = d["time_lag_s"]
        d["time_lag_s"] = None if lag is None else f"{'>=' if r.time_lag_lower_bound else ''}{lag:.1f}"
        table.add_row(*("-" if d[c] is None else str(d[c]) for c in COLUMNS))
    console.print(table)
