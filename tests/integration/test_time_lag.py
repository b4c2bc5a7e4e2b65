"""Time, freshness and state on real brokers: a stalled mirror, a burst, an idle partition.

The mirror is `mirrorlag mirror` with offset.lag.max = 0 (a sync per record) and a short offset
flush, so the LRO the sidecar sees trails the mirror by well under one refresh interval.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from mirrorlag.embedded import free_port
from tests.conftest import Clusters
from tests.helpers import eventually, running_sidecar, status

pytestmark = pytest.mark.integration

MAX_S = 3.0  # replication.lag.time.max.ms
REFRESH_S = 0.5
POLL_SLACK_S = 3 * REFRESH_S  # polls slip on a loaded 2-core machine; the bounds are per actual poll


class Flow:
    def __init__(self, tmp_path: Path, clusters: Clusters) -> None:
        tag = uuid.uuid4().hex[:8]
        self.clusters, self.topic = clusters, f"t-{tag}"
        self.port = free_port()
        self.config = tmp_path / "mm2.properties"
        self.config.write_text(
            f"clusters = s{tag}, d{tag}\ns{tag}.bootstrap.servers = {clusters.source}\n"
            f"d{tag}.bootstrap.servers = {clusters.target}\ns{tag}->d{tag}.enabled = true\n"
            f"s{tag}->d{tag}.topics = {self.topic}\noffset.lag.max = 0\nd{tag}.offset.flush.interval.ms = 200\n"
            f"mirrorlag.http.listener = 127.0.0.1:{self.port}\n"
            f"replication.record.lag.metric.refresh.interval = {int(REFRESH_S * 1000)}\n"
            f"replication.lag.time.max.ms = {int(MAX_S * 1000)}\nmetrics.sample.window.ms = 2000\n"
        )
        clusters.create_topic(self.topic, 1)

    def row(self) -> dict:
        (row,) = [r for r in status(self.port)["partitions"] if r["topic"] == self.topic]
        return row


@pytest.fixture
def flow(tmp_path: Path, own_clusters: Clusters) -> Iterator[tuple[Flow, subprocess.Popen[bytes]]]:
    flow = Flow(tmp_path, own_clusters)
    with open(tmp_path / "mirror.log", "ab") as log:
        mirror = subprocess.Popen([sys.executable, "-m", "mirrorlag", "mirror", "--config", str(flow.config)],
                                  stdout=log, stderr=log)
    try:
        with running_sidecar(flow.config, port=flow.port, log=tmp_path / "sidecar.log"):
            yield flow, mirror
    finally:
        mirror.send_signal(signal.SIGTERM)
        mirror.wait(timeout=10)


def test_an_idle_caught_up_partition_stays_in_sync_with_zero_freshness(flow):
    flow, _ = flow
    flow.clusters.produce(flow.topic, {0: 10})
    eventually(lambda: _expect(flow.row(), state="IN_SYNC", record_lag=0, leo=10))
    time.sleep(2 * MAX_S)  # idle for longer than the window: no NaN, no growing freshness
    row = flow.row()
    assert (row["state"], row["record_lag"], row["time_lag_s"], row["freshness_lag_s"]) == ("IN_SYNC", 0, 0.0, 0.0)


def test_a_stalled_mirror_goes_stalled_and_its_time_lags_grow(flow):
    flow, mirror = flow
    flow.clusters.produce(flow.topic, {0: 5})
    eventually(lambda: _expect(flow.row(), state="IN_SYNC", record_lag=0, leo=5))
    mirror.send_signal(signal.SIGUSR1)
    time.sleep(1.0)  # the pause takes effect; the last offsets are flushed
    produced_at = time.time()
    flow.clusters.produce(flow.topic, {0: 4})

    def stalled() -> dict:
        row = flow.row()
        _expect(row, state="STALLED", record_lag=4, leo=9, lro=4)
        return row
    row = eventually(stalled, timeout=MAX_S + 6 * REFRESH_S + 5)
    elapsed = time.time() - produced_at
    # Time lag counts from the last poll before the records arrived: high by at most the actual
    # spacing of polls, which on a busy machine can exceed the configured interval.
    assert MAX_S < row["time_lag_s"] <= elapsed + POLL_SLACK_S
    # The oldest uncopied record (offset 5) was appended right after produced_at.
    assert not row["freshness_lower_bound"]
    assert elapsed - POLL_SLACK_S - 1 <= row["freshness_lag_s"] <= elapsed + POLL_SLACK_S

    mirror.send_signal(signal.SIGUSR2)
    eventually(lambda: _expect(flow.row(), state="IN_SYNC", record_lag=0, leo=9))


def test_a_burst_copied_within_the_window_never_leaves_in_sync(flow):
    flow, _ = flow
    flow.clusters.produce(flow.topic, {0: 1})
    eventually(lambda: _expect(flow.row(), state="IN_SYNC", record_lag=0, leo=1))
    seen: set[str] = set()
    flow.clusters.produce(flow.topic, {0: 300})
    deadline = time.monotonic() + MAX_S + 2
    while time.monotonic() < deadline:
        seen.add(flow.row()["state"])
        time.sleep(REFRESH_S / 3)
    assert seen == {"IN_SYNC"}
    assert flow.row()["record_lag"] == 0


def _expect(row: dict, **fields) -> None:
    assert {k: row[k] for k in fields} == fields
