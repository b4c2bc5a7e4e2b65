"""Partition states on the real MirrorMaker 2, judged against the truth read from the data.

Each test runs MM2 (dedicated mode, each pinned version) on a topic of its own and the sidecar
(`mirrorlag run` on the same mm2.properties) beside it, and holds every poll's answer to LRO_true
and lag_true read from the source and the remote topic (truth.py), and its timing to the bounds
of docs/states.md ("How fast each state turns"), measured from the event's own time in the same run.
"""

from __future__ import annotations

import json
import time

import pytest

from mirrorlag.embedded import free_port
from tests.apache.conftest import Mirror, set_default_producer_quota
from tests.apache.sidecar_watch import MAX_S, POLL_S, Poll, PollWatch, sidecar_properties
from tests.apache.truth import NumberedProducer, lag_true, lro_true
from tests.helpers import eventually, mirrorlag, running_sidecar

pytestmark = pytest.mark.integration


def start_copying(mirror: Mirror, partitions: int, records: int, extra: dict | None = None) -> tuple[str, NumberedProducer]:
    """A topic of the test's own with `records` in each partition, MM2 started on it and every
    record copied (by the truth, not by MM2's word)."""
    topic = f"orders-{mirror.tag}"
    mirror.clusters.create_topic(topic, partitions)
    producer = NumberedProducer(mirror.pair.source.bootstrap_servers, topic)
    producer.produce({p: records for p in range(partitions)})
    mirror.write_config(topic, extra)
    mirror.start()
    wait_all_copied(mirror, topic, partitions, timeout=90)
    return topic, producer


def truth(mirror: Mirror, topic: str, partition: int) -> int:
    return lro_true(mirror.pair.source.bootstrap_servers, topic, mirror.pair.target.bootstrap_servers,
                    mirror.remote(topic), partition)


def wait_all_copied(mirror: Mirror, topic: str, partitions: int, timeout: float) -> None:
    def copied() -> None:
        for p in range(partitions):
            leo = mirror.clusters.end_offset(topic, p)
            assert truth(mirror, topic, p) == leo - 1, f"partition {p} not copied yet"
    eventually(copied, timeout=timeout, interval=0.5)


def test_steady_then_paused_then_resumed(mirror, tmp_path):
    """Copying steadily every poll reads IN_SYNC with record lag within what one poll's interval
    produced; MM2 frozen (SIGSTOP) reads STALLED within max + one poll of the freeze, its record
    lag exactly lag_true; thawed under a produce quota it reads LAGGING, then IN_SYNC at lag 0."""
    topic, producer = start_copying(mirror, partitions=2, records=20)
    port = free_port()
    extra = sidecar_properties(tmp_path / "sidecar.properties", port)
    watch = PollWatch(port, topic)
    with running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log"):
        with producer.steadily(0.05, partition=0):
            watch.until(lambda p: p.rows[0]["lro_feed"] == "target-progress", 30, "target progress read")
            previous = watch.next()
            for _ in range(8):
                poll = watch.next()
                produced = producer.produced_between(previous.taken_at - POLL_S, poll.taken_at)
                for p, row in poll.rows.items():
                    assert row["state"] == "IN_SYNC", watch.describe(poll)
                    assert row["record_lag"] <= produced + 1, (produced, watch.describe(poll))
                previous = poll

            mirror.mm2.pause()
            paused_at = time.time()
            frozen = truth(mirror, topic, 0)
            stalled = watch.until(lambda p: p.rows[0]["state"] == "STALLED", MAX_S + 4 * POLL_S + 10,
                                  "STALLED after the freeze")
            # The bound, from the freeze's own time: the last copy is seen at the next poll, and the
            # LRO is stalled once it has not moved for max past that poll.
            first_after = next(p for p in watch.polls if p.taken_at >= paused_at)
            assert stalled.taken_at <= first_after.taken_at + MAX_S + 2 * POLL_S, watch.describe(stalled)
            for poll in watch.polls:
                if poll.taken_at >= first_after.taken_at + MAX_S + 2 * POLL_S:
                    assert poll.rows[0]["state"] == "STALLED", watch.describe(poll)
        assert truth(mirror, topic, 0) == frozen  # MM2 is frozen: nothing more was copied
        producer.produce({0: 30, 1: 5})
        leo = {p: mirror.clusters.end_offset(topic, p) for p in (0, 1)}
        exact = watch.until(lambda p: all(p.rows[q]["leo"] == leo[q] for q in (0, 1)), 10, "the new LEOs")
        for p in (0, 1):
            row = exact.rows[p]
            assert (row["lro"], row["record_lag"]) == (truth(mirror, topic, p), lag_true(leo[p], truth(mirror, topic, p))), \
                watch.describe(exact)
        assert exact.rows[0]["state"] == "STALLED", watch.describe(exact)

        result = mirrorlag("check", "--config", str(mirror.config), "--config", str(extra), "--json",
                           "--timeout", "8")
        rows = {r["partition"]: r for r in json.loads(result.stdout) if r["topic"] == topic}
        assert result.returncode == 2, result.stdout + result.stderr  # CRITICAL: STALLED
        assert rows[0]["state"] == "STALLED" and rows[0]["record_lag"] == lag_true(leo[0], frozen), rows

        # A backlog of many produce requests at 64 KiB/s takes MM2 several polls: the broker lets
        # a request through and then holds the client back, so one request's worth never would.
        set_default_producer_quota(mirror.pair, 65536)
        try:
            producer.produce({0: 20_000})
            # Seen by a poll while MM2 is frozen: the backlog is older than the poll before the
            # thaw (KIP-16 would rightly call a mirror that copies all a previous poll saw in sync).
            backlog = mirror.clusters.end_offset(topic, 0)
            watch.until(lambda p: p.rows[0]["leo"] == backlog, 10, "the backlog's LEO")
            mirror.mm2.resume()
            resumed = len(watch.polls)
            watch.until(lambda p: all(r["state"] == "IN_SYNC" for r in p.rows.values()), 90, "IN_SYNC again")
        finally:
            set_default_producer_quota(mirror.pair, None)
        after = [p.rows[0]["state"] for p in watch.polls[resumed:]]
        assert "LAGGING" in after, [watch.describe(p) for p in watch.polls[resumed:]]
        first_lagging = after.index("LAGGING")
        assert set(after[:first_lagging]) <= {"STALLED"}, after  # still frozen until MM2 moved
        assert "STALLED" not in after[first_lagging:], after  # copying again is never stalled
        final = watch.polls[-1]
        for p in (0, 1):
            assert final.rows[p]["lro"] == truth(mirror, topic, p) == final.rows[p]["leo"] - 1, watch.describe(final)
            assert final.rows[p]["record_lag"] == 0


