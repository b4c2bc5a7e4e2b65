"""An open transaction through the simulation, at the isolation level MM2's own keys give the flow
(issue 30, case 3): tansu answers 0 to a READ_COMMITTED `latest` while a transaction is open
(docs/design.md §8), so this case is tested here. The model reads each log at one level, MM2's and the
sidecar's alike: the level the configuration resolves for both."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorlag.config import load_settings
from mirrorlag.model import State
from tests.sim.model import FLOW, Appends, Mirror, Phase, SimPartition, SourceLog, Txn, key, run
from tests.sim.test_transactions import check_transactions

K = key(0)
MM2 = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


@pytest.mark.parametrize(("keys", "level"), [
    ("", "read_uncommitted"),
    ("A.consumer.isolation.level = read_committed\n", "read_committed"),
    ("A->B.consumer.isolation.level = read_committed\n", "read_committed"),
])
def test_an_open_transaction_never_reads_behind_at_mm2s_level(tmp_path: Path, keys: str, level: str) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(MM2 + keys)
    isolation = load_settings([config]).flow(FLOW).isolation_level
    assert isolation == level
    # A transaction open from 100 s to 140 s (20 records, then its commit marker) among plain
    # records at 1/s, a mirror that copies within 5 ms: at read_committed neither MM2 nor the LEO
    # passes the transaction's first offset until it commits; the mirror is caught up throughout.
    log = SourceLog([Appends(300, 1.0)], initial=50, txns=[Txn(100.0, 20, True, 40.0)], isolation=isolation)
    res = run([SimPartition(K, log, Mirror(log, [Phase(400, 200.0)]))], interval=15.0, end=180.0, probe=True)
    check_transactions(res)
    rows = [r for _, r, _ in res.series(K)]
    assert all(r.state is State.IN_SYNC for r in rows), res.table(K)  # never LAGGING, never RESET
    held = [r.leo for p, r, _ in res.series(K) if 100.0 < p.t < 140.0]
    assert (set(held) == {150}) == (isolation == "read_committed"), held  # the LSO: the transaction's first offset
