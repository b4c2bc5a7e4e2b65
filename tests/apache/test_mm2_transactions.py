"""Transactions on the real MirrorMaker 2, judged against the truth read from the data.

- A source topic written in committed transactions and one aborted one (on Kafka the aborted
  records and both kinds of marker take offsets), mirrored by one MM2 through three flows from the
  same source broker under three aliases: one whose consumer reads read_uncommitted (MM2's default:
  it copies the aborted records too) and two at read_committed, set in each of the forms MM2
  honours (`<source>.consumer.isolation.level` and `<source>-><target>.consumer.isolation.level`),
  their offset syncs on the target (`offset-syncs.topic.location = target`). Once everything each
  consumer would read is copied, all read IN_SYNC at record lag 0 though markers (and, for the
  read_committed flows, aborted records) stand between the last copy and the LEO; frozen, none
  hides the records produced since; thawed, all are IN_SYNC at 0 again. A transaction left open
  is copied at read_uncommitted and owed by nobody at read_committed (LEO = LSO) until it commits.
- MM2 writing the target transactionally (`<target>.exactly.once.source.support = enabled`): the
  commit markers take target offsets, so target progress is off (named in `/status`), no
  duplicate is counted, and no lag is invented or hidden.
Each claim is read through the real CLI (`mirrorlag check --json`, the sidecar's `/status` and
`/metrics`) on each pinned Kafka version.
"""

from __future__ import annotations

import time
import uuid

import pytest

from mirrorlag.embedded import free_port
from tests.apache.flow_watch import FlowWatch, TxnProducer, check_rows, last_data_offset, start_mm2
from tests.apache.sidecar_watch import MAX_S, POLL_S, sidecar_properties
from tests.apache.truth import NumberedProducer, lag_true, lro_true, read_partition
from tests.helpers import eventually, labels, running_sidecar, scrape, status

pytestmark = pytest.mark.integration