def test_killed_and_restarted(mirror, tmp_path):
    """MM2 killed (SIGKILL) while copying, then started again: it resumes from its last committed
    offsets and copies some records twice. The sidecar never claims more copied than really was
    (its LRO never above LRO_true read after its poll), never loses the LRO, raises no state the
    events do not explain, and reads IN_SYNC with lag 0 once MM2 has caught up."""
    topic, producer = start_copying(mirror, partitions=1, records=50)
    port = free_port()
    extra = sidecar_properties(tmp_path / "sidecar.properties", port)
    watch = PollWatch(port, topic)

    def checked(poll: Poll) -> Poll:
        row = poll.rows[0]
        true_lro = truth(mirror, topic, 0)  # read after the poll: LRO_true then can only be higher
        assert row["lro"] is not None and row["lro"] <= true_lro, (true_lro, watch.describe(poll))
        assert row["record_lag"] >= lag_true(row["leo"], true_lro), (true_lro, watch.describe(poll))
        assert row["state"] in {"IN_SYNC", "LAGGING", "STALLED", "REWIND"}, watch.describe(poll)
        return poll

    with running_sidecar(mirror.config, extra, port=port, log=tmp_path / "sidecar.log"):
        with producer.steadily(0.05, partition=0):
            watch.until(lambda p: checked(p).rows[0]["state"] == "IN_SYNC"
                        and p.rows[0]["lro_feed"] == "target-progress", 30, "IN_SYNC on target progress")
            for _ in range(3):
                checked(watch.next())
            mirror.mm2.kill()
            killed_at = time.time()
            for _ in range(2):
                checked(watch.next())
            mirror.start()
            watch.until(lambda p: checked(p).rows[0]["lro"] > truth(mirror, topic, 0) - 50
                        and p.taken_at > killed_at + MAX_S, 90, "copying again")
        leo = mirror.clusters.end_offset(topic, 0)
        final = watch.until(lambda p: checked(p).rows[0]["leo"] == leo and p.rows[0]["state"] == "IN_SYNC",
                            60, "IN_SYNC after the restart")
        assert final.rows[0]["lro"] == truth(mirror, topic, 0) == leo - 1, watch.describe(final)
        assert final.rows[0]["record_lag"] == 0