def test_transactional_source_at_both_isolation_levels(apache_pair, tmp_path):
    """Committed and aborted transactions copied at read_uncommitted and read_committed: caught up
    is IN_SYNC at 0 on both flows; a freeze shows every record owed; a thaw catches up again."""
    pair, tag = apache_pair, uuid.uuid4().hex[:8]
    ru, rc, rk, dst = f"u{tag}", f"c{tag}", f"k{tag}", f"d{tag}"
    ru_flow, rc_flow, rk_flow = f"{ru}->{dst}", f"{rc}->{dst}", f"{rk}->{dst}"
    source, target = pair.source.bootstrap_servers, pair.target.bootstrap_servers
    topic = f"txn-{tag}"
    pair.clusters.create_topic(topic, 1)
    txn = TxnProducer(source, topic)
    txn.transaction(10)
    txn.transaction(5)
    txn.transaction(4, commit=False)  # the log ends: commit marker, 4 aborted records, abort marker
    leo = pair.clusters.end_offset(topic)
    assert leo == 10 + 1 + 5 + 1 + 4 + 1, leo
    last = {ru_flow: last_data_offset(source, topic, 0, "read_uncommitted"),
            rc_flow: last_data_offset(source, topic, 0, "read_committed")}
    assert last == {ru_flow: 20, rc_flow: 15}, last
    last[rk_flow] = last[rc_flow]
    remote = {ru_flow: f"{ru}.{topic}", rc_flow: f"{rc}.{topic}", rk_flow: f"{rk}.{topic}"}

    def truth(flow: str) -> int:
        return lro_true(source, topic, target, remote[flow], 0)

    def copied_all() -> None:
        for flow in remote:
            assert truth(flow) == last[flow], (flow, truth(flow), last[flow])

    # Three aliases of one source broker: MM2's default level; read_committed set for the source
    # cluster's consumer; and set for one flow's (`A->B.consumer.`). Each flow's offset syncs in a
    # topic of its own (two on the source would share mm2-offset-syncs.<target>.internal).
    clusters = {ru: source, rc: source, rk: source, dst: target}
    extra = {f"{ru_flow}.topics": topic, f"{rc_flow}.topics": topic, f"{rk_flow}.topics": topic,
             f"{rc}.consumer.isolation.level": "read_committed",
             f"{rk_flow}.consumer.isolation.level": "read_committed",
             f"{rc_flow}.offset-syncs.topic.location": "target",
             f"{rk_flow}.offset-syncs.topic.location": "target",
             "emit.checkpoints.enabled": "false"}
    mm2 = start_mm2(pair.jars, tmp_path / "mm2", clusters, [ru_flow, rc_flow, rk_flow], extra, (dst,))
    try:
        eventually(copied_all, timeout=120, interval=0.5)
        # What MM2 really did: read_committed copied no aborted record; read_uncommitted copied them.
        values = {flow: [v for _, v in read_partition(target, remote[flow], 0, "read_uncommitted")]
                  for flow in remote}
        assert len(values[rc_flow]) == len(values[rk_flow]) == 15 and len(values[ru_flow]) >= 19, values

        port = free_port()
        side = sidecar_properties(tmp_path / "sidecar.properties", port)
        watch = FlowWatch(port, topic)
        with running_sidecar(mm2.properties, side, port=port, log=tmp_path / "sidecar.log"):
            caught = watch.until(lambda p: all(p.rows.get((f, 0), {}).get("state") == "IN_SYNC"
                                               and p.rows[(f, 0)]["record_lag"] == 0 for f in remote),
                                 30, "both flows IN_SYNC at record lag 0")
            for flow in remote:
                row = caught.rows[(flow, 0)]
                assert row["leo"] == leo and row["lro"] <= truth(flow), watch.describe(caught)
            # The level mirrorlag reads each flow's LEO at is the one MM2's consumer really used.
            levels = {f["flow"]: f["mm2_isolation_level"] for f in status(port)["flows"]}
            assert levels == {ru_flow: "read_uncommitted", rc_flow: "read_committed", rk_flow: "read_committed"}, levels
            doc_feeds = caught.feeds
            syncs_on_target = [f for f in doc_feeds if f.get("feed") == "offset-syncs" and f.get("cluster") == dst]
            assert syncs_on_target and f"mm2-offset-syncs.{rc}.internal" in syncs_on_target[0]["topics"], doc_feeds
            metrics = scrape(port)
            for flow, alias in ((ru_flow, ru), (rc_flow, rc), (rk_flow, rk)):
                series = ("mirrorlag_replication_record_lag", labels(source=alias, target=dst, topic=topic, partition=0))
                assert metrics.get(series) == 0, (series, {k: v for k, v in metrics.items() if k[0] == series[0]})
            code, rows, out = check_rows(mm2.properties, side, topic=topic)
            assert code == 0, out
            assert all(rows[(f, 0)]["state"] == "IN_SYNC" and rows[(f, 0)]["record_lag"] == 0 for f in remote), out

            # A transaction left open: read_uncommitted copies its records, read_committed cannot
            # read them yet (its LEO is the LSO), so neither owes anything.
            txn.begin(3)
            open_ = {ru_flow: (leo + 3, leo + 2), rc_flow: (leo, last[rc_flow]), rk_flow: (leo, last[rk_flow])}
            eventually(lambda: [truth(f) for f in remote] == [open_[f][1] for f in remote], timeout=60, interval=0.5)
            watch.until(lambda p: all(p.rows[(f, 0)]["leo"] == open_[f][0] and p.rows[(f, 0)]["state"] == "IN_SYNC"
                                      and p.rows[(f, 0)]["record_lag"] == 0 for f in remote),
                        30, "IN_SYNC at 0 beside an open transaction")
            txn.commit()
            leo = pair.clusters.end_offset(topic)
            last = dict.fromkeys(remote, leo - 2)
            eventually(copied_all, timeout=60, interval=0.5)
            watch.until(lambda p: all(p.rows[(f, 0)]["leo"] == leo and p.rows[(f, 0)]["state"] == "IN_SYNC"
                                      and p.rows[(f, 0)]["record_lag"] == 0 for f in remote),
                        30, "IN_SYNC at 0 once it committed")

            # Frozen: a committed transaction more is owed by all flows, and none hides it.
            mm2.pause()
            frozen = {flow: truth(flow) for flow in remote}
            paused_at = time.time()
            txn.transaction(6)
            leo = pair.clusters.end_offset(topic)
            seen = watch.until(lambda p: all(p.rows[(f, 0)]["leo"] == leo for f in remote), 15, "the new LEO")
            for flow in remote:
                row = seen.rows[(flow, 0)]
                assert row["record_lag"] >= lag_true(leo, frozen[flow]) >= 6, (frozen, watch.describe(seen))
            stalled = watch.until(lambda p: all(p.rows[(f, 0)]["state"] == "STALLED" for f in remote),
                                  MAX_S + 6 * POLL_S + 10, "both STALLED")
            assert stalled.taken_at <= paused_at + MAX_S + 6 * POLL_S + 5, watch.describe(stalled)
            for poll in watch.polls[watch.polls.index(seen):]:  # the lag never hidden while frozen
                for flow in remote:
                    assert poll.rows[(flow, 0)]["record_lag"] >= lag_true(leo, frozen[flow]), watch.describe(poll)
            code, rows, out = check_rows(mm2.properties, side, topic=topic)
            # Stalled past a flush: the syncs and commits name the last copy, so the lag is exact.
            assert code == 2 and all(rows[(f, 0)]["state"] == "STALLED"
                                     and rows[(f, 0)]["record_lag"] == lag_true(leo, frozen[f]) for f in remote), out

            mm2.resume()
            watch.until(lambda p: all(p.rows[(f, 0)]["state"] == "IN_SYNC" and p.rows[(f, 0)]["record_lag"] == 0
                                      for f in remote), 60, "IN_SYNC at 0 after the thaw")
            assert {flow: truth(flow) for flow in remote} == dict.fromkeys(remote, leo - 2)
    finally:
        mm2.stop()


def test_exactly_once_target(mirror, tmp_path):
    """MM2 writing the target in transactions: markers take target offsets, and still no duplicate
    is counted, target progress says why it is off, caught up reads IN_SYNC at 0, and a freeze
    reads STALLED with every record owed."""
    topic = f"eos-{mirror.tag}"
    mirror.clusters.create_topic(topic, 1)
    producer = NumberedProducer(mirror.pair.source.bootstrap_servers, topic)
    producer.produce({0: 30})
    mirror.write_config(topic, {f"{mirror.dst}.exactly.once.source.support": "enabled",
                                "emit.checkpoints.enabled": "false"})
    mirror.start()
    source, target, remote = mirror.pair.source.bootstrap_servers, mirror.pair.target.bootstrap_servers, mirror.remote(topic)

    def truth() -> int:
        return lro_true(source, topic, target, remote, 0)

    def copied() -> None:
        assert truth() == mirror.clusters.end_offset(topic) - 1

    eventually(copied, timeout=120, interval=0.5)
    port = free_port()
    side = sidecar_properties(tmp_path / "sidecar.properties", port)
    watch = FlowWatch(port, topic)
    flow = f"{mirror.src}->{mirror.dst}"
    key = (flow, 0)
    with running_sidecar(mirror.config, side, port=port, log=tmp_path / "sidecar.log"):
        # Copying in many small transactions: each batch MM2 copies ends with a commit marker.
        for _ in range(5):
            producer.produce({0: 7})
            eventually(copied, timeout=60, interval=0.3)
        leo = mirror.clusters.end_offset(topic)
        records = len(read_partition(target, remote, 0))
        assert mirror.clusters.end_offset(remote, which="target") > records, "no marker on the target"
        caught = watch.until(lambda p: p.rows[key]["leo"] == leo and p.rows[key]["state"] == "IN_SYNC"
                             and p.rows[key]["record_lag"] == 0, 30, "IN_SYNC at 0")
        assert caught.rows[key]["lro"] == truth() == leo - 1, watch.describe(caught)
        off = [o for f in caught.feeds if f.get("feed") == "target-progress" for o in f.get("off", [])]
        assert any("exactly.once.source.support" in o["reason"] for o in off), caught.feeds
        metrics = scrape(port)
        dup = metrics.get(("mirrorlag_mirror_duplicate_records_total",
                           labels(source=mirror.src, target=mirror.dst, topic=topic)), 0)
        assert dup == 0, {k: v for k, v in metrics.items() if "duplicate" in k[0]}
        code, rows, out = check_rows(mirror.config, side, topic=topic)
        assert code == 0 and rows[key]["state"] == "IN_SYNC" and rows[key]["record_lag"] == 0, out

        mirror.mm2.pause()
        frozen = truth()
        producer.produce({0: 12})
        leo = mirror.clusters.end_offset(topic)
        stalled = watch.until(lambda p: p.rows[key]["leo"] == leo and p.rows[key]["state"] == "STALLED",
                              MAX_S + 6 * POLL_S + 15, "STALLED after the freeze")
        assert stalled.rows[key]["record_lag"] >= lag_true(leo, frozen) == 12, watch.describe(stalled)
        mirror.mm2.resume()
        final = watch.until(lambda p: p.rows[key]["state"] == "IN_SYNC" and p.rows[key]["record_lag"] == 0,
                            60, "IN_SYNC at 0 after the thaw")
        assert final.rows[key]["lro"] == truth() == leo - 1, watch.describe(final)
        metrics = scrape(port)
        assert metrics.get(("mirrorlag_mirror_duplicate_records_total",
                            labels(source=mirror.src, target=mirror.dst, topic=topic)), 0) == 0
